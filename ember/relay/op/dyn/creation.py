"""``dyn.full``, ``dyn.zeros``, ``dyn.ones`` and ``dyn.one_hot``: tensors whose shape (or
one-hot depth) is given as a tensor, known only at run time."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import EQ, PrimExpr
from .._attrs_base import OpAttrs, attrs_class
from .._compute_common import scalar
from .._reg import ELEMWISE, INJECTIVE, call, defop
from .._shape import fail, fmt_type, norm_axis, tensor_of
from .._value_dims import read, value_dim
from ._common import int_scalar, ints, label, sizes_ok, vector_length

__all__ = ["full", "one_hot", "ones", "zeros"]


@attrs_class("DynInitAttrs")
class DynInitAttrs(OpAttrs):
    """dyn.full/zeros/ones: the dtype ("" in full: the fill value's; zeros/ones: float32)
    and ``where`` the op came from."""

    dtype: str = ""
    where: str = ""
    _op: ClassVar[str] = "dyn.full/zeros/ones"

    def __post_init__(self) -> None:
        self._dtype("dtype", allow_empty=True)
        self._set("where", str(self.where))


def _shape_dims(op: str, shape: te.Tensor, attrs: Any) -> list[PrimExpr]:
    what = label(op, attrs)
    return [value_dim(f"{op.split('.')[-1]}_dim{k}", read(shape, k), what)
            for k in range(shape.shape[0].value)]


def _sizes(op: str, shape: np.ndarray, attrs: Any) -> list[int]:
    sizes = ints(shape)
    sizes_ok(label(op, attrs), sizes, "shape")
    return sizes


def _fill(shape: list[PrimExpr], value: PrimExpr, dtype: str, name: str) -> te.Tensor:
    v = tir.cast(value, dtype)
    return te.compute(tuple(shape), lambda *i: v, name=name, tag="elemwise")


def _init_rel(args: list[TensorType], attrs: DynInitAttrs) -> TensorType:
    n = vector_length("dyn.zeros/ones", args[0], "shape")
    return tensor_of([AnyDim()] * n, attrs.dtype or "float32")


def _init(op: str, value: int) -> Any:
    def compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        dtype = out_type.dtype  # type: ignore[attr-defined]
        return [_fill(_shape_dims(op, inputs[0], attrs), tir.const(value, dtype), dtype,
                      f"T_{op.split('.')[-1]}")]

    def ref(shape: np.ndarray, attrs: DynInitAttrs) -> np.ndarray:
        return np.full(_sizes(op, shape, attrs), value, dtype=attrs.dtype or "float32")
    return ref, compute


for _name, _value in (("dyn.zeros", 0), ("dyn.ones", 1)):
    _ref, _compute = _init(_name, _value)
    defop(_name, _init_rel, _ref, ELEMWISE, args=("shape",), attrs=DynInitAttrs,
          doc=f"A tensor of {_value}s of a shape given as a 1-D tensor.", level=10,
          compute=_compute, shape_data=("shape",))


def zeros(shape: Any, dtype: str = "float32", where: str = "") -> Call:
    """A tensor of zeros of the shape held in the 1-D integer tensor ``shape``."""
    return call("dyn.zeros", shape, attrs=DynInitAttrs(dtype, where))


def ones(shape: Any, dtype: str = "float32", where: str = "") -> Call:
    """A tensor of ones of the shape held in the 1-D integer tensor ``shape``."""
    return call("dyn.ones", shape, attrs=DynInitAttrs(dtype, where))


def _full_rel(args: list[TensorType], attrs: DynInitAttrs) -> TensorType:
    fill, shape = args
    if fill.ndim != 0:
        raise fail("dyn.full", f"fill_value must be a scalar (rank 0), got {fmt_type(fill)}")
    n = vector_length("dyn.full", shape, "shape")
    return tensor_of([AnyDim()] * n, attrs.dtype or fill.dtype)


def _full_ref(fill: np.ndarray, shape: np.ndarray, attrs: DynInitAttrs) -> np.ndarray:
    return np.full(_sizes("dyn.full", shape, attrs), fill, dtype=attrs.dtype or fill.dtype)


def _full_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    fill, shape = inputs
    return [_fill(_shape_dims("dyn.full", shape, attrs), scalar(fill),
                  out_type.dtype, "T_full")]  # type: ignore[attr-defined]


defop("dyn.full", _full_rel, _full_ref, ELEMWISE, args=("fill_value", "shape"),
      attrs=DynInitAttrs, doc="A tensor filled with a scalar, of a shape given as a 1-D "
      "tensor.", level=10, compute=_full_compute, shape_data=("shape",))


def full(fill_value: Any, shape: Any, dtype: str = "", where: str = "") -> Call:
    """A tensor of the shape held in ``shape`` filled with the scalar ``fill_value``."""
    return call("dyn.full", fill_value, shape, attrs=DynInitAttrs(dtype, where))


# ---------------------------------------------------------------- dyn.one_hot
@attrs_class("DynOneHotAttrs")
class DynOneHotAttrs(OpAttrs):
    """dyn.one_hot: where the new axis goes (-1: last), the output dtype and ``where`` the op
    came from."""

    axis: int = -1
    dtype: str = "float32"
    where: str = ""
    _op: ClassVar[str] = "dyn.one_hot"

    def __post_init__(self) -> None:
        self._int("axis")
        self._dtype("dtype")
        self._set("where", str(self.where))


def _one_hot_axis(ndim: int, axis: int) -> int:
    return ndim if axis == -1 else norm_axis("dyn.one_hot", axis, ndim + 1)


def _one_hot_rel(args: list[TensorType], attrs: DynOneHotAttrs) -> TensorType:
    indices, on, off, depth = args
    for ty, what in ((on, "on_value"), (off, "off_value")):
        if ty.ndim != 0:
            raise fail("dyn.one_hot", f"{what} must be a scalar (rank 0), got {fmt_type(ty)}")
    int_scalar("dyn.one_hot", depth, "depth")
    shape = list(indices.shape)
    shape.insert(_one_hot_axis(indices.ndim, attrs.axis), AnyDim())
    return tensor_of(shape, attrs.dtype)


def _one_hot_ref(indices: np.ndarray, on: np.ndarray, off: np.ndarray, depth: np.ndarray,
                 attrs: DynOneHotAttrs) -> np.ndarray:
    n = ints(depth)[0]
    sizes_ok(label("dyn.one_hot", attrs), [n], "depth")
    axis = _one_hot_axis(indices.ndim, attrs.axis)
    hot = np.expand_dims(indices, axis) == np.arange(n).reshape(
        [-1 if i == axis else 1 for i in range(indices.ndim + 1)])
    return np.where(hot, on, off).astype(attrs.dtype)


def _one_hot_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    indices, on, off, depth = inputs
    axis = _one_hot_axis(indices.ndim, attrs.axis)
    n = value_dim("one_hot_depth", read(depth, *[0] * depth.ndim),
                  label("dyn.one_hot", attrs))
    shape = (*indices.shape[:axis], n, *indices.shape[axis:])
    on_v, off_v = tir.cast(scalar(on), attrs.dtype), tir.cast(scalar(off), attrs.dtype)

    def f(*i: PrimExpr) -> PrimExpr:
        idx = tir.cast(indices(*(i[:axis] + i[axis + 1:])), "int64")
        return tir.Select_(tir.binary(EQ, idx, tir.cast(i[axis], "int64")), on_v, off_v)

    return [te.compute(shape, f, name="T_one_hot", tag="injective")]


defop("dyn.one_hot", _one_hot_rel, _one_hot_ref, INJECTIVE,
      args=("indices", "on_value", "off_value", "depth"), attrs=DynOneHotAttrs,
      doc="One-hot encoding with the depth given as a tensor.", level=10,
      compute=_one_hot_compute, shape_data=("depth",))


def one_hot(indices: Any, on_value: Any, off_value: Any, depth: Any, axis: int = -1,
            dtype: str = "float32", where: str = "") -> Call:
    """One-hot encoding whose depth is the value of the integer scalar tensor ``depth``."""
    return call("dyn.one_hot", indices, on_value, off_value, depth,
                attrs=DynOneHotAttrs(axis, dtype, where))
