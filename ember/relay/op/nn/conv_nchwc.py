"""nn.contrib_conv2d_NCHWc_fused and its residual form: conv2d in the blocked layout
NCHW[L]c with the epilogue (bias, residual add, activation) inside the op.

The layout planner (``relay.transform.AlterOpLayout``) rewrites conv2d + bias + activation
(+ residual add) chains into these ops; they are lowered to ember's C micro-kernels. Layouts
(``L`` = attrs.lanes, ``CB`` = attrs.in_block, L or 1):

- data ``[N, IC/CB, H, W, CB]`` (with CB = 1 also plain ``[N, IC, H, W]``); weight ``[OC/L, ICg/CB, KH, KW, CB, L]`` (``ICg`` input
  channels per group); bias ``[OC]``; result and residual ``[N, OC/L, OH, OW, L]``.

Epilogue: ``y = conv + bias``; with a residual, ``act(y + residual)`` (``act_after_add``) or
``act(y) + residual``; else ``act(y)``. ``activation`` is none, relu, clip (to
[clip_min, clip_max]), hardswish, hardsigmoid (``min(max(clip_min * y + clip_max, 0), 1)``:
the two parameters are its slope and offset), leaky_relu (slope ``clip_min``), sigmoid, silu,
mish, gelu_erf or gelu_tanh (``clip_min * y * (1 + erf(clip_max * y))`` and its tanh form:
the output and inner scales, as ``nn.contrib_gemm``'s).

The compute calls the C micro-kernels of ``topi.nn.conv2d_nchwc`` for the SIMD level of the
current target (only the register tile depends on it; the lane count is the op's). The batch
and the image sizes may be ``?``: the kernels take them as run-time arguments, with the packed
weight and register tiles of the static build.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....target import Target
from ....target.simd import simd_level
from ....te import tensor as te
from ....topi.nn import conv2d_nchwc as K
from .._attrs_base import attrs_class
from ....topi.nn.sizes import dims
from .._compute_common import as_int, out_dims, require, require_equal
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape, tensor_of
from .epilogue_activation import activation_ref
from ._attrs import _Window
from .conv import conv2d_nchw, conv_out_size, conv_size

__all__ = ["contrib_conv2d_nchwc_fused"]

ACTIVATIONS = tuple(K.ACTIVATIONS)


@attrs_class("Conv2DNCHWcFusedAttrs")
class Conv2DNCHWcFusedAttrs(_Window):
    """Attributes of the fused blocked convolution (see the module docstring)."""

    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    lanes: int = 8
    in_block: int = 8
    activation: str = "none"
    clip_min: float = 0.0
    clip_max: float = 0.0
    act_after_add: bool = True
    _op: ClassVar[str] = "nn.contrib_conv2d_NCHWc_fused"

    def __post_init__(self) -> None:
        self._pair("strides")
        self._pair("dilation")
        self._padding()
        for name in ("groups", "lanes", "in_block"):
            self._int(name)
            self._positive(name)
        self._choice("activation", ACTIVATIONS)
        for name in ("clip_min", "clip_max"):
            try:
                self._set(name, float(getattr(self, name)))
            except (TypeError, ValueError):
                raise self._invalid(name, "a number") from None
        self._bool("act_after_add")


def _fused_rel(args: list[TensorType], attrs: Conv2DNCHWcFusedAttrs) -> TensorType:
    op = "nn.contrib_conv2d_NCHWc_fused"
    data, weight, bias = args[:3]
    lanes, cb, g = attrs.lanes, attrs.in_block, attrs.groups
    if data.ndim == 4 and cb == 1:  # plain NCHW is NCHW1c
        data = tensor_of((*data.shape, 1), data.dtype)
    if data.ndim != 5 or weight.ndim != 6 or bias.ndim != 1:
        raise fail(op, f"expected data [N, C/{cb}, H, W, {cb}], weight [O/{lanes}, I/{cb}, KH, "
                       f"KW, {cb}, {lanes}] and bias [O]; got {fmt_shape(data.shape)}, "
                       f"{fmt_shape(weight.shape)}, {fmt_shape(bias.shape)}")
    n, icb, h, w, dcb = data.shape
    ocb, icb_g, kh, kw, wcb, wl = weight.shape
    ic, oc = icb * dcb, ocb * wl
    depthwise = g > 1 and g == ic == oc
    want_wcb = 1 if depthwise else cb
    if dcb != cb or wcb != want_wcb or wl != lanes or (depthwise and cb != lanes):
        raise fail(op, f"the blocks of data {fmt_shape(data.shape)} and weight "
                       f"{fmt_shape(weight.shape)} do not match in_block={cb}, lanes={lanes}"
                       + (" (depthwise: in_block = lanes, weight block 1)" if depthwise else ""))
    if ic != icb_g * wcb * g or oc % g or bias.shape[0] != oc:
        raise fail(op, f"channels do not match: data {fmt_shape(data.shape)}, weight "
                       f"{fmt_shape(weight.shape)}, bias {fmt_shape(bias.shape)}, groups={g}")
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    oh = conv_out_size(op, "height", h, kh, pt + pb, sh, dh)
    ow = conv_out_size(op, "width", w, kw, pl + pr, sw, dw)
    return fused_result(op, args, (n, ocb, oh, ow, lanes))


def fused_result(op: str, args: list[TensorType], shape: tuple) -> TensorType:
    """The float32 result of ``shape`` of a fused conv whose operands are ``args`` (data,
    weight, bias and an optional residual of the result's shape): the kernels read and write
    float32 only."""
    names = ("data", "weight", "bias", "residual")
    wrong = [f"{name} {t.dtype}" for name, t in zip(names, args) if t.dtype != "float32"]
    if wrong:
        raise fail(op, f"the C kernel takes float32 operands only; got {', '.join(wrong)}")
    out = tensor_of(shape, "float32")
    if len(args) == 4 and tuple(args[3].shape) != tuple(out.shape):
        raise fail(op, f"the residual has shape {fmt_shape(args[3].shape)}, the result "
                       f"{fmt_shape(out.shape)}")
    return out


def _act(y: np.ndarray, attrs: Conv2DNCHWcFusedAttrs) -> np.ndarray:
    """The epilogue's activation in numpy (float64 inside)."""
    return activation_ref(y, attrs.activation, attrs.clip_min, attrs.clip_max)


def _fused_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, *rest: Any,
               attrs: Conv2DNCHWcFusedAttrs) -> np.ndarray:
    if x.ndim == 4:
        x = x[..., None]
    n, icb, h, wd, cb = x.shape
    ocb, icb_g, kh, kw, wcb, lanes = w.shape
    xn = x.transpose(0, 1, 4, 2, 3).reshape(n, icb * cb, h, wd)
    wn = w.transpose(0, 5, 1, 4, 2, 3).reshape(ocb * lanes, icb_g * wcb, kh, kw)
    y = conv2d_nchw(xn, wn, attrs.strides, attrs.padding, attrs.dilation, attrs.groups)
    y = y + b.reshape(1, -1, 1, 1)
    _, oc, oh, ow = y.shape
    y = y.reshape(n, oc // lanes, lanes, oh, ow).transpose(0, 1, 3, 4, 2)
    return epilogue_ref(y, rest, attrs, x.dtype)


def epilogue_ref(y: np.ndarray, rest: tuple, attrs: Any, dtype: Any) -> np.ndarray:
    """The fused epilogue after ``y`` = conv + bias, in numpy: the residual (``rest``: none or
    one) added before or after the activation."""
    if rest:
        y = _act(y + rest[0], attrs) if attrs.act_after_add else _act(y, attrs) + rest[0]
    else:
        y = _act(y, attrs)
    return np.ascontiguousarray(y.astype(dtype))


def check_residual(residual: te.Tensor | None, geo: K.ConvGeometry) -> None:
    """A residual has the result's shape (static sizes were compared by the type relation;
    run-time ones are checked at the call)."""
    if residual is not None:
        shape = (geo.n, geo.oc // geo.lanes, geo.oh, geo.ow, geo.lanes)
        for got, want in zip(residual.shape, shape):
            require_equal(got, want, "the residual must have the result's shape")


def _geometry(attrs: Any, data: te.Tensor, weight: Any, out_type: Any) -> K.ConvGeometry:
    """The kernel's sizes: static ones as ints, the batch and image sizes that are ``?`` as
    expressions of the run-time sizes (checked here: the window must fit the padded image).
    ``weight``: the direct kernel's, or its (kh, kw, lanes)."""
    sizes = dims(data.shape)
    n, icb, h, w, cb = sizes if len(sizes) == 5 else sizes + [1]
    if isinstance(weight, tuple):
        kh, kw, lanes = weight
    else:
        _, _, kh, kw, _, lanes = (as_int(d) for d in weight.shape)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    for size, k, pad, dil, axis in ((h, kh, pt + pb, dh, "height"), (w, kw, pl + pr, dw, "width")):
        if not isinstance(size, int):
            require(size + pad >= (k - 1) * dil + 1,
                    f"the kernel window must fit in the padded {axis} of the data")
    fallback = (n, 0, conv_size(h, kh, pt + pb, sh, dh), conv_size(w, kw, pl + pr, sw, dw), 0)
    _, ocb, oh, ow, _ = dims(out_dims(out_type, fallback))
    return K.ConvGeometry(n, icb * cb, h, w, ocb * lanes, oh, ow, kh, kw, attrs.strides,
                          attrs.padding, attrs.dilation, attrs.groups, lanes, cb)


def _is_depthwise(geo: K.ConvGeometry) -> bool:
    return geo.groups > 1 and geo.groups == geo.ic == geo.oc


def _fused_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight, bias = inputs[:3]
    residual = inputs[3] if len(inputs) == 4 else None
    geo = _geometry(attrs, data, weight, out_type)
    check_residual(residual, geo)
    level = simd_level(Target.current())
    fn = K.depthwise_nchwc if _is_depthwise(geo) else K.conv2d_nchwc
    return [fn(data, weight, bias, residual, geo, level, attrs.activation,
               (attrs.clip_min, attrs.clip_max), attrs.act_after_add)]


defop("nn.contrib_conv2d_NCHWc_fused", _fused_rel, _fused_ref, OPAQUE,
      args=("data", "weight", "bias"), attrs=Conv2DNCHWcFusedAttrs,
      doc="conv2d in NCHW[L]c with bias and activation.", level=10, compute=_fused_compute)
defop("nn.contrib_conv2d_NCHWc_fused_add", _fused_rel, _fused_ref, OPAQUE,
      args=("data", "weight", "bias", "residual"), attrs=Conv2DNCHWcFusedAttrs,
      doc="conv2d in NCHW[L]c with bias, residual add and activation.", level=10,
      compute=_fused_compute)


def contrib_conv2d_nchwc_fused(data: Any, weight: Any, bias: Any, residual: Any = None,
                               **attrs: Any) -> Call:
    """The fused blocked convolution (see the module docstring for layouts and attrs)."""
    a = Conv2DNCHWcFusedAttrs(**attrs)
    if residual is None:
        return call("nn.contrib_conv2d_NCHWc_fused", data, weight, bias, attrs=a)
    return call("nn.contrib_conv2d_NCHWc_fused_add", data, weight, bias, residual, attrs=a)
