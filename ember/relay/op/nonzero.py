"""``nonzero_padded``: the coordinates of the non-zero elements of a tensor, in a buffer of
static size, and how many there are (ONNX NonZero, numpy's ``nonzero``).

    indices, count = nonzero_padded(x)     # int64 (ndim, size of x), int64 (1,)
    indices[:, :count[0]]                  # NonZero's result (row-major order)

The result's size depends on the values, so the op returns the largest it can be and the
count; the frontend slices the first ``count`` columns with ``dyn.strided_slice``, whose VM
shape function reads the count. Columns past the count are 0.

The kernel walks the elements once in row-major order, writing each non-zero element's
coordinates at the count so far: O(ndim * size).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.types import TensorType, TupleType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import Var
from ...tir.stmt import Buffer, BufferStore, For, ForKind, IfThenElse, Stmt, seq
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
    return te.extern([(len(dims), size), (1,)], [x], lambda ins, outs: _one_pass(
        ins[0], outs[0], outs[1], dims, size), name="T_nonzero", dtype=[I64, I64],
        tag="nonzero")


def _one_pass(x: Buffer, indices: Buffer, count: Buffer, dims: list[int], size: int) -> Stmt:
    # One walk over the elements in row-major order with the count as the write cursor:
    # O(ndim * size), where ranking each element among those before it cost O(size^2).
    j = Var("j", "int32")
    strides = [int(np.prod(dims[k + 1:])) for k in range(len(dims))]
    coords = [tir.truncmod(tir.div(j, tir.const(s)), tir.const(d)) for s, d in zip(strides, dims)]
    cursor = count.vload([0])
    hit = seq(*[BufferStore(indices, tir.cast(c, I64), (tir.const(axis), cursor))
                for axis, c in enumerate(coords)],
              BufferStore(count, cursor + tir.const(1, I64), (tir.const(0),)))
    nonzero = tir.convert(x.vload(coords) != tir.const(0, x.dtype))
    zero_fill = [_zero_row(indices, axis, size) for axis in range(len(dims))]
    walk = For(j, 0, size, ForKind.SERIAL, IfThenElse(nonzero, hit))
    return seq(BufferStore(count, tir.const(0, I64), (tir.const(0),)), *zero_fill, walk)


def _zero_row(indices: Buffer, axis: int, size: int) -> Stmt:
    k = Var(f"k{axis}", "int32")
    return For(k, 0, size, ForKind.SERIAL, BufferStore(indices, tir.const(0, I64),
                                                       (tir.const(axis), k)))


defop("nonzero_padded", _rel, _ref, OPAQUE, doc="Coordinates of the non-zero elements "
      "(padded to the tensor's size) and their count.", compute=_compute)


def nonzero_padded(data: Any) -> TupleWrapper:
    """(int64 (ndim, size) coordinates of the non-zero elements, row-major, then zeros;
    int64 (1,) their count)."""
    return TupleWrapper(call("nonzero_padded", data), 2)
