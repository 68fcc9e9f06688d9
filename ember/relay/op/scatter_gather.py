"""Element-wise gathering and scattering: ``gather`` (ONNX GatherElements), ``gather_nd`` and
``scatter_elements``: attrs, type relation, numpy reference, compute rule and builder of each.

Negative indices count from the end of their axis (ONNX semantics). The kernels clamp an
index that is still out of range to the axis (so a bad index never reads or writes outside
the tensor); the numpy references raise IndexError for it instead.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._attrs_base import OpAttrs, attrs_class
from ._reg import INJECTIVE, OPAQUE, call, defop
from ._shape import fail, fmt_shape, may_equal, norm_axis, tensor_of

__all__ = ["gather", "gather_nd", "scatter_elements"]

_REDUCTIONS = ("update", "add", "mul", "min", "max")


def _check_int(op: str, ty: TensorType, what: str = "indices") -> None:
    if not ty.dtype.startswith(("int", "uint")):
        raise fail(op, f"{what} must be an integer tensor, got {ty.dtype}")


def _fix_np(op: str, idx: np.ndarray, n: int) -> np.ndarray:
    idx = idx.astype(np.int64)
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise IndexError(f"{op}: index {idx[bad].flat[0]} is out of range for an axis of size {n}")
    return np.where(idx < 0, idx + n, idx)


def _fix_te(j: PrimExpr, n: PrimExpr) -> PrimExpr:
    """A tensor index: negative counts from the end, then clamped into [0, n)."""
    j = tir.cast(j, "int32")
    j = tir.Select_(j < 0, j + n, j)
    return tir.min(tir.max(j, tir.const(0)), n - 1)


# ---------------------------------------------------------------- gather (GatherElements)
@attrs_class("GatherAttrs")
class GatherAttrs(OpAttrs):
    """gather: the axis along which indices pick elements."""

    axis: int = 0
    _op: ClassVar[str] = "gather"

    def __post_init__(self) -> None:
        self._int("axis")


def _gather_rel(args: list[TensorType], attrs: GatherAttrs) -> TensorType:
    data, indices = args
    _check_int("gather", indices)
    if indices.ndim != data.ndim:
        raise fail("gather", f"indices must have the rank of data ({data.ndim}), got "
                             f"{fmt_shape(indices.shape)}")
    axis = norm_axis("gather", attrs.axis, data.ndim)
    for i, (d, k) in enumerate(zip(data.shape, indices.shape)):
        if i != axis and isinstance(d, int) and isinstance(k, int) and k > d:
            raise fail("gather", f"indices {fmt_shape(indices.shape)} exceed data "
                                 f"{fmt_shape(data.shape)} on axis {i}")
    return tensor_of(indices.shape, data.dtype)


def _gather_ref(data: np.ndarray, indices: np.ndarray, attrs: GatherAttrs) -> np.ndarray:
    axis = attrs.axis % data.ndim
    idx = _fix_np("gather", indices, data.shape[axis])
    sub = data[tuple(slice(0, k) if i != axis else slice(None)
                     for i, k in enumerate(indices.shape))]
    return np.take_along_axis(sub, idx, axis)


def _gather_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, indices = inputs
    axis = attrs.axis % data.ndim

    def f(*i: PrimExpr) -> PrimExpr:
        j = _fix_te(indices(*i), data.shape[axis])
        return data(*i[:axis], j, *i[axis + 1:])

    return [te.compute(indices.shape, f, name="T_gather", tag="injective")]


defop("gather", _gather_rel, _gather_ref, INJECTIVE, args=("data", "indices"),
      attrs=GatherAttrs, doc="out[i..] = data[i.. with indices[i..] on axis] (GatherElements).",
      compute=_gather_compute)


def gather(data: Any, axis: int, indices: Any) -> Call:
    """``out[p] = data[p with p[axis] = indices[p]]``: indices has data's rank."""
    return call("gather", data, indices, attrs=GatherAttrs(axis))


# ---------------------------------------------------------------- gather_nd
@attrs_class("GatherNDAttrs")
class GatherNDAttrs(OpAttrs):
    """gather_nd: leading batch axes shared by data and indices, and the index tuple length
    (None: indices.shape[0])."""

    batch_dims: int = 0
    index_rank: int | None = None
    _op: ClassVar[str] = "gather_nd"

    def __post_init__(self) -> None:
        self._int("batch_dims")
        self._positive("batch_dims", allow_zero=True)
        self._int("index_rank", optional=True)


def _gather_nd_m(indices: TensorType, attrs: GatherNDAttrs) -> int:
    m = indices.shape[0] if indices.ndim else None
    if attrs.index_rank is not None:
        if isinstance(m, int) and m != attrs.index_rank:
            raise fail("gather_nd", f"index_rank={attrs.index_rank} but indices.shape[0] is {m}")
        return attrs.index_rank
    if not isinstance(m, int):
        raise fail("gather_nd", "indices.shape[0] (the index tuple length) must be static, or "
                                "index_rank given")
    return m


def _gather_nd_rel(args: list[TensorType], attrs: GatherNDAttrs) -> TensorType:
    data, indices = args
    _check_int("gather_nd", indices)
    if indices.ndim < 1:
        raise fail("gather_nd", "indices must have rank >= 1 (index tuples on axis 0)")
    m, b = _gather_nd_m(indices, attrs), attrs.batch_dims
    if b + m > data.ndim or b > indices.ndim - 1:
        raise fail("gather_nd", f"batch_dims={b} and index tuples of length {m} do not fit data "
                                f"{fmt_shape(data.shape)} and indices {fmt_shape(indices.shape)}")
    for i in range(b):
        if not may_equal(data.shape[i], indices.shape[i + 1]):
            raise fail("gather_nd", f"batch axis {i} differs: data {fmt_shape(data.shape)}, "
                                    f"indices {fmt_shape(indices.shape)}")
    shape = [*data.shape[:b], *indices.shape[b + 1:], *data.shape[b + m:]]
    return tensor_of(shape, data.dtype)


def _gather_nd_ref(data: np.ndarray, indices: np.ndarray, attrs: GatherNDAttrs) -> np.ndarray:
    m, b = attrs.index_rank or indices.shape[0], attrs.batch_dims
    batch = data.shape[:b]
    ys = indices.shape[b + 1:]
    out = np.empty((*batch, *ys, *data.shape[b + m:]), data.dtype)
    for bi in np.ndindex(*batch):
        for yi in np.ndindex(*ys):
            tup = tuple(int(_fix_np("gather_nd", indices[(k, *bi, *yi)], data.shape[b + k]))
                        for k in range(m))
            out[(*bi, *yi)] = data[(*bi, *tup)]
    return out


def _gather_nd_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, indices = inputs
    b = attrs.batch_dims
    m = attrs.index_rank or int(indices.shape[0].value)  # type: ignore[attr-defined]
    ny = indices.ndim - 1 - b
    shape = (*data.shape[:b], *indices.shape[b + 1:], *data.shape[b + m:])

    def f(*i: PrimExpr) -> PrimExpr:
        bi, yi, rest = i[:b], i[b:b + ny], i[b + ny:]
        tup = [_fix_te(indices(tir.const(k), *bi, *yi), data.shape[b + k]) for k in range(m)]
        return data(*bi, *tup, *rest)

    return [te.compute(shape, f, name="T_gather_nd", tag="injective")]


defop("gather_nd", _gather_nd_rel, _gather_nd_ref, INJECTIVE, args=("data", "indices"),
      attrs=GatherNDAttrs, doc="Gather slices of data at index tuples (indices axis 0).",
      compute=_gather_nd_compute)


def gather_nd(data: Any, indices: Any, batch_dims: int = 0, index_rank: int | None = None
              ) -> Call:
    """``out[b.., y.., r..] = data[b.., indices[:, b.., y..], r..]``: index tuples run along
    axis 0 of indices (after none of its batch axes), as in Relay."""
    return call("gather_nd", data, indices, attrs=GatherNDAttrs(batch_dims, index_rank))


# ---------------------------------------------------------------- scatter_elements
@attrs_class("ScatterElementsAttrs")
class ScatterElementsAttrs(OpAttrs):
    """scatter_elements: the axis, and how an update combines with the value it lands on
    (update replaces; add/mul/min/max combine, also with earlier updates)."""

    axis: int = 0
    reduction: str = "update"
    _op: ClassVar[str] = "scatter_elements"

    def __post_init__(self) -> None:
        self._int("axis")
        self._choice("reduction", _REDUCTIONS)


def _scatter_rel(args: list[TensorType], attrs: ScatterElementsAttrs) -> TensorType:
    data, indices, updates = args
    op = "scatter_elements"
    _check_int(op, indices)
    if updates.dtype != data.dtype:
        raise fail(op, f"updates are {updates.dtype} but data is {data.dtype}")
    if not indices.ndim == updates.ndim == data.ndim:
        raise fail(op, f"data {fmt_shape(data.shape)}, indices {fmt_shape(indices.shape)} and "
                       f"updates {fmt_shape(updates.shape)} must have the same rank")
    for i, (k, u) in enumerate(zip(indices.shape, updates.shape)):
        if not may_equal(k, u):
            raise fail(op, f"indices {fmt_shape(indices.shape)} and updates "
                           f"{fmt_shape(updates.shape)} differ on axis {i}")
    norm_axis(op, attrs.axis, data.ndim)
    return data


_NP_REDUCE = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_ref(data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                 attrs: ScatterElementsAttrs) -> np.ndarray:
    axis = attrs.axis % data.ndim
    pos = list(np.indices(indices.shape))
    pos[axis] = _fix_np("scatter_elements", indices, data.shape[axis])
    out = data.copy()
    where = tuple(pos)
    if attrs.reduction == "update":
        for k in np.ndindex(*indices.shape):  # in order: the last update to a place wins
            out[tuple(p[k] for p in where)] = updates[k]
    else:
        _NP_REDUCE[attrs.reduction].at(out, where, updates)
    return out


def _scatter_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """For each output element, a reduction over the updates that may land on it (those with
    its coordinates off the axis): O(size of data x indices.shape[axis])."""
    data, indices, updates = inputs
    axis = attrs.axis % data.ndim
    k_ext = indices.shape[axis]

    def matches(p: tuple, k: PrimExpr) -> tuple[PrimExpr, tuple]:
        q = tuple(k if d == axis else tir.min(p[d], indices.shape[d] - 1)
                  for d in range(data.ndim))
        inside = tir.all(*[p[d] < indices.shape[d] for d in range(data.ndim) if d != axis])
        hit = _fix_te(indices(*q), data.shape[axis]) == p[axis]
        return tir.logical_and(inside, hit), q

    # Single-value reductions without ``where=``: GCC 12 -O3 (AVX2) miscompiles the
    # two-array (index, value) reduction the lowering produces when its loop has extent 1.
    if attrs.reduction == "update":  # the last update that lands on p wins
        def last(*p: PrimExpr) -> PrimExpr:
            k = te.reduce_axis((0, k_ext), "k")
            cond, _ = matches(p, k.var)
            return te.max(tir.Select_(cond, k.var, tir.const(-1)), axis=[k])

        found = te.compute(data.shape, last, name="T_scatter_last", tag="comm_reduce")

        def pick(*p: PrimExpr) -> PrimExpr:
            k = found(*p)
            q = [tir.max(k, tir.const(0)) if d == axis else tir.min(p[d], indices.shape[d] - 1)
                 for d in range(data.ndim)]
            return tir.Select_(k >= 0, updates(*q), data(*p))

        return [te.compute(data.shape, pick, name="T_scatter", tag="injective")]

    red, neutral = _REDUCERS[attrs.reduction]

    def gathered(*p: PrimExpr) -> PrimExpr:
        k = te.reduce_axis((0, k_ext), "k")
        cond, q = matches(p, k.var)
        return red(tir.Select_(cond, updates(*q), neutral(data.dtype)), axis=[k])

    acc = te.compute(data.shape, gathered, name="T_scatter_acc", tag="comm_reduce")
    return [te.compute(data.shape, lambda *p: _combine(attrs.reduction, data(*p), acc(*p)),
                       name="T_scatter", tag="injective")]


defop("scatter_elements", _scatter_rel, _scatter_ref, OPAQUE,
      args=("data", "indices", "updates"), attrs=ScatterElementsAttrs,
      doc="Write (or combine) updates into a copy of data at indices along an axis.",
      compute=_scatter_compute)


def _combine(reduction: str, acc: PrimExpr, v: PrimExpr) -> PrimExpr:
    if reduction == "add":
        return acc + v
    if reduction == "mul":
        return acc * v
    return tir.min(acc, v) if reduction == "min" else tir.max(acc, v)


_REDUCERS = {  # reduction -> (te reducer, its neutral element for a dtype)
    "add": (te.sum, lambda dt: tir.const(0, dt)),
    "mul": (te.prod, lambda dt: tir.const(1, dt)),
    "min": (te.min, lambda dt: tir.max_value(dt) if not tir.is_float(dt) else tir.infinity(dt)),
    "max": (te.max, lambda dt: tir.min_value(dt) if not tir.is_float(dt) else
            tir.infinity(dt) * -1),
}

def scatter_elements(data: Any, indices: Any, updates: Any, axis: int = 0,
                     reduction: str = "update") -> Call:
    """A copy of ``data`` with ``updates[p]`` written at ``p`` with ``p[axis] =
    indices[p]``; ``reduction`` "add"/"mul"/"min"/"max" combines instead of replacing."""
    return call("scatter_elements", data, indices, updates,
                attrs=ScatterElementsAttrs(axis, reduction))
