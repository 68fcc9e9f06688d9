"""Activations, bias_add, batch_flatten, upsampling and conv2d_transpose."""
from __future__ import annotations

from typing import Any

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ..broadcast import BROADCAST, ELEMWISE, INJECTIVE
from .pad import pad_tuple, pair, static


def relu(x: te.Tensor) -> te.Tensor:
    """max(x, 0)."""
    return te.compute(x.shape, lambda *i: tir.max(x(*i), tir.const(0, x.dtype)), name="T_relu",
                      tag=ELEMWISE)


def leaky_relu(x: te.Tensor, alpha: float) -> te.Tensor:
    """x where x > 0, alpha * x elsewhere."""
    a = tir.const(alpha, x.dtype)
    return te.compute(x.shape, lambda *i: tir.Select_(x(*i) > 0, x(*i), x(*i) * a),
                      name="T_leaky_relu", tag=ELEMWISE)


def prelu(x: te.Tensor, slope: te.Tensor, axis: int = 1) -> te.Tensor:
    """x where x > 0, slope[c] * x elsewhere (c indexes ``axis``)."""
    axis %= x.ndim
    return te.compute(x.shape, lambda *i: tir.Select_(x(*i) > 0, x(*i), x(*i) * slope[i[axis]]),
                      name="T_prelu", tag=BROADCAST)


def bias_add(data: te.Tensor, bias: te.Tensor, axis: int = 1) -> te.Tensor:
    """data + bias broadcast along ``axis``."""
    axis %= data.ndim
    return te.compute(data.shape, lambda *i: data(*i) + bias[i[axis]], name="T_bias_add",
                      tag=BROADCAST)


def batch_flatten(data: te.Tensor) -> te.Tensor:
    """[N, d1, d2, ...] -> [N, d1 * d2 * ...]."""
    from ..transform import reshape

    rest: PrimExpr = tir.const(1)
    for d in data.shape[1:]:
        rest = rest * d
    return reshape(data, [data.shape[0], rest])


def _src(layout: str) -> tuple[int, int]:
    if layout not in ("NCHW", "NHWC"):
        raise OpError(f"nn.upsampling: layout {layout} is not supported (use NCHW or NHWC)")
    return (2, 3) if layout == "NCHW" else (1, 2)


def upsampling(data: te.Tensor, scale_h: float, scale_w: float, layout: str = "NCHW",
               method: str = "nearest_neighbor", align_corners: bool = False) -> te.Tensor:
    """Resize by (scale_h, scale_w): nearest neighbour or bilinear (half-pixel centres, or
    corner-aligned with ``align_corners``)."""
    hi, wi = _src(layout)
    shp = static("nn.upsampling", data.shape)
    h, w = shp[hi], shp[wi]
    oh, ow = int(round(h * scale_h)), int(round(w * scale_w))
    out_shape = list(shp)
    out_shape[hi], out_shape[wi] = oh, ow
    f32 = "float32" if data.dtype != "float64" else "float64"

    def at(idx: tuple, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        src = list(idx)
        src[hi], src[wi] = y, x
        return tir.cast(data(*src), f32)

    if method == "nearest_neighbor":
        def near(*idx: PrimExpr) -> PrimExpr:
            y = tir.min(tir.cast(tir.floor(tir.cast(idx[hi], f32) * (h / oh)), "int32"), h - 1)
            x = tir.min(tir.cast(tir.floor(tir.cast(idx[wi], f32) * (w / ow)), "int32"), w - 1)
            return tir.cast(at(idx, y, x), data.dtype)
        return te.compute(tuple(out_shape), near, name="T_upsampling", tag=INJECTIVE)
    if method not in ("bilinear", "linear"):
        raise OpError(f"nn.upsampling: method {method!r} is not supported")

    def coord(i: PrimExpr, n_in: int, n_out: int) -> PrimExpr:
        fi = tir.cast(i, f32)
        if align_corners:
            return fi * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        return (fi + 0.5) * (n_in / n_out) - 0.5

    def lerp(*idx: PrimExpr) -> PrimExpr:
        fy, fx = coord(idx[hi], h, oh), coord(idx[wi], w, ow)
        y0f, x0f = tir.floor(fy), tir.floor(fx)
        dy, dx = fy - y0f, fx - x0f
        y0 = tir.cast(y0f, "int32")
        x0 = tir.cast(x0f, "int32")
        ya, yb = tir.min(tir.max(y0, 0), h - 1), tir.min(tir.max(y0 + 1, 0), h - 1)
        xa, xb = tir.min(tir.max(x0, 0), w - 1), tir.min(tir.max(x0 + 1, 0), w - 1)
        top = at(idx, ya, xa) * (1.0 - dx) + at(idx, ya, xb) * dx
        bot = at(idx, yb, xa) * (1.0 - dx) + at(idx, yb, xb) * dx
        return tir.cast(top * (1.0 - dy) + bot * dy, data.dtype)

    return te.compute(tuple(out_shape), lerp, name="T_upsampling", tag=INJECTIVE)


def conv2d_transpose_nchw(data: te.Tensor, kernel: te.Tensor, strides: Any = 1,
                          padding: Any = 0, out_dtype: str | None = None,
                          output_padding: Any = 0, dilation: Any = 1) -> te.Tensor:
    """Transposed convolution: data [N, CI, H, W], kernel [CI, CO, KH, KW] (IOHW)."""
    n, ci, h, w = static("nn.conv2d_transpose", data.shape)
    ci2, co, kh, kw = static("nn.conv2d_transpose", kernel.shape)
    if ci != ci2:
        raise OpError(f"nn.conv2d_transpose: data has {ci} channels but weight expects {ci2} "
                      "(layout NCHW, kernel_layout IOHW)")
    sh, sw = pair(strides)
    dh, dw = pair(dilation)
    pt, pl, pb, pr = pad_tuple(padding)
    oph, opw = pair(output_padding)
    oh = (h - 1) * sh - pt - pb + (kh - 1) * dh + 1 + oph
    ow = (w - 1) * sw - pl - pr + (kw - 1) * dw + 1 + opw
    out_dtype = out_dtype or data.dtype
    rc, ry, rx = (te.reduce_axis((0, ci), "rc"), te.reduce_axis((0, kh), "ry"),
                  te.reduce_axis((0, kw), "rx"))

    def f(b: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        ty, tx = y + pt - ry * dh, x + pl - rx * dw
        iy, ix = ty // sh, tx // sw
        ok = tir.all(ty >= 0, tx >= 0, ty % sh == 0, tx % sw == 0, iy < h, ix < w)
        v = tir.cast(data[b, rc, iy, ix], out_dtype) * tir.cast(kernel[rc, c, ry, rx], out_dtype)
        return te.sum(v, axis=[rc, ry, rx], where=ok)

    return te.compute((n, co, oh, ow), f, name="T_conv2d_transpose", tag="conv2d_generic")
