"""``reinterpret``: the bits of a tensor read as another dtype of the same width (Relay's
``reinterpret``, ONNX BitCast), elementwise.

    reinterpret(x_float32, "int32")      # the IEEE-754 bits of each element

Between integer dtypes (bool counts as an 8-bit integer) it is C's conversion, which keeps
the bits; a float goes through its unsigned twin with a ``memcpy`` helper
(``ember/include/ember/kernels/bitcast.h``). float16 is not supported (the C kernels carry it
as a 16-bit integer of its own).
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._attrs_base import OpAttrs, attrs_class
from ._reg import ELEMWISE, call, defop
from ._shape import fail, tensor_of

__all__ = ["reinterpret"]
HEADER = "ember/kernels/bitcast.h"
WIDTH = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32,
         "uint32": 32, "float32": 32, "int64": 64, "uint64": 64, "float64": 64}
FLOAT_TWIN = {"float32": ("uint32", "f32", "u32"), "float64": ("uint64", "f64", "u64")}


@attrs_class("ReinterpretAttrs")
class ReinterpretAttrs(OpAttrs):
    """reinterpret: the dtype to read the bits as."""

    dtype: str = "int32"
    _op: ClassVar[str] = "reinterpret"

    def __post_init__(self) -> None:
        self._dtype("dtype")


def _rel(args: list[TensorType], attrs: ReinterpretAttrs) -> Type:
    (data,) = args
    for dtype in (data.dtype, attrs.dtype):
        if dtype not in WIDTH:
            raise fail("reinterpret", f"dtype {dtype} is not supported (supported: "
                                      f"{', '.join(WIDTH)})")
    if WIDTH[data.dtype] != WIDTH[attrs.dtype]:
        raise fail("reinterpret", f"{data.dtype} has {WIDTH[data.dtype]} bits but "
                                  f"{attrs.dtype} has {WIDTH[attrs.dtype]}")
    return tensor_of(data.shape, attrs.dtype)


def _ref(data: np.ndarray, attrs: ReinterpretAttrs) -> np.ndarray:
    return np.ascontiguousarray(data).view(attrs.dtype)


def _bits(v: PrimExpr, to: str) -> PrimExpr:
    """``v``'s bits as ``to`` (same width)."""
    if v.dtype == to:
        return v
    if v.dtype in FLOAT_TWIN:  # float -> its unsigned twin -> to
        twin, f, u = FLOAT_TWIN[v.dtype]
        return _bits(tir.call_extern(twin, f"ember_bitcast_{f}_to_{u}", v, header=HEADER), to)
    if to in FLOAT_TWIN:  # integer -> the float's unsigned twin -> float
        twin, f, u = FLOAT_TWIN[to]
        return tir.call_extern(to, f"ember_bitcast_{u}_to_{f}", _bits(v, twin), header=HEADER)
    if to == "bool":
        return tir.cast(v, "uint8") != tir.const(0, "uint8")
    return tir.cast(v, to)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [te.compute(x.shape, lambda *i: _bits(x(*i), attrs.dtype), name="T_reinterpret",
                       tag="elemwise")]


defop("reinterpret", _rel, _ref, ELEMWISE, attrs=ReinterpretAttrs, compute=_compute,
      doc="The bits of each element read as another dtype of the same width.")


def reinterpret(data: Any, dtype: str) -> Any:
    """``data``'s bits as ``dtype`` (the same width); see the module docstring."""
    return call("reinterpret", data, attrs=ReinterpretAttrs(dtype=dtype))
