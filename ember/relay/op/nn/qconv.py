"""nn.contrib_qconv2d: an int8 2-D convolution (NCHW) with its requantization, one kernel.

``nn.contrib_qconv2d(data, weight, bias, w_zp, scale)``::

    acc[o] = bias[o] + sum(u * w[o]) - (has_w_zp ? w_zp[o] * sum(u over the window) : 0)
    y[o]   = clamp(round_half_even(float32(acc[o]) * scale[o]) + y_zp, y_min, y_max)

``data`` is uint8 or int8 (u: data as u8, int8 plus 128), padded with ``x_zp`` (in that u8
view); ``weight`` is int8 prepacked as (groups, ceil(O / groups / 4), KH * KW * ceil(C /
groups / 4), 4, 4) (``topi.nn.qconv.pack_weight``); ``bias`` and ``w_zp`` are int32 (O,),
``scale`` float32 (O,); ``y_min``/``y_max`` narrow the output range (a relu or clip folded
in; None: the type's). The ONNX importer makes it from QLinearConv with constant
weights, scales and zero points (``topi.nn.qconv.fold`` folds the zero points' weight-only
terms into bias); the C kernel is ``ember/kernels/qconv.h``.

``nn.contrib_qconv2d_add(data, weight, bias, w_zp, scale, residual)``: the same conv, its
output y then summed with ``residual`` as ``nn.contrib_qadd(y, residual)`` does (the ratios
``ra``, ``rb``, ``residual``'s zero point ``r_zp``, the sum's ``s_zp``, ``s_dtype`` and
range): the kernel adds each block of outputs as soon as it has it. FuseQAddEpilogue makes it
from a qadd whose operand is a qconv2d nothing else reads.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....topi.nn import qconv as qconv_kernel
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape, tensor_of
from ..attrs import attrs_class
from ._attrs import _Window
from .qadd import check_sum_fields, output_range

__all__ = ["contrib_qconv2d", "contrib_qconv2d_add", "QConv2DAttrs", "QConv2DAddAttrs"]
OP = "nn.contrib_qconv2d"
ADD_OP = "nn.contrib_qconv2d_add"


@attrs_class("QConv2DAttrs")
class QConv2DAttrs(_Window):
    """nn.contrib_qconv2d: the conv's window, its output channels, and the zero points."""

    channels: int = 1
    kernel_size: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    x_zp: int = 0
    has_w_zp: bool = False
    y_zp: int = 0
    out_dtype: str = "uint8"
    y_min: int | None = None  # a narrower output range (a relu or clip folded in); None: the
    y_max: int | None = None  # type's bound
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        self._int("channels")
        self._positive("channels")
        self._pair("kernel_size")
        self._pair("strides")
        self._padding()
        self._pair("dilation")
        self._int("groups")
        self._positive("groups")
        self._int("x_zp")
        self._bool("has_w_zp")
        self._int("y_zp")
        self._choice("out_dtype", ("uint8", "int8"))
        if not 0 <= self.x_zp <= 255:
            raise self._invalid("x_zp", "a zero point of the u8 view of the input, 0..255")
        lo, hi = qconv_kernel.RANGES[self.out_dtype]
        if not lo <= self.y_zp <= hi:
            raise self._invalid("y_zp", f"a value of {self.out_dtype}")
        self._int("y_min", optional=True)
        self._int("y_max", optional=True)
        y_lo, y_hi = self.y_range
        if not lo <= y_lo <= y_hi <= hi:
            raise self._invalid("y_min", f"y_min <= y_max within {self.out_dtype}'s range")

    @property
    def y_range(self) -> tuple[int, int]:
        return output_range(self.out_dtype, self.y_min, self.y_max)


def _packed_shape(attrs: QConv2DAttrs, c: int) -> tuple[int, ...]:
    og, cg4 = attrs.channels // attrs.groups, -(-(c // attrs.groups) // 4)
    k4 = cg4 * int(np.prod(attrs.kernel_size))
    return (attrs.groups, -(-og // qconv_kernel.MR), k4, qconv_kernel.MR, 4)


def _rel(args: list[TensorType], attrs: QConv2DAttrs) -> TensorType:
    data, weight, bias, w_zp, scale = args
    if data.dtype not in ("uint8", "int8") or data.ndim != 4:
        raise fail(OP, f"data must be 4-D uint8 or int8 (NCHW), got {data.dtype} "
                       f"{fmt_shape(data.shape)}")
    n, c, h, w = data.shape
    if not isinstance(c, int) or c % attrs.groups or attrs.channels % attrs.groups:
        raise fail(OP, f"channels in ({c}) and out ({attrs.channels}) must be static and "
                       f"divisible by groups={attrs.groups}")
    want = _packed_shape(attrs, c)
    if weight.dtype != "int8" or tuple(weight.shape) != want:
        raise fail(OP, f"weight must be int8 {fmt_shape(want)} (packed), got {weight.dtype} "
                       f"{fmt_shape(weight.shape)}")
    for t, dtype, name in ((bias, "int32", "bias"), (w_zp, "int32", "w_zp"),
                           (scale, "float32", "scale")):
        if t.dtype != dtype or tuple(t.shape) != (attrs.channels,):
            raise fail(OP, f"{name} must be {dtype} ({attrs.channels},), got {t.dtype} "
                           f"{fmt_shape(t.shape)}")
    sizes = []
    for size, i in ((h, 0), (w, 1)):
        if not isinstance(size, int):
            raise fail(OP, "needs static spatial sizes")
        out = qconv_kernel.out_size(size, attrs.kernel_size[i], attrs.strides[i],
                                    attrs.dilation[i], attrs.padding[i], attrs.padding[i + 2])
        if out <= 0:
            raise fail(OP, f"the window is larger than the padded input {fmt_shape(data.shape)}")
        sizes.append(out)
    return tensor_of((n, attrs.channels, *sizes), attrs.out_dtype)


def _kwargs(attrs: QConv2DAttrs) -> dict[str, Any]:
    return dict(o=attrs.channels, kernel=attrs.kernel_size, strides=attrs.strides,
                padding=attrs.padding, dilation=attrs.dilation, groups=attrs.groups,
                x_zp=attrs.x_zp, has_w_zp=attrs.has_w_zp, y_zp=attrs.y_zp,
                out_dtype=attrs.out_dtype, y_range=attrs.y_range)


def _ref(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, w_zp: np.ndarray,
         scale: np.ndarray, attrs: QConv2DAttrs) -> np.ndarray:
    return qconv_kernel.reference(x, weight, bias, w_zp, scale, **_kwargs(attrs))


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [qconv_kernel.qconv2d(*inputs, **_kwargs(attrs))]


defop(OP, _rel, _ref, OPAQUE, args=("data", "weight", "bias", "w_zp", "scale"),
      attrs=QConv2DAttrs, doc="int8 conv2d with a fused requantization (QLinearConv).",
      compute=_compute)


def contrib_qconv2d(data: Any, weight: Any, bias: Any, w_zp: Any, scale: Any,
                    **attrs: Any) -> Call:
    """See the module docstring; ``attrs`` are QConv2DAttrs' fields."""
    return call(OP, data, weight, bias, w_zp, scale, attrs=QConv2DAttrs(**attrs))


@attrs_class("QConv2DAddAttrs")
class QConv2DAddAttrs(QConv2DAttrs):
    """nn.contrib_qconv2d_add: the conv's attributes, and the residual add's (as
    QAddAttrs': the conv's output is the add's first operand)."""

    ra: float = 1.0
    rb: float = 1.0
    r_zp: int = 0
    s_zp: int = 0
    s_dtype: str = "uint8"
    s_min: int | None = None
    s_max: int | None = None
    _op: ClassVar[str] = ADD_OP

    def __post_init__(self) -> None:
        QConv2DAttrs.__post_init__(self)
        self._int("r_zp")
        check_sum_fields(self, "s_zp", "s_dtype", "s_min", "s_max")

    @property
    def s_range(self) -> tuple[int, int]:
        return output_range(self.s_dtype, self.s_min, self.s_max)

    @property
    def add(self) -> qconv_kernel.ResidualAdd:
        return qconv_kernel.ResidualAdd(self.ra, self.rb, self.r_zp, self.s_zp, self.s_dtype,
                                        self.s_range)


def _add_rel(args: list[TensorType], attrs: QConv2DAddAttrs) -> TensorType:
    conv = _rel(args[:5], attrs)
    res = args[5]
    if res.dtype not in qconv_kernel.RANGES or tuple(res.shape) != tuple(conv.shape):
        raise fail(ADD_OP, f"residual must be uint8 or int8 {fmt_shape(conv.shape)} (the "
                           f"conv's output shape), got {res.dtype} {fmt_shape(res.shape)}")
    lo, hi = qconv_kernel.RANGES[res.dtype]
    if not lo <= attrs.r_zp <= hi:
        raise fail(ADD_OP, f"r_zp must be a value of {res.dtype}, got {attrs.r_zp}")
    return tensor_of(conv.shape, attrs.s_dtype)


def _add_ref(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, w_zp: np.ndarray,
             scale: np.ndarray, residual: np.ndarray, attrs: QConv2DAddAttrs) -> np.ndarray:
    conv = _ref(x, weight, bias, w_zp, scale, attrs)
    return qconv_kernel.reference_add(conv, residual, attrs.add, attrs.y_zp)


def _add_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [qconv_kernel.qconv2d(*inputs[:5], **_kwargs(attrs), residual=inputs[5],
                                 add=attrs.add)]


defop(ADD_OP, _add_rel, _add_ref, OPAQUE,
      args=("data", "weight", "bias", "w_zp", "scale", "residual"), attrs=QConv2DAddAttrs,
      doc="int8 conv2d, requantized, then a QLinearAdd with a residual (one kernel).",
      compute=_add_compute)


def contrib_qconv2d_add(data: Any, weight: Any, bias: Any, w_zp: Any, scale: Any,
                        residual: Any, **attrs: Any) -> Call:
    """See the module docstring; ``attrs`` are QConv2DAddAttrs' fields."""
    return call(ADD_OP, data, weight, bias, w_zp, scale, residual,
                attrs=QConv2DAddAttrs(**attrs))
