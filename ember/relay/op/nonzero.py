"""``nonzero_padded``: the coordinates of the non-zero elements of a tensor, in a buffer of
static size, and how many there are (ONNX NonZero, numpy's ``nonzero``).

    indices, count = nonzero_padded(x)     # int64 (ndim, size of x), int64 (1,)
    indices[:, :count[0]]                  # NonZero's result (row-major order)

The result's size depends on the values, so the op returns the largest it can be and the
count; the frontend slices the first ``count`` columns with ``dyn.strided_slice``, whose VM
shape function reads the count. Columns past the count are 0.

The kernel ranks each element among the non-zero ones before it (a reduction over the
elements), so it costs O(size^2): meant for masks of modest size.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.types import TensorType, TupleType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._reg import OPAQUE, call, defop
from ._shape import fail, tensor_of
from ._tuple import TupleWrapper

__all__ = ["nonzero_padded"]
I64 = "int64"


def _rel(args: list[TensorType], attrs: Any) -> Type:
    (data,) = args
    size = 1
    for d in data.shape:
        if not isinstance(d, int):
            raise fail("nonzero_padded", f"data must have a static shape, got {data.shape}")
        size *= d
    return TupleType((tensor_of((data.ndim, size), I64), tensor_of((1,), I64)))


def _ref(data: np.ndarray, attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    found = np.stack(np.nonzero(data)) if data.ndim else np.zeros((0, int(data != 0)))
    out = np.zeros((data.ndim, data.size), I64)
    out[:, :found.shape[1]] = found
    return out, np.array([found.shape[1]], I64)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    dims = [int(d.value) for d in x.shape]  # type: ignore[attr-defined]
    size = int(np.prod(dims))
    strides = [int(np.prod(dims[k + 1:])) for k in range(len(dims))]

    def coords(j: PrimExpr) -> list[PrimExpr]:
        return [tir.truncmod(tir.div(j, tir.const(s)), tir.const(d))
                for s, d in zip(strides, dims)]

    def nonzero(j: PrimExpr) -> PrimExpr:
        return x(*coords(j)) != tir.const(0, x.dtype)

    def rank(j: PrimExpr) -> PrimExpr:
        k = te.reduce_axis((0, size), "k")
        return te.sum(tir.Select_(tir.logical_and(k.var < j, nonzero(k.var)), tir.const(1),
                                  tir.const(0)), axis=[k])

    ranks = te.compute((size,), rank, name="T_nonzero_rank", tag="comm_reduce")

    def place(d: PrimExpr, r: PrimExpr) -> PrimExpr:
        j = te.reduce_axis((0, size), "j")
        hit = tir.logical_and(nonzero(j.var), ranks(j.var) == r)
        coord = tir.const(0, I64)
        for axis, c in enumerate(coords(j.var)):  # the coordinate on axis d of element j
            coord = tir.Select_(d == axis, tir.cast(c, I64), coord)
        return te.sum(tir.Select_(hit, coord, tir.const(0, I64)), axis=[j])

    indices = te.compute((len(dims), size), place, name="T_nonzero", tag="comm_reduce")

    def count(_: PrimExpr) -> PrimExpr:
        j = te.reduce_axis((0, size), "j")
        return te.sum(tir.Select_(nonzero(j.var), tir.const(1, I64), tir.const(0, I64)),
                      axis=[j])

    return [indices, te.compute((1,), count, name="T_nonzero_count", tag="comm_reduce")]


defop("nonzero_padded", _rel, _ref, OPAQUE, doc="Coordinates of the non-zero elements "
      "(padded to the tensor's size) and their count.", compute=_compute)


def nonzero_padded(data: Any) -> TupleWrapper:
    """(int64 (ndim, size) coordinates of the non-zero elements, row-major, then zeros;
    int64 (1,) their count)."""
    return TupleWrapper(call("nonzero_padded", data), 2)
