"""round_half_even: elementwise rounding to the nearest integer, ties to even (ONNX's
QuantizeLinear and Round, numpy's ``rint``).

One C ``nearbyint`` per element (``nearbyintf`` for float32), which compilers vectorise to one
rounding instruction (``vrndscaleps``/``roundps``) under the default rounding mode; the
requantizations of quantized models run it on every activation. The relay ``round`` op rounds
halves away from zero (C ``round``), and an expression of it fixing up ties took ten ops.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.expr import Call
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ._reg import ELEMWISE, call, defop
from ._shape import fail, is_float

__all__ = ["round_half_even"]
OP = "round_half_even"


def _rel(args: list[TensorType], attrs: Any) -> TensorType:
    if not is_float(args[0].dtype) or args[0].dtype == "float16":
        raise fail(OP, f"requires a float32 or float64 tensor, got {args[0].dtype}")
    return args[0]


def _ref(x: np.ndarray, attrs: Any) -> np.ndarray:
    return np.rint(x).astype(x.dtype, copy=False)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    name = "nearbyintf" if x.dtype == "float32" else "nearbyint"
    return [te.compute(x.shape, lambda *i: tir.call_extern(x.dtype, name, x(*i)),
                       name="T_round_half_even", tag="elemwise")]


defop(OP, _rel, _ref, ELEMWISE, doc="Elementwise rounding, ties to even (C nearbyint).",
      compute=_compute)


def round_half_even(data: Any) -> Call:
    """``data`` rounded to the nearest integer, ties to even."""
    return call(OP, data)
