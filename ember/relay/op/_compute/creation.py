"""Compute rules of the tensor-creating ops (creation.py): zeros, ones, full and their _like
forms, arange, one_hot.

Values given as tensors (full's fill value, arange's start/step, one_hot's on/off values) are
read from their 0-d inputs at run time, so one kernel serves every value. An output length the
type leaves open (arange with a run-time interval) becomes a symbolic dimension bound from the
output buffer the caller allocates.
"""
from __future__ import annotations

from typing import Any

from .... import topi
from ....ir.types import Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import EQ, PrimExpr
from ._common import register_compute, scalar


def _fill(shape: Any, dtype: str, value: PrimExpr, name: str) -> te.Tensor:
    v = tir.cast(value, dtype)
    return te.compute(tuple(tir.const(d) if isinstance(d, int) else d for d in shape),
                      lambda *i: v, name=name, tag="elemwise")


@register_compute("zeros")
def zeros(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    dtype = out_type.dtype  # type: ignore[attr-defined]
    return [_fill(attrs.shape, dtype, tir.const(0, dtype), "T_zeros")]


@register_compute("ones")
def ones(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    dtype = out_type.dtype  # type: ignore[attr-defined]
    return [_fill(attrs.shape, dtype, tir.const(1, dtype), "T_ones")]


@register_compute("zeros_like")
def zeros_like(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [topi.full(x.shape, x.dtype, 0)]


@register_compute("ones_like")
def ones_like(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [topi.full(x.shape, x.dtype, 1)]


@register_compute("full")
def full(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [_fill(attrs.shape, out_type.dtype, scalar(inputs[0]), "T_full")]  # type: ignore


@register_compute("full_like")
def full_like(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, fill = inputs
    return [_fill(x.shape, x.dtype, scalar(fill), "T_full_like")]


@register_compute("arange")
def arange(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Element i is start + i * step, in the output dtype (as the reference computes it)."""
    start, _stop, step = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    (n,) = out_type.shape  # type: ignore[attr-defined]
    length = tir.const(n) if isinstance(n, int) else te.size_var("arange_len")
    first, delta = tir.cast(scalar(start), dtype), tir.cast(scalar(step), dtype)
    return [te.compute((length,), lambda i: first + tir.cast(i, dtype) * delta,
                       name="T_arange", tag="injective")]


@register_compute("one_hot")
def one_hot(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
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
