"""2-D pooling: max/avg (with dilation, padding, ceil_mode, count_include_pad), global and
adaptive forms. Any layout with unsplit H and W axes works (NCHW, NHWC, NCHW16c)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType
from .._layout import Layout
from .._reg import OUT_ELEMWISE_FUSABLE, call, defop
from .._shape import fail, fmt_shape, tensor_of
from ._attrs import AdaptivePool2DAttrs, AvgPool2DAttrs, GlobalPool2DAttrs, MaxPool2DAttrs
from .conv import conv_out_size

__all__ = [
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "avg_pool2d",
    "global_avg_pool2d",
    "global_max_pool2d",
    "max_pool2d",
]


def _hw_axes(op: str, ty: TensorType | tuple[int, ...], layout: str) -> tuple[int, int]:
    lay = Layout.parse(layout)
    shape = ty.shape if isinstance(ty, TensorType) else ty
    if len(shape) != len(lay.axes):
        raise fail(op, f"data must have rank {len(lay.axes)} (layout {layout}), got rank "
                       f"{len(shape)} (shape {fmt_shape(shape)})")
    return lay.index("H"), lay.index("W")


def _pool_rel(op: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        data = args[0]
        ha, wa = _hw_axes(op, data, attrs.layout)
        (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
        pt, pl, pb, pr = attrs.padding
        shape = list(data.shape)
        shape[ha] = conv_out_size(op, "height", shape[ha], kh, pt + pb, sh, dh, attrs.ceil_mode)
        shape[wa] = conv_out_size(op, "width", shape[wa], kw, pl + pr, sw, dw, attrs.ceil_mode)
        return tensor_of(shape, data.dtype)

    return rel


def _hw_last(x: np.ndarray, ha: int, wa: int) -> tuple[np.ndarray, list[int]]:
    """x with H and W moved to the end, and the permutation that undoes it."""
    order = [i for i in range(x.ndim) if i not in (ha, wa)] + [ha, wa]
    return x.transpose(order), list(np.argsort(order))


def _window_count(size: int, out: int, k: int, s: int, d: int, pad_lo: int, pad_hi: int,
                  include_pad: bool) -> np.ndarray:
    # Tap coordinates in the unpadded input; count those in the region the divisor covers.
    taps = (np.arange(out) * s - pad_lo)[:, None] + np.arange(k)[None, :] * d
    lo, hi = (-pad_lo, size + pad_hi) if include_pad else (0, size)
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


def pool2d_ref(x: np.ndarray, attrs: Any, kind: str) -> np.ndarray:
    """Max or average pooling of ``x`` according to pool attrs (any H/W layout)."""
    ha, wa = _hw_axes("pool2d", x.shape, attrs.layout)
    xt, undo = _hw_last(x, ha, wa)
    h, w = xt.shape[-2:]
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding
    oh = conv_out_size("pool2d", "height", h, kh, pt + pb, sh, dh, attrs.ceil_mode)
    ow = conv_out_size("pool2d", "width", w, kw, pl + pr, sw, dw, attrs.ceil_mode)
    extra_h = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - (h + pt + pb))  # ceil_mode overhang
    extra_w = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - (w + pl + pr))
    if kind == "max":
        fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    else:
        fill = 0
    pads = [(0, 0)] * (xt.ndim - 2) + [(pt, pb + extra_h), (pl, pr + extra_w)]
    xp = np.pad(xt, pads, constant_values=fill)
    taps = [xp[..., a * dh: a * dh + (oh - 1) * sh + 1: sh, b * dw: b * dw + (ow - 1) * sw + 1: sw]
            for a in range(kh) for b in range(kw)]
    stacked = np.stack(taps, axis=-1)
    if kind == "max":
        out = stacked.max(axis=-1)
    else:
        inc = attrs.count_include_pad
        count = np.outer(_window_count(h, oh, kh, sh, dh, pt, pb, inc),
                         _window_count(w, ow, kw, sw, dw, pl, pr, inc))
        total = stacked.sum(axis=-1, dtype=x.dtype)
        out = _divide(total, np.maximum(count, 1).astype(x.dtype))
    return np.ascontiguousarray(out.transpose(undo))


def _divide(total: np.ndarray, count: np.ndarray) -> np.ndarray:
    if np.issubdtype(total.dtype, np.integer):  # integer pooling truncates, as C division does
        return (np.trunc(total / count)).astype(total.dtype)
    return total / count


defop("nn.max_pool2d", _pool_rel("nn.max_pool2d"), lambda x, attrs: pool2d_ref(x, attrs, "max"),
      OUT_ELEMWISE_FUSABLE, attrs=MaxPool2DAttrs, doc="2-D max pooling.", level=2)
defop("nn.avg_pool2d", _pool_rel("nn.avg_pool2d"), lambda x, attrs: pool2d_ref(x, attrs, "avg"),
      OUT_ELEMWISE_FUSABLE, attrs=AvgPool2DAttrs, doc="2-D average pooling.", level=2)


def max_pool2d(data: Any, pool_size: Any = (1, 1), strides: Any = (1, 1),
               dilation: Any = (1, 1), padding: Any = (0, 0), layout: str = "NCHW",
               out_layout: str = "", ceil_mode: bool = False) -> Call:
    """2-D max pooling; padding is 1, 2 (h, w) or 4 (top, left, bottom, right) values."""
    attrs = MaxPool2DAttrs(pool_size, strides, dilation, padding, layout, out_layout, ceil_mode)
    return call("nn.max_pool2d", data, attrs=attrs)


def avg_pool2d(data: Any, pool_size: Any = (1, 1), strides: Any = (1, 1),
               dilation: Any = (1, 1), padding: Any = (0, 0), layout: str = "NCHW",
               out_layout: str = "", ceil_mode: bool = False,
               count_include_pad: bool = False) -> Call:
    """2-D average pooling. count_include_pad: the divisor counts explicit padding cells
    (never the extra cells ceil_mode adds); otherwise only cells inside the input."""
    attrs = AvgPool2DAttrs(pool_size, strides, dilation, padding, layout, out_layout, ceil_mode,
                           count_include_pad)
    return call("nn.avg_pool2d", data, attrs=attrs)


# ---------------------------------------------------------------- global and adaptive
def _global_rel(op: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: GlobalPool2DAttrs) -> TensorType:
        ha, wa = _hw_axes(op, args[0], attrs.layout)
        shape = [1 if i in (ha, wa) else d for i, d in enumerate(args[0].shape)]
        return tensor_of(shape, args[0].dtype)

    return rel


def _global_ref(kind: str) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: GlobalPool2DAttrs) -> np.ndarray:
        axes = _hw_axes("global_pool2d", x.shape, attrs.layout)
        if kind == "max":
            return x.max(axis=axes, keepdims=True)
        total = x.sum(axis=axes, keepdims=True, dtype=x.dtype)
        return _divide(total, np.asarray(x.shape[axes[0]] * x.shape[axes[1]], dtype=x.dtype))

    return ref


for _kind in ("max", "avg"):
    defop(f"nn.global_{_kind}_pool2d", _global_rel(f"nn.global_{_kind}_pool2d"),
          _global_ref(_kind), OUT_ELEMWISE_FUSABLE, attrs=GlobalPool2DAttrs,
          doc=f"Global 2-D {_kind} pooling: H and W reduce to 1.", level=2)


def global_max_pool2d(data: Any, layout: str = "NCHW", out_layout: str = "") -> Call:
    """Maximum over the whole H x W plane (H and W become 1)."""
    return call("nn.global_max_pool2d", data, attrs=GlobalPool2DAttrs(layout, out_layout))


def global_avg_pool2d(data: Any, layout: str = "NCHW", out_layout: str = "") -> Call:
    """Mean over the whole H x W plane (H and W become 1)."""
    return call("nn.global_avg_pool2d", data, attrs=GlobalPool2DAttrs(layout, out_layout))


def _adaptive_rel(op: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: AdaptivePool2DAttrs) -> TensorType:
        ha, wa = _hw_axes(op, args[0], attrs.layout)
        shape = list(args[0].shape)
        if attrs.output_size is not None:
            shape[ha], shape[wa] = attrs.output_size
        return tensor_of(shape, args[0].dtype)

    return rel


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """Adaptive pooling bin i covers [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_ref(kind: str) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: AdaptivePool2DAttrs) -> np.ndarray:
        ha, wa = _hw_axes("adaptive_pool2d", x.shape, attrs.layout)
        xt, undo = _hw_last(x, ha, wa)
        h, w = xt.shape[-2:]
        oh, ow = attrs.output_size or (h, w)
        rows = []
        for h0, h1 in _bins(h, oh):
            cells = [xt[..., h0:h1, w0:w1] for w0, w1 in _bins(w, ow)]
            if kind == "max":
                rows.append([c.max(axis=(-2, -1)) for c in cells])
            else:
                rows.append([_divide(c.sum(axis=(-2, -1), dtype=x.dtype),
                                     np.asarray(c.shape[-1] * c.shape[-2], x.dtype))
                             for c in cells])
        out = np.moveaxis(np.array(rows, dtype=x.dtype), (0, 1), (-2, -1))
        return np.ascontiguousarray(out.transpose(undo))

    return ref


for _kind in ("max", "avg"):
    defop(f"nn.adaptive_{_kind}_pool2d", _adaptive_rel(f"nn.adaptive_{_kind}_pool2d"),
          _adaptive_ref(_kind), OUT_ELEMWISE_FUSABLE, attrs=AdaptivePool2DAttrs,
          doc=f"Adaptive 2-D {_kind} pooling to a fixed output size.", level=2)


def adaptive_max_pool2d(data: Any, output_size: Any = None, layout: str = "NCHW",
                        out_layout: str = "") -> Call:
    """Max pooling into an ``output_size`` grid of (possibly overlapping) bins."""
    attrs = AdaptivePool2DAttrs(output_size, layout, out_layout)
    return call("nn.adaptive_max_pool2d", data, attrs=attrs)


def adaptive_avg_pool2d(data: Any, output_size: Any = None, layout: str = "NCHW",
                        out_layout: str = "") -> Call:
    """Average pooling into an ``output_size`` grid of (possibly overlapping) bins."""
    attrs = AdaptivePool2DAttrs(output_size, layout, out_layout)
    return call("nn.adaptive_avg_pool2d", data, attrs=attrs)

