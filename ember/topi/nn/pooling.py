"""2-d pooling (max/avg with padding, ceil_mode, count_include_pad), global and adaptive pools.

Layouts NCHW and NHWC. Pools are reductions over a small window, scheduled as reductions
(parallel over the output, window loops inside).
"""
from __future__ import annotations

from typing import Any

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ..reduction import REDUCE
from .pad import out_size, pad_tuple, pair, static


def _hw(layout: str) -> tuple[int, int]:
    if layout not in ("NCHW", "NHWC"):
        raise OpError(f"pool2d: layout {layout} is not supported (use NCHW or NHWC)")
    return (2, 3) if layout == "NCHW" else (1, 2)


def _at(layout: str, x: te.Tensor, b: PrimExpr, c: PrimExpr, y: PrimExpr, w: PrimExpr
        ) -> PrimExpr:
    return x[b, c, y, w] if layout == "NCHW" else x[b, y, w, c]


def _split(layout: str, idx: tuple) -> tuple:
    return (idx[0], idx[1], idx[2], idx[3]) if layout == "NCHW" else (
        idx[0], idx[3], idx[1], idx[2])


def _shape(layout: str, n: int, c: int, h: int, w: int) -> tuple:
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def pool2d(data: te.Tensor, kernel: Any, stride: Any = 1, dilation: Any = 1, padding: Any = 0,
           pool_type: str = "max", ceil_mode: bool = False, layout: str = "NCHW",
           count_include_pad: bool = True) -> te.Tensor:
    """Max or average pooling over ``kernel`` windows (padding never counts for max)."""
    hi, wi = _hw(layout)
    shp = static("nn.pool2d", data.shape)
    n, h, w = shp[0], shp[hi], shp[wi]
    c = shp[1] if layout == "NCHW" else shp[3]
    kh, kw = pair(kernel)
    sh, sw = pair(stride)
    dh, dw = pair(dilation)
    pt, pl, pb, pr = pad_tuple(padding)
    oh = out_size("nn.pool2d", h, kh, sh, dh, pt, pb, ceil_mode)
    ow = out_size("nn.pool2d", w, kw, sw, dw, pl, pr, ceil_mode)
    ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")

    def window(idx: tuple) -> tuple:
        b, ch, y, x = _split(layout, idx)
        iy, ix = y * sh - pt + ry * dh, x * sw - pl + rx * dw
        inside = tir.all(iy >= 0, iy < h, ix >= 0, ix < w)
        return b, ch, y, x, iy, ix, inside

    if pool_type == "max":
        def fmax(*idx: PrimExpr) -> PrimExpr:
            b, ch, _, _, iy, ix, inside = window(idx)
            return te.max(_at(layout, data, b, ch, iy, ix), axis=[ry, rx], where=inside)
        return te.compute(_shape(layout, n, c, oh, ow), fmax, name="T_pool_max", tag=REDUCE)
    if pool_type != "avg":
        raise OpError(f"nn.pool2d: pool_type must be 'max' or 'avg', got {pool_type!r}")

    def fsum(*idx: PrimExpr) -> PrimExpr:
        b, ch, _, _, iy, ix, inside = window(idx)
        return te.sum(_at(layout, data, b, ch, iy, ix), axis=[ry, rx], where=inside)

    total = te.compute(_shape(layout, n, c, oh, ow), fsum, name="T_pool_sum", tag=REDUCE)

    lo_h, hi_h = (-pt, h + pb) if count_include_pad else (0, h)
    lo_w, hi_w = (-pl, w + pr) if count_include_pad else (0, w)

    def favg(*idx: PrimExpr) -> PrimExpr:
        _, _, y, x = _split(layout, idx)
        cy = _taps(y * sh - pt, lo_h, hi_h, kh, dh)
        cx = _taps(x * sw - pl, lo_w, hi_w, kw, dw)
        return total(*idx) / tir.cast(tir.max(cy * cx, 1), data.dtype)

    return te.compute(total.shape, favg, name="T_pool_avg", tag="elemwise")


def _taps(start: PrimExpr, lo: int, hi: int, k: int, d: int) -> PrimExpr:
    """How many of the taps start + r*d (r < k) fall in [lo, hi)."""
    def first(bound: int) -> PrimExpr:  # taps r with start + r*d < bound: ceil((bound-start)/d)
        return tir.min(tir.max(tir.floordiv(bound - start + d - 1, d), 0), k)

    return first(hi) - first(lo)


def max_pool2d(data: te.Tensor, pool_size: Any, strides: Any = 1, padding: Any = 0,
               layout: str = "NCHW", ceil_mode: bool = False, dilation: Any = 1) -> te.Tensor:
    """Max pooling (``relay.nn.max_pool2d`` parameters)."""
    return pool2d(data, pool_size, strides, dilation, padding, "max", ceil_mode, layout)


def avg_pool2d(data: te.Tensor, pool_size: Any, strides: Any = 1, padding: Any = 0,
               layout: str = "NCHW", ceil_mode: bool = False, count_include_pad: bool = False,
               dilation: Any = 1) -> te.Tensor:
    """Average pooling (``relay.nn.avg_pool2d`` parameters)."""
    return pool2d(data, pool_size, strides, dilation, padding, "avg", ceil_mode, layout,
                  count_include_pad)


def global_pool(data: te.Tensor, pool_type: str = "avg", layout: str = "NCHW") -> te.Tensor:
    """Pool over the whole H x W plane; output keeps H = W = 1."""
    hi, wi = _hw(layout)
    shp = static("nn.global_pool", data.shape)
    h, w = shp[hi], shp[wi]
    ry, rx = te.reduce_axis((0, h), "ry"), te.reduce_axis((0, w), "rx")
    out_shape = list(shp)
    out_shape[hi] = out_shape[wi] = 1

    def f(*idx: PrimExpr) -> PrimExpr:
        b, ch, _, _ = _split(layout, idx)
        v = _at(layout, data, b, ch, ry, rx)
        return te.max(v, axis=[ry, rx]) if pool_type == "max" else te.sum(v, axis=[ry, rx])

    red = te.compute(tuple(out_shape), f, name=f"T_global_{pool_type}_pool", tag=REDUCE)
    if pool_type == "max":
        return red
    return te.compute(red.shape, lambda *i: red(*i) / tir.const(h * w, data.dtype),
                      name="T_global_avg_pool", tag="elemwise")


def global_avg_pool2d(data: te.Tensor, layout: str = "NCHW") -> te.Tensor:
    return global_pool(data, "avg", layout)


def global_max_pool2d(data: te.Tensor, layout: str = "NCHW") -> te.Tensor:
    return global_pool(data, "max", layout)


def adaptive_pool(data: te.Tensor, output_size: Any, pool_type: str = "avg",
                  layout: str = "NCHW") -> te.Tensor:
    """Adaptive pooling: output cell i covers [floor(i*H/OH), ceil((i+1)*H/OH))."""
    hi, wi = _hw(layout)
    shp = static("nn.adaptive_pool2d", data.shape)
    h, w = shp[hi], shp[wi]
    oh, ow = pair(output_size if output_size is not None else (h, w))
    kmax_h = max(-(-(i + 1) * h // oh) - (i * h // oh) for i in range(oh))
    kmax_w = max(-(-(j + 1) * w // ow) - (j * w // ow) for j in range(ow))
    ry, rx = te.reduce_axis((0, kmax_h), "ry"), te.reduce_axis((0, kmax_w), "rx")
    out_shape = list(shp)
    out_shape[hi], out_shape[wi] = oh, ow

    def bounds(y: PrimExpr, x: PrimExpr) -> tuple:
        y0, x0 = (y * h) // oh, (x * w) // ow
        y1, x1 = ((y + 1) * h + oh - 1) // oh, ((x + 1) * w + ow - 1) // ow
        return y0, x0, y1, x1

    def f(*idx: PrimExpr) -> PrimExpr:
        b, ch, y, x = _split(layout, idx)
        y0, x0, y1, x1 = bounds(y, x)
        inside = tir.all(y0 + ry < y1, x0 + rx < x1)
        v = _at(layout, data, b, ch, y0 + ry, x0 + rx)
        red = te.max if pool_type == "max" else te.sum
        return red(v, axis=[ry, rx], where=inside)

    red = te.compute(tuple(out_shape), f, name=f"T_adaptive_{pool_type}", tag=REDUCE)
    if pool_type == "max":
        return red

    def favg(*idx: PrimExpr) -> PrimExpr:
        _, _, y, x = _split(layout, idx)
        y0, x0, y1, x1 = bounds(y, x)
        return red(*idx) / tir.cast((y1 - y0) * (x1 - x0), data.dtype)

    return te.compute(red.shape, favg, name="T_adaptive_avg_pool", tag="elemwise")


def adaptive_avg_pool2d(data: te.Tensor, output_size: Any, layout: str = "NCHW") -> te.Tensor:
    return adaptive_pool(data, output_size, "avg", layout)


def adaptive_max_pool2d(data: te.Tensor, output_size: Any, layout: str = "NCHW") -> te.Tensor:
    return adaptive_pool(data, output_size, "max", layout)
