"""nn.contrib_qadd: the elementwise sum of two quantized tensors of one shape, requantized.

``nn.contrib_qadd(a, b)``::

    y = clamp(round_half_even((a - a_zp) * ra + (b - b_zp) * rb) + y_zp, y_min, y_max)

``a`` and ``b`` are uint8 or int8 of the same shape (each its own type); ``ra`` and ``rb`` the
float32 ratios a_scale / y_scale and b_scale / y_scale (``topi.nn.qadd.ratios``), each
product and the sum rounded to float32; ``y_min``/``y_max`` narrow the output range (None:
the type's). The ONNX importer makes it from onnxruntime's QLinearAdd with constant per-tensor
scales and zero points and operands of one shape; the C kernel is ``ember/kernels/qadd.h``.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....topi.nn import qadd as qadd_kernel
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape, tensor_of
from ..attrs import OpAttrs, attrs_class

__all__ = ["contrib_qadd", "QAddAttrs", "check_sum_fields", "output_range"]
OP = "nn.contrib_qadd"


@attrs_class("QAddAttrs")
class QAddAttrs(OpAttrs):
    """nn.contrib_qadd: the operands' ratios and zero points, the output's zero point, type
    and range."""

    ra: float = 1.0
    rb: float = 1.0
    a_zp: int = 0
    b_zp: int = 0
    y_zp: int = 0
    out_dtype: str = "uint8"
    y_min: int | None = None
    y_max: int | None = None
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        self._int("a_zp")
        self._int("b_zp")
        check_sum_fields(self, "y_zp", "out_dtype", "y_min", "y_max")

    @property
    def y_range(self) -> tuple[int, int]:
        return output_range(self.out_dtype, self.y_min, self.y_max)


def output_range(dtype: str, lo: int | None, hi: int | None) -> tuple[int, int]:
    """[lo, hi], each None standing for ``dtype``'s own bound."""
    t_lo, t_hi = qadd_kernel.RANGES[dtype]
    return (t_lo if lo is None else lo, t_hi if hi is None else hi)


def check_sum_fields(attrs: OpAttrs, zp: str, dtype: str, lo: str, hi: str) -> None:
    """A quantized sum's fields of ``attrs`` (QAddAttrs, QConv2DAddAttrs): the ratios ``ra``
    and ``rb`` finite float32, the output's zero point ``zp`` a value of its type ``dtype``
    (u8 or s8), its range [``lo``, ``hi``] (None: the type's bound) within the type's."""
    for name in ("ra", "rb"):
        value = float(np.float32(getattr(attrs, name)))
        if not np.isfinite(value):
            raise attrs._invalid(name, "a finite float32")
        attrs._set(name, value)
    attrs._int(zp)
    attrs._choice(dtype, ("uint8", "int8"))
    attrs._int(lo, optional=True)
    attrs._int(hi, optional=True)
    t_lo, t_hi = qadd_kernel.RANGES[getattr(attrs, dtype)]
    if not t_lo <= getattr(attrs, zp) <= t_hi:
        raise attrs._invalid(zp, f"a value of {getattr(attrs, dtype)}")
    y_lo, y_hi = output_range(getattr(attrs, dtype), getattr(attrs, lo), getattr(attrs, hi))
    if not t_lo <= y_lo <= y_hi <= t_hi:
        raise attrs._invalid(lo, f"{lo} <= {hi} within {getattr(attrs, dtype)}'s range")


def _rel(args: list[TensorType], attrs: QAddAttrs) -> TensorType:
    a, b = args
    for t, name in ((a, "a"), (b, "b")):
        if t.dtype not in qadd_kernel.RANGES:
            raise fail(OP, f"{name} must be uint8 or int8, got {t.dtype} {fmt_shape(t.shape)}")
    if not all(isinstance(d, int) for d in (*a.shape, *b.shape)):
        # one kernel call over a's elements: operands of run-time sizes could differ
        raise fail(OP, f"a and b must have static shapes, got {fmt_shape(a.shape)} and "
                       f"{fmt_shape(b.shape)}")
    if tuple(a.shape) != tuple(b.shape):
        raise fail(OP, f"a and b must have one shape, got {fmt_shape(a.shape)} and "
                       f"{fmt_shape(b.shape)}")
    for zp, t, name in ((attrs.a_zp, a, "a_zp"), (attrs.b_zp, b, "b_zp")):
        lo, hi = qadd_kernel.RANGES[t.dtype]
        if not lo <= zp <= hi:
            raise fail(OP, f"{name} must be a value of {t.dtype}, got {zp}")
    return tensor_of(a.shape, attrs.out_dtype)


def _kwargs(attrs: QAddAttrs) -> dict[str, Any]:
    return dict(ra=attrs.ra, rb=attrs.rb, a_zp=attrs.a_zp, b_zp=attrs.b_zp, y_zp=attrs.y_zp,
                y_range=attrs.y_range, out_dtype=attrs.out_dtype)


def _ref(a: np.ndarray, b: np.ndarray, attrs: QAddAttrs) -> np.ndarray:
    return qadd_kernel.reference(a, b, **_kwargs(attrs))


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [qadd_kernel.qadd(*inputs, **_kwargs(attrs))]


defop(OP, _rel, _ref, OPAQUE, args=("a", "b"), attrs=QAddAttrs,
      doc="The sum of two quantized tensors, requantized (QLinearAdd).", compute=_compute)


def contrib_qadd(a: Any, b: Any, **attrs: Any) -> Call:
    """See the module docstring; ``attrs`` are QAddAttrs' fields."""
    return call(OP, a, b, attrs=QAddAttrs(**attrs))
