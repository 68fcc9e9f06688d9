"""Compute rules of the blocked, fused convolutions (nn.contrib_conv2d_NCHWc_fused[_add]):
calls of the C micro-kernels in ``topi.nn.conv2d_nchwc``, for the SIMD level of the current
target (only the register tile depends on it; the lane count is the op's)."""
from __future__ import annotations

from typing import Any

from ....ir.types import Type
from ....target import Target
from ....target.simd import simd_level
from ....te import tensor as te
from ....topi.nn import conv2d_nchwc as K
from ._common import as_int, register_compute


def _geometry(attrs: Any, data: te.Tensor, weight: te.Tensor, out_type: Any) -> K.ConvGeometry:
    dims = [as_int(d) for d in data.shape]
    n, icb, h, w, cb = dims if len(dims) == 5 else dims + [1]
    _, _, kh, kw, _, lanes = (as_int(d) for d in weight.shape)
    _, ocb, oh, ow, _ = (as_int(d) for d in out_type.shape)
    return K.ConvGeometry(n, icb * cb, h, w, ocb * lanes, oh, ow, kh, kw, attrs.strides,
                          attrs.padding, attrs.dilation, attrs.groups, lanes, cb)


def _is_depthwise(geo: K.ConvGeometry) -> bool:
    return geo.groups > 1 and geo.groups == geo.ic == geo.oc


@register_compute("nn.contrib_conv2d_NCHWc_fused", "nn.contrib_conv2d_NCHWc_fused_add")
def conv2d_nchwc_fused(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight, bias = inputs[:3]
    residual = inputs[3] if len(inputs) == 4 else None
    geo = _geometry(attrs, data, weight, out_type)
    level = simd_level(Target.current())
    fn = K.depthwise_nchwc if _is_depthwise(geo) else K.conv2d_nchwc
    return [fn(data, weight, bias, residual, geo, level, attrs.activation,
               (attrs.clip_min, attrs.clip_max), attrs.act_after_add)]
