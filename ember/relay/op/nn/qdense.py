"""nn.contrib_qdense: an int8 matrix product with a constant, prepacked weight (int32 out).

``nn.contrib_qdense(data, weight, colsum, a_zp)``::

    y[..., n] = sum_k data[..., k] * w[n, k] - a_zp * colsum[n]

which is ``sum_k (data[..., k] - a_zp) * w[n, k]`` when colsum holds w's row sums.

``data`` is uint8 or int8 of any rank >= 1 (rows: all but the last axis); ``a_zp`` one value
of data's type (a run-time tensor: DynamicQuantizeLinear computes it); ``weight`` the (N, K)
int8 weight minus its zero point, prepacked as (ceil(N / 16), ceil(K / 4), 16, 4)
(``topi.nn.qdense.pack_weight``) and ``colsum`` its row sums (int32 (N,), computed with it).
The ONNX importer makes it from MatMulInteger (and QLinearMatMul) with a constant right
operand; the C kernel is ``ember/kernels/qdense.h``.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....topi.nn import qdense as qdense_kernel
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape, tensor_of
from ..attrs import OpAttrs, attrs_class

__all__ = ["contrib_qdense", "QDenseAttrs"]
OP = "nn.contrib_qdense"


@attrs_class("QDenseAttrs")
class QDenseAttrs(OpAttrs):
    """nn.contrib_qdense: the number of output columns."""

    units: int = 1
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        self._int("units")
        self._positive("units")


def _rel(args: list[TensorType], attrs: QDenseAttrs) -> TensorType:
    data, weight, colsum, a_zp = args
    if data.dtype not in ("uint8", "int8") or data.ndim < 1:
        raise fail(OP, f"data must be uint8 or int8, got {data.dtype} {fmt_shape(data.shape)}")
    k = data.shape[-1]
    if not isinstance(k, int):
        raise fail(OP, "needs a static last axis")
    want = (-(-attrs.units // qdense_kernel.NW), -(-k // 4), qdense_kernel.NW, 4)
    if weight.dtype != "int8" or tuple(weight.shape) != want:
        raise fail(OP, f"weight must be int8 {fmt_shape(want)} (packed), got {weight.dtype} "
                       f"{fmt_shape(weight.shape)}")
    if colsum.dtype != "int32" or tuple(colsum.shape) != (attrs.units,):
        raise fail(OP, f"colsum must be int32 ({attrs.units},), got {colsum.dtype} "
                       f"{fmt_shape(colsum.shape)}")
    if a_zp.dtype != data.dtype or int(np.prod([d for d in a_zp.shape])) != 1:
        raise fail(OP, f"a_zp must be one {data.dtype} value, got {a_zp.dtype} "
                       f"{fmt_shape(a_zp.shape)}")
    return tensor_of((*data.shape[:-1], attrs.units), "int32")


def _ref(data: np.ndarray, weight: np.ndarray, colsum: np.ndarray, a_zp: np.ndarray,
         attrs: QDenseAttrs) -> np.ndarray:
    return qdense_kernel.reference(data, weight, colsum, a_zp, units=attrs.units)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [qdense_kernel.qdense(*inputs, units=attrs.units)]


defop(OP, _rel, _ref, OPAQUE, args=("data", "weight", "colsum", "a_zp"), attrs=QDenseAttrs,
      doc="int8 x prepacked int8 -> int32 matrix product (MatMulInteger).", compute=_compute)


def contrib_qdense(data: Any, weight: Any, colsum: Any, a_zp: Any, units: int) -> Call:
    """See the module docstring."""
    return call(OP, data, weight, colsum, a_zp, attrs=QDenseAttrs(units))
