"""Tensor-creating operators: zeros, ones, full, their ``_like`` forms, arange, one_hot."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import topi
from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.types import Any as AnyDim
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import EQ, PrimExpr
from ._compute_common import scalar
from ._dispatch import dyn_op, numbers, run_time
from ._reg import ELEMWISE, OPAQUE, OUT_ELEMWISE_FUSABLE, call, defop
from ._value_dims import check_value, value_dim
from ._shape import fail, fmt_type, norm_axis, tensor_of
from .attrs import ArangeAttrs, InitOpAttrs, OneHotAttrs

__all__ = ["arange", "full", "full_like", "one_hot", "ones", "ones_like", "zeros", "zeros_like"]


def _static_shape(api: str, shape: Any) -> tuple[int, ...]:
    shape = numbers(shape)  # (an expression went to dyn.*)
    return (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)


def _scalar(op: str, ty: TensorType, what: str) -> None:
    if ty.ndim != 0:
        raise fail(op, f"{what} must be a scalar (rank 0), got {fmt_type(ty)}")


def _init_rel(args: list[TensorType], attrs: InitOpAttrs) -> TensorType:
    return tensor_of(attrs.shape, attrs.dtype or "float32")


def _zeros_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    dtype = out_type.dtype  # type: ignore[attr-defined]
    return [_fill(attrs.shape, dtype, tir.const(0, dtype), "T_zeros")]


defop("zeros", _init_rel, lambda attrs: np.zeros(attrs.shape, attrs.dtype or "float32"),
      ELEMWISE, args=(), attrs=InitOpAttrs, doc="A tensor of zeros.", compute=_zeros_compute)


def _ones_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    dtype = out_type.dtype  # type: ignore[attr-defined]
    return [_fill(attrs.shape, dtype, tir.const(1, dtype), "T_ones")]


defop("ones", _init_rel, lambda attrs: np.ones(attrs.shape, attrs.dtype or "float32"),
      ELEMWISE, args=(), attrs=InitOpAttrs, doc="A tensor of ones.", compute=_ones_compute)


def zeros(shape: Sequence[int] | int, dtype: str = "float32") -> Call:
    """A tensor of ``shape`` filled with 0."""
    if run_time(shape):
        return dyn_op("zeros")(shape, dtype)
    return call("zeros", attrs=InitOpAttrs(_static_shape("zeros", shape), dtype))


def ones(shape: Sequence[int] | int, dtype: str = "float32") -> Call:
    """A tensor of ``shape`` filled with 1."""
    if run_time(shape):
        return dyn_op("ones")(shape, dtype)
    return call("ones", attrs=InitOpAttrs(_static_shape("ones", shape), dtype))


def _full_rel(args: list[TensorType], attrs: InitOpAttrs) -> TensorType:
    _scalar("full", args[0], "fill_value")
    return tensor_of(attrs.shape, attrs.dtype or args[0].dtype)


def _full_ref(fill: np.ndarray, attrs: InitOpAttrs) -> np.ndarray:
    return np.full(attrs.shape, fill, dtype=attrs.dtype or fill.dtype)


def _full_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [_fill(attrs.shape, out_type.dtype, scalar(inputs[0]), "T_full")]  # type: ignore


defop("full", _full_rel, _full_ref, ELEMWISE, args=("fill_value",), attrs=InitOpAttrs,
      doc="A tensor filled with a scalar.", compute=_full_compute)


def full(fill_value: Any, shape: Sequence[int] | int = (), dtype: str = "") -> Call:
    """A tensor of ``shape`` filled with the scalar ``fill_value`` (dtype "" = its dtype)."""
    if run_time(shape):
        return dyn_op("full")(fill_value, shape, dtype)
    return call("full", fill_value, attrs=InitOpAttrs(_static_shape("full", shape), dtype))


def _zeros_like_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [topi.full(x.shape, x.dtype, 0)]


defop("zeros_like", lambda args, attrs: args[0], lambda x, attrs: np.zeros_like(x), ELEMWISE,
      doc="Zeros of the same type as data.", compute=_zeros_like_compute)


def _ones_like_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [topi.full(x.shape, x.dtype, 1)]


defop("ones_like", lambda args, attrs: args[0], lambda x, attrs: np.ones_like(x), ELEMWISE,
      doc="Ones of the same type as data.", compute=_ones_like_compute)


def _full_like_rel(args: list[TensorType], attrs: Any) -> TensorType:
    _scalar("full_like", args[1], "fill_value")
    return args[0]


def _full_like_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, fill = inputs
    return [_fill(x.shape, x.dtype, scalar(fill), "T_full_like")]


defop("full_like", _full_like_rel, lambda x, fill, attrs: np.full_like(x, fill), ELEMWISE,
      args=("data", "fill_value"), doc="A tensor of data's type filled with a scalar.",
      compute=_full_like_compute)


def zeros_like(data: Any) -> Call:
    """Zeros with the shape and dtype of ``data``."""
    return call("zeros_like", data)


def ones_like(data: Any) -> Call:
    """Ones with the shape and dtype of ``data``."""
    return call("ones_like", data)


def full_like(data: Any, fill_value: Any) -> Call:
    """A tensor with the shape and dtype of ``data`` filled with the scalar ``fill_value``."""
    return call("full_like", data, fill_value)


# ---------------------------------------------------------------- arange
def _arange_len(start: float, stop: float, step: float) -> int:
    return max(0, math.ceil((stop - start) / step))


def _arange_rel(args: list[TensorType], attrs: ArangeAttrs) -> TensorType:
    for ty, what in zip(args, ("start", "stop", "step")):
        _scalar("arange", ty, what)
    if attrs.start is None or attrs.stop is None or attrs.step is None:
        return tensor_of((AnyDim(),), attrs.dtype)
    return tensor_of((_arange_len(attrs.start, attrs.stop, attrs.step),), attrs.dtype)


def _arange_ref(start: np.ndarray, stop: np.ndarray, step: np.ndarray,
                attrs: ArangeAttrs) -> np.ndarray:
    n = _arange_len(float(start), float(stop), float(step))
    # Element i is start + i * step, computed in the output dtype as the kernel does.
    dtype = np.dtype(attrs.dtype)
    return (dtype.type(start) + np.arange(n).astype(dtype) * dtype.type(step)).astype(dtype)


def _arange_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Element i is start + i * step, in the output dtype (as the reference computes it);
    a length known only at run time is ceil((stop - start) / step), from the values."""
    start, stop, step = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    (n,) = out_type.shape  # type: ignore[attr-defined]
    length = tir.const(n) if isinstance(n, int) else _arange_length(start, stop, step)
    first, delta = tir.cast(scalar(start), dtype), tir.cast(scalar(step), dtype)
    return [te.compute((length,), lambda i: first + tir.cast(i, dtype) * delta,
                       name="T_arange", tag="injective")]


def _arange_length(start: te.Tensor, stop: te.Tensor, step: te.Tensor) -> PrimExpr:
    """max(0, ceil((stop - start) / step)) in float64, as the reference computes it."""
    lo, hi, delta = (tir.cast(scalar(t), "float64") for t in (start, stop, step))
    zero = delta.equal(tir.const(0.0, "float64"))
    check_value(~zero, "arange: step must not be 0")
    safe = tir.Select_(zero, tir.const(1.0, "float64"), delta)
    n = tir.ceil((hi - lo) / safe)
    return value_dim("arange_len", tir.max(n, tir.const(0.0, "float64")), "arange")


defop("arange", _arange_rel, _arange_ref, OPAQUE, args=("start", "stop", "step"),
      attrs=ArangeAttrs, doc="Evenly spaced values in [start, stop).", level=3,
      compute=_arange_compute, shape_data=("start", "stop", "step"))


def _const_value(v: Any) -> float | None:
    if isinstance(v, Constant):
        return float(v.data.numpy()) if v.is_scalar else None
    return None if isinstance(v, RelayExpr) else float(v)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: str = "float32") -> Call:
    """``[start, start + step, ...)`` up to ``stop``; ``arange(n)`` counts 0..n-1.

    The length is static when start, stop and step are numbers or constants, else ``?``.
    """
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    values = [_const_value(v) for v in (start, stop, step)]
    args = [v if isinstance(v, RelayExpr) else const(v, dtype) for v in (start, stop, step)]
    return call("arange", *args, attrs=ArangeAttrs(*values, dtype=dtype))


# ---------------------------------------------------------------- one_hot
def _one_hot_rel(args: list[TensorType], attrs: OneHotAttrs) -> TensorType:
    indices, on, off = args
    _scalar("one_hot", on, "on_value")
    _scalar("one_hot", off, "off_value")
    ndim = indices.ndim
    axis = ndim if attrs.axis == -1 else norm_axis("one_hot", attrs.axis, ndim + 1)
    shape = list(indices.shape)
    shape.insert(axis, attrs.depth)
    return tensor_of(shape, attrs.dtype)


def _one_hot_ref(indices: np.ndarray, on: np.ndarray, off: np.ndarray,
                 attrs: OneHotAttrs) -> np.ndarray:
    axis = indices.ndim if attrs.axis == -1 else attrs.axis % (indices.ndim + 1)
    hot = np.expand_dims(indices, axis) == np.arange(attrs.depth).reshape(
        [-1 if i == axis else 1 for i in range(indices.ndim + 1)])
    return np.where(hot, on, off).astype(attrs.dtype)


def _one_hot_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """``on_value`` where the new axis equals the index, ``off_value`` elsewhere."""
    indices, on, off = inputs
    dtype = attrs.dtype
    axis = indices.ndim if attrs.axis == -1 else attrs.axis % (indices.ndim + 1)
    shape = tuple(indices.shape[:axis]) + (tir.const(attrs.depth),) + tuple(
        indices.shape[axis:])
    on_v, off_v = tir.cast(scalar(on), dtype), tir.cast(scalar(off), dtype)

    def f(*i: PrimExpr) -> PrimExpr:
        idx = tir.cast(indices(*(i[:axis] + i[axis + 1:])), "int32")
        return tir.Select_(tir.binary(EQ, idx, i[axis]), on_v, off_v)

    return [te.compute(shape, f, name="T_one_hot", tag="injective")]


defop("one_hot", _one_hot_rel, _one_hot_ref, OUT_ELEMWISE_FUSABLE,
      args=("indices", "on_value", "off_value"), attrs=OneHotAttrs,
      doc="One-hot encoding of integer indices.", compute=_one_hot_compute)


def one_hot(indices: Any, on_value: Any, off_value: Any, depth: int, axis: int = -1,
            dtype: str = "float32") -> Call:
    """A ``depth``-long one-hot axis at ``axis`` (-1: last): on_value at each index."""
    if run_time(depth):
        return dyn_op("one_hot")(indices, on_value, off_value, depth, axis, dtype)
    return call("one_hot", indices, on_value, off_value,
                attrs=OneHotAttrs(numbers(depth), axis, dtype))


# ---------------------------------------------------------------- te helpers of the compute rules
def _fill(shape: Any, dtype: str, value: PrimExpr, name: str) -> te.Tensor:
    v = tir.cast(value, dtype)
    return te.compute(tuple(tir.const(d) if isinstance(d, int) else d for d in shape),
                      lambda *i: v, name=name, tag="elemwise")
