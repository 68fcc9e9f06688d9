"""Shared hypothesis strategies: shapes, broadcastable shapes, dtypes, arrays and op attributes.

Import them from any test (``tests/`` is on ``sys.path`` through its conftest)::

    from strategies import shapes, broadcastable_pair, arrays_for

Shapes favour small and odd sizes and size-1 dimensions, where broadcasting and window
arithmetic go wrong.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int8", "int32", "int64", "uint8")
ALL_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")

sides = st.sampled_from([1, 1, 2, 3, 4, 5, 7])


def shapes(min_rank: int = 0, max_rank: int = 4, min_side: int = 1,
           max_side: int = 7) -> st.SearchStrategy[tuple[int, ...]]:
    """Tensor shapes with small, often odd or size-1, dimensions."""
    side = sides.filter(lambda s: min_side <= s <= max_side) if min_side >= 1 else \
        st.integers(min_side, max_side)
    return st.lists(side, min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def broadcastable_pair(draw: Any, max_rank: int = 4) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that numpy can broadcast: dims dropped from the front or set to 1."""
    full = draw(shapes(0, max_rank))

    def derive() -> tuple[int, ...]:
        keep = draw(st.integers(0, len(full)))
        tail = full[len(full) - keep:]
        return tuple(1 if draw(st.booleans()) and draw(st.booleans()) else d for d in tail)

    return derive(), derive()


@st.composite
def non_broadcastable_pair(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes whose last dimensions differ and are both > 1."""
    lead = draw(shapes(0, 2))
    a, b = draw(st.integers(2, 6)), draw(st.integers(2, 6))
    b = a + 1 if a == b else b
    return (*lead, a), (b,)


def dtypes(kind: str = "all") -> st.SearchStrategy[str]:
    """``"float"``, ``"int"`` or ``"all"`` dtypes as strings."""
    pool = {"float": FLOAT_DTYPES, "int": INT_DTYPES, "all": ALL_DTYPES}[kind]
    return st.sampled_from(pool)


def arrays_for(dtype: str, shape: tuple[int, ...], low: float = -10,
               high: float = 10) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype``/``shape`` with finite values in [low, high] (clipped for unsigned)."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        elements = st.booleans()
    elif np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        elements = st.integers(max(int(low), info.min), min(int(high), info.max))
    else:
        elements = st.floats(low, high, allow_nan=False, allow_infinity=False,
                             width=dt.itemsize * 8)
    return hnp.arrays(dt, shape, elements=elements)


def axes_for(ndim: int) -> st.SearchStrategy[tuple[int, ...] | None]:
    """None, or a set of distinct axes of a rank-``ndim`` tensor, each maybe negative."""
    if ndim == 0:
        return st.just(None)
    picked = st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)
    signed = picked.flatmap(lambda ax: st.tuples(*[st.sampled_from([a, a - ndim]) for a in ax]))
    return st.one_of(st.none(), signed)


@st.composite
def conv2d_case(draw: Any, layout: str | None = None) -> dict[str, Any]:
    """Shapes and attrs of a valid nn.conv2d (groups, depthwise, dilation, odd padding)."""
    layout = layout or draw(st.sampled_from(["NCHW", "NHWC"]))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin = groups * draw(st.integers(1, 2))
    cout = groups * draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(4))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    min_h = (kh - 1) * dilation[0] + 1 - padding[0] - padding[2]
    min_w = (kw - 1) * dilation[1] + 1 - padding[1] - padding[3]
    h, w = draw(st.integers(max(1, min_h), 8)), draw(st.integers(max(1, min_w), 8))
    n = draw(st.integers(1, 2))
    kernel_layout = "OIHW" if layout == "NCHW" else "HWIO"
    data = (n, cin, h, w) if layout == "NCHW" else (n, h, w, cin)
    weight_oihw = (cout, cin // groups, kh, kw)
    weight = tuple(weight_oihw["OIHW".index(a)] for a in kernel_layout)
    attrs = {"strides": strides, "padding": padding, "dilation": dilation, "groups": groups,
                 "data_layout": layout, "kernel_layout": kernel_layout}
    return {"data": data, "weight": weight, "attrs": attrs}


@st.composite
def pool2d_case(draw: Any, avg: bool = False) -> dict[str, Any]:
    """Shape and attrs of a valid max/avg pool (padding below the window, ceil_mode)."""
    layout = draw(st.sampled_from(["NCHW", "NHWC"]))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, k[i % 2] - 1)) for i in range(4))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    h = draw(st.integers((k[0] - 1) * dilation[0] + 1, 8))
    w = draw(st.integers((k[1] - 1) * dilation[1] + 1, 8))
    c = draw(st.integers(1, 3))
    data = (1, c, h, w) if layout == "NCHW" else (1, h, w, c)
    attrs = {"pool_size": k, "strides": strides, "dilation": dilation, "padding": padding,
                 "layout": layout, "ceil_mode": draw(st.booleans())}
    if avg:
        attrs["count_include_pad"] = draw(st.booleans())
    return {"data": data, "attrs": attrs}
