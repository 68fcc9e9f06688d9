"""``unique``: the distinct elements (or rows along axis 0) of a tensor, in buffers of static
size, as in the Relay era.

    values, indices, inverse, num_unique = unique(x, is_sorted=True)
    values, indices, inverse, num_unique, counts = unique(x, return_counts=True)

For ``x`` of shape (n, ...): ``values`` has x's shape and holds the distinct rows x[i] (sorted
ascending, lexicographically for rows, or in order of first occurrence) followed by zero rows;
``indices`` (n,) the position of each distinct row's first occurrence; ``inverse`` (n,) the
slot in ``values`` of each x[i]; ``num_unique`` (1,) how many there are; ``counts`` (n,) how
often each occurs. Indices are int32, as in the Relay era. How many are distinct depends on the
values, so a caller that wants the exact result cuts the first ``num_unique`` with
``dyn.strided_slice`` (the VM runs it), as ONNX Unique does.

The kernel compares every pair of rows (the first column where two rows differ, then who is
smaller there), so it costs O(n^2 * row size): meant for tensors of modest size.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.types import TensorType, TupleType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._attrs_base import OpAttrs, attrs_class
from ._reg import OPAQUE, call, defop
from ._shape import fail, tensor_of
from ._tuple import TupleWrapper

__all__ = ["unique"]
I32 = "int32"


@attrs_class("UniqueAttrs")
class UniqueAttrs(OpAttrs):
    """unique: ascending order (else order of first occurrence); whether to count."""

    sorted: bool = True
    return_counts: bool = False
    _op: ClassVar[str] = "unique"

    def __post_init__(self) -> None:
        self._bool("sorted")
        self._bool("return_counts")


def _rel(args: list[TensorType], attrs: UniqueAttrs) -> Type:
    (data,) = args
    if data.ndim == 0:
        raise fail("unique", "data must have rank >= 1, got a scalar")
    if not all(isinstance(d, int) for d in data.shape):
        raise fail("unique", f"data must have a static shape, got {data.shape}")
    n = data.shape[0]
    per_row = tensor_of((n,), I32)
    fields = [tensor_of(data.shape, data.dtype), per_row, per_row, tensor_of((1,), I32)]
    return TupleType(tuple(fields + [per_row] * attrs.return_counts))


def _ref(data: np.ndarray, attrs: UniqueAttrs) -> tuple[np.ndarray, ...]:
    n = data.shape[0]
    rows = data.reshape(n, -1)
    _, first, inverse, counts = np.unique(rows, axis=0, return_index=True,
                                          return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if not attrs.sorted:  # renumber the slots by first occurrence
        order = np.argsort(first, kind="stable")
        slot_of = np.empty_like(order)
        slot_of[order] = np.arange(len(order))
        first, counts, inverse = first[order], counts[order], slot_of[inverse]
    k = len(first)
    values = np.zeros_like(data)
    values[:k] = data[first]
    pad = [(0, n - k)]
    out = [values, np.pad(first, pad), inverse, np.array([k]), np.pad(counts, pad)]
    return tuple(o if i == 0 else o.astype(I32) for i, o in enumerate(out[:4 + attrs.return_counts]))


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    dims = [int(d.value) for d in x.shape]  # type: ignore[attr-defined]
    n, inner = dims[0], dims[1:]
    m = int(np.prod(inner))
    strides = [int(np.prod(inner[k + 1:])) for k in range(len(inner))]

    def at(i: PrimExpr, col: PrimExpr) -> PrimExpr:  # x[i] flattened, column col
        return x(i, *[tir.truncmod(tir.div(col, tir.const(s)), tir.const(d))
                      for s, d in zip(strides, inner)])

    def first_diff(i: PrimExpr, j: PrimExpr) -> PrimExpr:  # m when the rows are equal
        if m == 1:
            return tir.Select_(at(i, tir.const(0)) != at(j, tir.const(0)), tir.const(0),
                               tir.const(1))
        k = te.reduce_axis((0, m), "k")
        return te.min(tir.Select_(at(i, k.var) != at(j, k.var), k.var, tir.const(m)), axis=[k])

    diff = te.compute((n, n), first_diff, name="T_unique_diff", tag="comm_reduce")

    def equal(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        return diff(i, j) == tir.const(m)

    def less(i: PrimExpr, j: PrimExpr) -> PrimExpr:  # row i sorts before row j
        d = tir.min(diff(i, j), tir.const(m - 1))
        return tir.logical_and(diff(i, j) < tir.const(m), at(i, d) < at(j, d))

    def rep_of(i: PrimExpr) -> PrimExpr:  # the first occurrence of row i's value
        j = te.reduce_axis((0, n), "j")
        return te.min(tir.Select_(equal(i, j.var), j.var, tir.const(n)), axis=[j])

    rep = te.compute((n,), rep_of, name="T_unique_first", tag="comm_reduce")

    def is_first(i: PrimExpr) -> PrimExpr:
        return rep(i) == i

    def slot_of(i: PrimExpr) -> PrimExpr:  # how many distinct rows come before row i's
        j = te.reduce_axis((0, n), "j")
        before = less(j.var, i) if attrs.sorted else j.var < rep(i)
        return te.sum(tir.Select_(tir.logical_and(is_first(j.var), before), tir.const(1),
                                  tir.const(0)), axis=[j])

    slot = te.compute((n,), slot_of, name="T_unique_slot", tag="comm_reduce")

    def gather_first(value: Any, name: str, dtype: str, shape: tuple[int, ...]) -> te.Tensor:
        def body(r: PrimExpr, *rest: PrimExpr) -> PrimExpr:
            j = te.reduce_axis((0, n), "j")
            hit = tir.logical_and(is_first(j.var), slot(j.var) == r)
            return te.sum(tir.Select_(hit, value(j.var, *rest), tir.const(0, dtype)), axis=[j])
        return te.compute(shape, body, name=name, tag="comm_reduce")

    values = gather_first(lambda j, *rest: x(j, *rest), "T_unique_values", x.dtype, tuple(dims))
    indices = gather_first(lambda j: j, "T_unique_indices", I32, (n,))

    def count_all(_: PrimExpr) -> PrimExpr:
        j = te.reduce_axis((0, n), "j")
        return te.sum(tir.Select_(is_first(j.var), tir.const(1), tir.const(0)), axis=[j])

    num = te.compute((1,), count_all, name="T_unique_num", tag="comm_reduce")
    out = [values, indices, slot, num]
    if attrs.return_counts:
        def count(r: PrimExpr) -> PrimExpr:
            j = te.reduce_axis((0, n), "j")
            return te.sum(tir.Select_(slot(j.var) == r, tir.const(1), tir.const(0)), axis=[j])
        out.append(te.compute((n,), count, name="T_unique_counts", tag="comm_reduce"))
    return out


defop("unique", _rel, _ref, OPAQUE, attrs=UniqueAttrs, compute=_compute,
      doc="The distinct rows along axis 0 (padded to the input's size), their first "
          "positions, each row's slot, how many, and (return_counts) how often each occurs.")


def unique(data: Any, is_sorted: bool = True, return_counts: bool = False) -> TupleWrapper:
    """(values, indices, inverse_indices, num_unique[, counts]) of ``data``'s distinct elements
    (rows along axis 0 for rank > 1); see the module docstring. Static shapes only."""
    attrs = UniqueAttrs(sorted=is_sorted, return_counts=return_counts)
    return TupleWrapper(call("unique", data, attrs=attrs), 5 if return_counts else 4)
