"""Compute rules of the 2-d pools: max/avg (padding, dilation, ceil_mode, count_include_pad),
global and adaptive.

Written here rather than through topi.nn.pool2d: Relay pools take any layout whose H and W
axes are not split (NCHW, NHWC, NCHW16c, ...) while topi's take NCHW/NHWC only, and the average
divisor is counted exactly per window (taps at y0 + k * dilation inside the counted region),
which topi's closed form gets wrong when a dilated window overhangs both ends of a small input.
Every pool is a reduction stage tagged ``comm_reduce``; averages divide in a following
elementwise stage (integer pools truncate, as C division does and the reference mimics).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....ir.types import Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ....topi.nn.pool_nchwc import pool2d_nchwc
from .._layout import Layout
from ._common import out_dims, register_compute, require


def _hw(layout: str) -> tuple[int, int]:
    lay = Layout.parse(layout)
    return lay.index("H"), lay.index("W")


def _with_hw(idx: tuple, ha: int, wa: int, y: PrimExpr, x: PrimExpr) -> list[PrimExpr]:
    src = list(idx)
    src[ha], src[wa] = y, x
    return src


def _out_size(d: PrimExpr, k: int, s: int, dil: int, pad: int, ceil_mode: bool) -> PrimExpr:
    room = d + pad - ((k - 1) * dil + 1)
    return (room + (s - 1 if ceil_mode else 0)) // s + 1


def _tap_count(start: PrimExpr, k: int, dil: int, lo: PrimExpr, hi: PrimExpr) -> PrimExpr:
    """How many of the taps start + j * dil (0 <= j < k) fall in [lo, hi)."""
    first = tir.max((lo - start + (dil - 1)) // dil, tir.const(0))
    last = tir.min((hi - 1 - start) // dil, tir.const(k - 1))
    return tir.max(last - first + 1, tir.const(0))


def _pool(kind: str) -> Callable[..., list[te.Tensor]]:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        ha, wa = _hw(attrs.layout)
        (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
        pt, pl, pb, pr = attrs.padding
        h, w = x.shape[ha], x.shape[wa]
        for size, k, pad, dil, axis in ((h, kh, pt + pb, dh, "height"), (w, kw, pl + pr, dw,
                                                                           "width")):
            require(size + pad >= (k - 1) * dil + 1,
                    f"the pooling window must fit in the padded {axis} of the data")
        dims = list(x.shape)
        dims[ha] = _out_size(h, kh, sh, dh, pt + pb, attrs.ceil_mode)
        dims[wa] = _out_size(w, kw, sw, dw, pl + pr, attrs.ceil_mode)
        shape = out_dims(out_type, dims)  # type: ignore[arg-type]
        blocked = pool2d_nchwc(x, kind, shape, attrs)  # NCHW[L]c: ember's C kernel
        if blocked is not None:
            return [blocked]
        ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
        red = te.max if kind == "max" else te.sum

        def f(*idx: PrimExpr) -> PrimExpr:
            iy, ix = idx[ha] * sh - pt + ry * dh, idx[wa] * sw - pl + rx * dw
            inside = tir.all(iy >= 0, iy < h, ix >= 0, ix < w)
            return red(x(*_with_hw(idx, ha, wa, iy, ix)), axis=[ry, rx], where=inside)

        total = te.compute(shape, f, name=f"T_pool_{kind}", tag="comm_reduce")
        if kind == "max":
            return [total]
        inc = attrs.count_include_pad

        def avg(*idx: PrimExpr) -> PrimExpr:
            y0, x0 = idx[ha] * sh - pt, idx[wa] * sw - pl
            cy = _tap_count(y0, kh, dh, tir.const(-pt if inc else 0), h + pb if inc else h)
            cx = _tap_count(x0, kw, dw, tir.const(-pl if inc else 0), w + pr if inc else w)
            return total(*idx) / tir.cast(tir.max(cy * cx, tir.const(1)), x.dtype)

        return [te.compute(shape, avg, name="T_pool_avg", tag="elemwise")]

    return rule


register_compute("nn.max_pool2d")(_pool("max"))
register_compute("nn.avg_pool2d")(_pool("avg"))


def _global(kind: str) -> Callable[..., list[te.Tensor]]:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        ha, wa = _hw(attrs.layout)
        h, w = x.shape[ha], x.shape[wa]
        shape = tuple(tir.const(1) if k in (ha, wa) else d for k, d in enumerate(x.shape))
        ry, rx = te.reduce_axis((0, h), "ry"), te.reduce_axis((0, w), "rx")
        red = te.max if kind == "max" else te.sum
        total = te.compute(shape, lambda *i: red(x(*_with_hw(i, ha, wa, ry.var, rx.var)),
                                                    axis=[ry, rx]),
                           name=f"T_global_{kind}_pool", tag="comm_reduce")
        if kind == "max":
            return [total]
        return [te.compute(shape, lambda *i: total(*i) / tir.cast(h * w, x.dtype),
                           name="T_global_avg_pool", tag="elemwise")]

    return rule


register_compute("nn.global_max_pool2d")(_global("max"))
register_compute("nn.global_avg_pool2d")(_global("avg"))


def _adaptive(kind: str) -> Callable[..., list[te.Tensor]]:
    """Output cell i covers [floor(i * H / OH), ceil((i + 1) * H / OH)) on each axis."""

    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        ha, wa = _hw(attrs.layout)
        shape = out_dims(out_type, list(x.shape))  # type: ignore[arg-type]
        h, w, oh, ow = x.shape[ha], x.shape[wa], shape[ha], shape[wa]
        kh, kw = _max_bin(h, oh), _max_bin(w, ow)
        ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")

        def bins(i: PrimExpr, size: PrimExpr, out: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
            return (i * size) // out, ((i + 1) * size + out - 1) // out

        def f(*idx: PrimExpr) -> PrimExpr:
            (y0, y1), (x0, x1) = bins(idx[ha], h, oh), bins(idx[wa], w, ow)
            inside = tir.all(y0 + ry < y1, x0 + rx < x1)
            red = te.max if kind == "max" else te.sum
            return red(x(*_with_hw(idx, ha, wa, y0 + ry, x0 + rx)), axis=[ry, rx], where=inside)

        total = te.compute(shape, f, name=f"T_adaptive_{kind}_pool", tag="comm_reduce")
        if kind == "max":
            return [total]

        def avg(*idx: PrimExpr) -> PrimExpr:
            (y0, y1), (x0, x1) = bins(idx[ha], h, oh), bins(idx[wa], w, ow)
            return total(*idx) / tir.cast((y1 - y0) * (x1 - x0), x.dtype)

        return [te.compute(shape, avg, name="T_adaptive_avg_pool", tag="elemwise")]

    return rule


def _max_bin(size: PrimExpr, out: PrimExpr) -> PrimExpr:
    """The widest bin: a static bound when sizes are static, else the whole axis (guarded)."""
    s, o = getattr(size, "value", None), getattr(out, "value", None)
    if s is None or o is None:
        return size
    return tir.const(max(-(-(i + 1) * s // o) - (i * s // o) for i in range(o)))


register_compute("nn.adaptive_max_pool2d")(_adaptive("max"))
register_compute("nn.adaptive_avg_pool2d")(_adaptive("avg"))
