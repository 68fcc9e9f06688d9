"""Padding, and the shared helpers of the windowed operators (conv, pool)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import FloatImm, IntImm, PrimExpr, ProducerLoad
from ..broadcast import INJECTIVE


def pad(data: te.Tensor, pad_before: Sequence[Any], pad_after: Sequence[Any] | None = None,
        pad_value: Any = 0.0, name: str = "T_pad", tag: str = INJECTIVE) -> te.Tensor:
    """Constant padding: ``pad_before[i]`` / ``pad_after[i]`` elements on each side of axis i."""
    n = data.ndim
    pad_after = pad_before if pad_after is None else pad_after
    if len(pad_before) != n or len(pad_after) != n:
        raise OpError(f"nn.pad: expected {n} pad widths per side, got {len(pad_before)} and "
                      f"{len(pad_after)}")
    shape = tuple(d + b + a for d, b, a in zip(data.shape, pad_before, pad_after))
    value = tir.const(pad_value, data.dtype) if not isinstance(pad_value, PrimExpr) else (
        tir.cast(pad_value, data.dtype))

    def f(*idx: PrimExpr) -> PrimExpr:
        conds, src = [], []
        for k, (i, b, d) in enumerate(zip(idx, pad_before, data.shape)):
            if _zero(b) and _zero(pad_after[k]):
                src.append(i)
                continue
            conds += [i >= b, i < d + b]
            src.append(i - b)
        if not conds:
            return data(*src)
        return tir.if_then_else(tir.all(*conds), data(*src), value)

    # the widths and a constant value, for kernels that take the pad over (layout_nchwc: a
    # zero pad of the channels into whole blocks)
    attrs = {"pad_before": tuple(pad_before), "pad_after": tuple(pad_after),
             "pad_value": _constant(pad_value)}
    return te.compute(shape, f, name=name, tag=tag, attrs=attrs)


def _constant(v: Any) -> float | None:
    """``v`` as a number when it is one: a Python number, a constant expression, or a read of
    a 0-d constant tensor (a relay constant's, in a fused function); else None."""
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, ProducerLoad):
        op = v.producer.op
        if isinstance(op, te.ComputeOp) and not op.axis and len(op.body) == 1:
            v = op.body[0]
    return float(v.value) if isinstance(v, (IntImm, FloatImm)) else None


def _zero(v: Any) -> bool:
    return (isinstance(v, int) and v == 0) or (isinstance(v, IntImm) and v.value == 0)


def pad_tuple(padding: Any, kernel: tuple[int, int] | None = None) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from an int, (h, w), or (top, left, bottom, right)."""
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        if padding.upper() == "SAME" and kernel is not None:
            ph, pw = kernel[0] - 1, kernel[1] - 1
            return ph // 2, pw // 2, ph - ph // 2, pw - pw // 2
        raise OpError(f"padding {padding!r} is not supported")
    if isinstance(padding, int):
        return padding, padding, padding, padding
    p = [int(x) for x in padding]
    if len(p) == 1:
        return p[0], p[0], p[0], p[0]
    if len(p) == 2:
        return p[0], p[1], p[0], p[1]
    if len(p) == 4:
        return p[0], p[1], p[2], p[3]
    raise OpError(f"padding must have 1, 2 or 4 values, got {list(padding)}")


def pair(v: Any) -> tuple[int, int]:
    """(h, w) from an int or a pair."""
    if isinstance(v, int):
        return v, v
    v = [int(x) for x in v]
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def static(name: str, shape: Sequence[PrimExpr]) -> list[int]:
    out = []
    for d in shape:
        if not isinstance(d, IntImm):
            raise OpError(f"{name}: needs static shapes, got {[str(x) for x in shape]}")
        out.append(d.value)
    return out


def out_size(name: str, size: int, k: int, stride: int, dilation: int, before: int,
             after: int, ceil_mode: bool = False) -> int:
    """Output extent of a window of ``k`` taps (dilated) sliding with ``stride``."""
    span = (k - 1) * dilation + 1
    total = size + before + after - span
    if total < 0:
        raise OpError(f"{name}: the window ({span}) is larger than the padded input "
                      f"({size + before + after})")
    n = (total + stride - 1) // stride + 1 if ceil_mode else total // stride + 1
    if ceil_mode and (n - 1) * stride >= size + before:
        n -= 1
    return n
