"""nn.contrib_minmax: the smallest and the largest value of a float32 tensor, one pass.

``nn.contrib_minmax(x)`` is float32 ``(min(x), max(x))`` (NaN if any value is), what
DynamicQuantizeLinear needs of its input on every call (the range it maps onto [0, 255]);
two full reductions ran as two serial passes. ``x`` is float32 with at least one element.
The C kernel is ``ember/kernels/minmax.h``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....topi.nn import minmax as minmax_kernel
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape, tensor_of

__all__ = ["contrib_minmax"]
OP = "nn.contrib_minmax"


def _rel(args: list[TensorType], attrs: Any) -> TensorType:
    (x,) = args
    if x.dtype != "float32":
        raise fail(OP, f"x must be float32, got {x.dtype} {fmt_shape(x.shape)}")
    if any(isinstance(d, int) and d == 0 for d in x.shape):
        raise fail(OP, f"x must have at least one element, got shape {fmt_shape(x.shape)}")
    return tensor_of((2,), "float32")


def _ref(x: np.ndarray, attrs: Any) -> np.ndarray:
    return minmax_kernel.reference(x)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [minmax_kernel.minmax(inputs[0])]


defop(OP, _rel, _ref, OPAQUE, args=("x",),
      doc="The smallest and largest value of a float32 tensor (DynamicQuantizeLinear's range).",
      compute=_compute)


def contrib_minmax(x: Any) -> Call:
    """See the module docstring."""
    return call(OP, x)
