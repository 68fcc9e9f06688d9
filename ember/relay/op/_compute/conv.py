"""Compute rules of nn.conv2d and nn.conv2d_transpose.

conv2d goes to topi's templates (packed NCHW/NHWC, depthwise, grouped) when the shapes are
static; any other layout permutation is transposed to NCHW/OIHW around it (injective stages the
template inlines), and the result transposed to ``out_layout``. With a symbolic dimension a
direct reduction (zero padding read through a guard) serves every size. conv2d_transpose uses
topi for the plain case and a grouped reduction otherwise.
"""
from __future__ import annotations

from typing import Any

from .... import topi
from ....ir.types import Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ._common import register_compute, require, require_equal
from .nn import all_static

_TOPI_LAYOUTS = {("NCHW", "OIHW"), ("NHWC", "HWIO")}


def to_layout(t: te.Tensor, src: str, dst: str) -> te.Tensor:
    """``t`` with its axes permuted from layout ``src`` to ``dst`` (letters of one set)."""
    if src == dst:
        return t
    return topi.transpose(t, [src.index(a) for a in dst])


def _conv_size(d: PrimExpr, k: PrimExpr, pad: int, s: int, dil: int) -> PrimExpr:
    return (d + pad - (k - 1) * dil - 1) // s + 1


def conv2d_generic(data: te.Tensor, weight: te.Tensor, attrs: Any, dtype: str) -> te.Tensor:
    """Grouped NCHW x OIHW convolution as one reduction (any, also symbolic, sizes)."""
    n, _, h, w = data.shape
    o, i, kh, kw = weight.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    og = o // attrs.groups
    require_equal(data.shape[1], i * attrs.groups,
                  "the data's channels must be the weight's input channels times groups")
    for size, k, pad, dil, axis in ((h, kh, pt + pb, dh, "height"), (w, kw, pl + pr, dw, "width")):
        require(size + pad >= (k - 1) * dil + 1,
                f"the kernel window must fit in the padded {axis} of the data")
    oh, ow = _conv_size(h, kh, pt + pb, sh, dh), _conv_size(w, kw, pl + pr, sw, dw)
    rc, ry, rx = (te.reduce_axis((0, i), "rc"), te.reduce_axis((0, kh), "ry"),
                  te.reduce_axis((0, kw), "rx"))

    def f(b: PrimExpr, co: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        iy, ix = y * sh + ry * dh - pt, x * sw + rx * dw - pl
        inside = tir.all(iy >= 0, iy < h, ix >= 0, ix < w)
        v = tir.if_then_else(inside, data[b, (co // og) * i + rc, iy, ix],
                             tir.const(0, data.dtype))
        return te.sum(tir.cast(v, dtype) * tir.cast(weight[co, rc, ry, rx], dtype),
                      axis=[rc, ry, rx])

    return te.compute((n, o, oh, ow), f, name="T_conv2d", tag="comm_reduce")


@register_compute("nn.conv2d")
def conv2d(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    layout, kernel_layout = attrs.data_layout, attrs.kernel_layout
    out_layout = attrs.out_layout or layout
    static = all_static(data, weight)
    if static and (layout, kernel_layout) in _TOPI_LAYOUTS:
        out = topi.nn.conv2d(data, weight, attrs.strides, attrs.padding, attrs.dilation,
                             layout, kernel_layout, attrs.groups, dtype)
    else:
        d = to_layout(data, layout, "NCHW")
        k = to_layout(weight, kernel_layout, "OIHW")
        layout = "NCHW"
        if static:
            out = topi.nn.conv2d(d, k, attrs.strides, attrs.padding, attrs.dilation, "NCHW",
                                 "OIHW", attrs.groups, dtype)
        else:
            out = conv2d_generic(d, k, attrs, dtype)
    return [to_layout(out, layout, out_layout)]


def conv2d_transpose_generic(data: te.Tensor, weight: te.Tensor, attrs: Any, dtype: str,
                             out_shape: tuple) -> te.Tensor:
    """Grouped transposed convolution, NCHW data and IOHW weight: output (y, x) gathers the
    input pixels whose scattered kernel tap lands on it."""
    _, c, h, w = data.shape
    _, og, kh, kw = weight.shape
    (sh, sw), (dh, dw), (pt, pl, _, _) = attrs.strides, attrs.dilation, attrs.padding
    cg = c // attrs.groups
    rc, ry, rx = (te.reduce_axis((0, cg), "rc"), te.reduce_axis((0, kh), "ry"),
                  te.reduce_axis((0, kw), "rx"))

    def f(b: PrimExpr, co: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        ty, tx = y + pt - ry * dh, x + pl - rx * dw
        iy, ix = ty // sh, tx // sw
        ok = tir.all(ty >= 0, tx >= 0, ty % sh == 0, tx % sw == 0, iy < h, ix < w)
        ci = (co // og) * cg + rc
        v = tir.cast(data[b, ci, iy, ix], dtype) * tir.cast(weight[ci, co % og, ry, rx], dtype)
        return te.sum(v, axis=[rc, ry, rx], where=ok)

    return te.compute(out_shape, f, name="T_conv2d_transpose", tag="comm_reduce")


@register_compute("nn.conv2d_transpose")
def conv2d_transpose(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    d = to_layout(data, attrs.data_layout, "NCHW")
    k = to_layout(weight, attrs.kernel_layout, "IOHW")  # I: in channels, O: out per group
    n, _, h, w = d.shape
    _, og, kh, kw = k.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    oph, opw = attrs.output_padding
    dims = [n, og * attrs.groups, (h - 1) * sh - pt - pb + (kh - 1) * dh + 1 + oph,
            (w - 1) * sw - pl - pr + (kw - 1) * dw + 1 + opw]
    out_layout = attrs.out_layout or attrs.data_layout
    nchw_type = [out_type.shape[out_layout.index(a)] for a in "NCHW"]  # type: ignore
    shape = tuple(tir.const(t) if isinstance(t, int) else e for t, e in zip(nchw_type, dims))
    if attrs.groups == 1 and all_static(d, k):
        out = topi.nn.conv2d_transpose_nchw(d, k, attrs.strides, attrs.padding, dtype,
                                            attrs.output_padding, attrs.dilation)
    else:
        out = conv2d_transpose_generic(d, k, attrs, dtype, shape)
    return [to_layout(out, "NCHW", out_layout)]
