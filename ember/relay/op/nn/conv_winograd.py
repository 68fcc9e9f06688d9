"""nn.contrib_conv2d_winograd_NCHWc_fused and its residual form: a dense 3x3 stride-1 conv2d
in NCHW[L]c by Winograd's F(m x m, 3x3) (``topi/nn/conv2d_winograd.py``), with the epilogue
of ``nn.contrib_conv2d_NCHWc_fused`` (bias, residual add, activation; the same attrs) and
``tile_size`` = m (2 or 4).

Layouts (``L`` = attrs.lanes = attrs.in_block, ``a`` = m + 2): data ``[N, IC/L, H, W, L]``;
weight ``U[a*a, OC/L, IC, L]`` (the filters transformed by ``G g G^T``, by the layout planner
at compile time); bias ``[OC]``; result and residual ``[N, OC/L, OH, OW, L]`` with
``OH = H + pt + pb - 2``. The batch and the image sizes may be ``?``.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....topi.nn import conv2d_winograd as W
from .._attrs_base import attrs_class
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape
from .conv import conv_out_size
from .conv_nchwc import (Conv2DNCHWcFusedAttrs, _geometry, check_residual, epilogue_ref,
                         fused_result)

__all__ = ["contrib_conv2d_winograd_nchwc_fused"]
OP = "nn.contrib_conv2d_winograd_NCHWc_fused"


@attrs_class("Conv2DWinogradNCHWcFusedAttrs")
class Conv2DWinogradNCHWcFusedAttrs(Conv2DNCHWcFusedAttrs):
    """The fused blocked convolution's attributes plus ``tile_size`` (m of F(m x m, 3x3))."""

    tile_size: int = 4
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        Conv2DNCHWcFusedAttrs.__post_init__(self)  # slotted dataclasses: no zero-arg super
        self._int("tile_size")
        self._choice("tile_size", W.TILE_SIZES)


def _rel(args: list[TensorType], attrs: Conv2DWinogradNCHWcFusedAttrs) -> TensorType:
    data, weight, bias = args[:3]
    lanes, m = attrs.lanes, attrs.tile_size
    a = m + 2
    if data.ndim != 5 or weight.ndim != 4 or bias.ndim != 1:
        raise fail(OP, f"expected data [N, C/{lanes}, H, W, {lanes}], weight [{a * a}, O/{lanes}, "
                       f"I, {lanes}] and bias [O]; got {fmt_shape(data.shape)}, "
                       f"{fmt_shape(weight.shape)}, {fmt_shape(bias.shape)}")
    n, icb, h, w, dcb = data.shape
    points, ocb, ic, wl = weight.shape
    if not all(isinstance(d, int) for d in (icb, dcb, points, ocb, ic, wl, bias.shape[0])):
        raise fail(OP, f"the channel and lane dimensions must be static (the weight is "
                       f"transformed at build time); got data {fmt_shape(data.shape)}, weight "
                       f"{fmt_shape(weight.shape)}, bias {fmt_shape(bias.shape)}")
    if (attrs.in_block != lanes or dcb != lanes or wl != lanes or points != a * a
            or ic != icb * lanes or bias.shape[0] != ocb * lanes):
        raise fail(OP, f"data {fmt_shape(data.shape)}, weight {fmt_shape(weight.shape)} and bias "
                       f"{fmt_shape(bias.shape)} do not match lanes = in_block = {lanes}, "
                       f"tile_size={m} (weight [{a * a}, O/{lanes}, I, {lanes}])")
    if (attrs.strides, attrs.dilation, attrs.groups) != ((1, 1), (1, 1), 1) or not all(
            0 <= p <= 2 for p in attrs.padding):
        raise fail(OP, f"a dense 3x3 conv of stride 1, dilation 1 and padding 0..2 only; got "
                       f"strides {attrs.strides}, dilation {attrs.dilation}, groups "
                       f"{attrs.groups}, padding {attrs.padding}")
    pt, pl, pb, pr = attrs.padding
    oh = conv_out_size(OP, "height", h, 3, pt + pb, 1, 1)
    ow = conv_out_size(OP, "width", w, 3, pl + pr, 1, 1)
    return fused_result(OP, args, (n, ocb, oh, ow, lanes))


def _ref(x: np.ndarray, u: np.ndarray, b: np.ndarray, *rest: Any,
         attrs: Conv2DWinogradNCHWcFusedAttrs) -> np.ndarray:
    """The Winograd algorithm itself in float64 (the transformed weights have no cheap
    inverse): pad, a x a patches at stride m, ``A^T [sum_ic (B^T d B) U] A``."""
    m, lanes = attrs.tile_size, attrs.lanes
    a = m + 2
    bt, at = (np.array(t, "float64") for t in W.transforms(m))
    n, icb, h, w, _ = x.shape
    pt, pl, pb, pr = attrs.padding
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    th, tw = -(-oh // m), -(-ow // m)
    xn = x.transpose(0, 1, 4, 2, 3).reshape(n, icb * lanes, h, w).astype("float64")
    xp = np.zeros((n, icb * lanes, th * m + 2, tw * m + 2))
    rows, cols = min(h, th * m + 2 - pt), min(w, tw * m + 2 - pl)
    xp[:, :, pt:pt + rows, pl:pl + cols] = xn[:, :, :rows, :cols]
    idx_y = (np.arange(th) * m)[:, None] + np.arange(a)  # [th, a]
    idx_x = (np.arange(tw) * m)[:, None] + np.arange(a)
    d = xp[:, :, idx_y[:, None, :, None], idx_x[None, :, None, :]]  # [n, ic, th, tw, a, a]
    v = np.einsum("ik,nctskl,jl->nctsij", bt, d, bt)
    uu = u.astype("float64").reshape(a, a, -1, u.shape[2], lanes)  # [a, a, ocb, ic, L]
    mm = np.einsum("nctsij,ijocl->notsijl", v, uu)
    y = np.einsum("pi,notsijl,qj->notspql", at, mm, at)  # [n, ocb, th, tw, m, m, L]
    y = y.transpose(0, 1, 2, 4, 3, 5, 6).reshape(n, -1, th * m, tw * m, lanes)[:, :, :oh, :ow]
    return epilogue_ref(y + b.reshape(1, -1, 1, 1, lanes), rest, attrs, x.dtype)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight, bias = inputs[:3]
    residual = inputs[3] if len(inputs) == 4 else None
    geo = _geometry(attrs, data, (3, 3, int(weight.shape[3])), out_type)
    check_residual(residual, geo)
    return [W.conv2d_winograd(data, weight, bias, residual, geo, attrs.tile_size,
                              attrs.activation, (attrs.clip_min, attrs.clip_max),
                              attrs.act_after_add)]


defop(OP, _rel, _ref, OPAQUE, args=("data", "weight", "bias"),
      attrs=Conv2DWinogradNCHWcFusedAttrs,
      doc="3x3 stride-1 conv2d in NCHW[L]c by Winograd F(m x m, 3x3), bias and activation.",
      level=10, compute=_compute)
defop(OP + "_add", _rel, _ref, OPAQUE, args=("data", "weight", "bias", "residual"),
      attrs=Conv2DWinogradNCHWcFusedAttrs,
      doc="3x3 stride-1 conv2d in NCHW[L]c by Winograd F(m x m, 3x3), bias, residual add and "
          "activation.", level=10, compute=_compute)


def contrib_conv2d_winograd_nchwc_fused(data: Any, weight: Any, bias: Any, residual: Any = None,
                                        **attrs: Any) -> Call:
    """The Winograd fused blocked convolution (see the module docstring)."""
    a = Conv2DWinogradNCHWcFusedAttrs(**attrs)
    name = OP if residual is None else OP + "_add"
    return call(name, data, weight, bias, *([] if residual is None else [residual]), attrs=a)
