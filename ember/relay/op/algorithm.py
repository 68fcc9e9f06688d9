"""Sorting-like operators: ``topk``, ``cumsum`` and ``cumprod``: attrs, type relation,
numpy reference, compute rule and builder of each.

The kernels are written as reductions, which keeps every size symbolic-friendly (the VM
derives their shape functions) at O(n^2) work per row along the axis: topk ranks each
element by counting those that beat it, then finds the element of each rank; a cumulative
sum at position i reduces over positions <= i.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call
from ...ir.types import TensorType, TupleType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._attrs_base import OpAttrs, attrs_class
from ._dispatch import dyn_op, numbers, run_time
from ._reg import OPAQUE, call, defop
from ._shape import dim_prod, fail, norm_axis, tensor_of
from ._tuple import TupleWrapper

__all__ = ["cumprod", "cumsum", "topk"]


# ---------------------------------------------------------------- topk
@attrs_class("TopKAttrs")
class TopKAttrs(OpAttrs):
    """topk: how many, along which axis, what to return ("both", "values", "indices"), the
    order (largest first unless is_ascend) and the dtype of the indices."""

    k: int = 1
    axis: int = -1
    ret_type: str = "both"
    is_ascend: bool = False
    dtype: str = "int32"
    _op: ClassVar[str] = "topk"

    def __post_init__(self) -> None:
        self._int("k")
        self._positive("k", allow_zero=True)
        self._int("axis")
        self._choice("ret_type", ("both", "values", "indices"))
        self._bool("is_ascend")
        self._dtype("dtype")


def _topk_rel(args: list[TensorType], attrs: TopKAttrs) -> Type:
    data = args[0]
    axis = norm_axis("topk", attrs.axis, data.ndim)
    n = data.shape[axis]
    if isinstance(n, int) and attrs.k > n:
        raise fail("topk", f"k={attrs.k} is larger than the axis size {n}")
    shape = list(data.shape)
    shape[axis] = attrs.k
    values, indices = tensor_of(shape, data.dtype), tensor_of(shape, attrs.dtype)
    if attrs.ret_type == "values":
        return values
    return indices if attrs.ret_type == "indices" else TupleType((values, indices))


def _topk_ref(data: np.ndarray, attrs: TopKAttrs) -> Any:
    axis = attrs.axis % data.ndim
    if attrs.is_ascend:
        order = np.argsort(data, axis=axis, kind="stable")  # ties: the lower index first
    else:  # descending with ties still by the lower index: sort the reversed axis, flip back
        n = data.shape[axis]
        rev = np.argsort(np.flip(data, axis), axis=axis, kind="stable")
        order = n - 1 - np.flip(rev, axis)
    idx = np.take(order, np.arange(attrs.k), axis=axis)
    values = np.take_along_axis(data, idx, axis)
    idx = idx.astype(attrs.dtype)
    if attrs.ret_type == "values":
        return values
    return idx if attrs.ret_type == "indices" else (values, idx)


def _beats(a: PrimExpr, b: PrimExpr, ia: PrimExpr, ib: PrimExpr, ascend: bool) -> PrimExpr:
    """Element a (at ia) comes before element b (at ib): better value, or equal and first."""
    better = a < b if ascend else a > b
    return tir.logical_or(better, tir.logical_and(a == b, ia < ib))


def _topk_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return topk_tensors(inputs[0], tir.const(attrs.k), attrs)


def topk_tensors(x: te.Tensor, k: PrimExpr, attrs: Any) -> list[te.Tensor]:
    """topk's kernel for ``k`` results (a size variable for dyn.topk); ``attrs`` gives the
    axis, order, index dtype and what to return."""
    axis = attrs.axis % x.ndim
    n = x.shape[axis]

    def at(i: tuple, j: PrimExpr) -> tuple:
        return (*i[:axis], j, *i[axis + 1:])

    def rank(*i: PrimExpr) -> PrimExpr:
        j = te.reduce_axis((0, n), "j")
        win = _beats(x(*at(i, j.var)), x(*i), j.var, i[axis], attrs.is_ascend)
        return te.sum(tir.cast(win, "int32"), axis=[j])

    ranks = te.compute(x.shape, rank, name="T_topk_rank", tag="comm_reduce")
    shape = (*x.shape[:axis], k, *x.shape[axis + 1:])

    def index_of(*r: PrimExpr) -> PrimExpr:
        j = te.reduce_axis((0, n), "j")
        # (a Select, not where=: see scatter_elements' compute about GCC 12 and where=)
        return te.sum(tir.Select_(ranks(*at(r, j.var)) == r[axis], j.var, tir.const(0)),
                      axis=[j])

    idx = te.compute(shape, index_of, name="T_topk_index", tag="comm_reduce")
    values = te.compute(shape, lambda *r: x(*at(r, idx(*r))), name="T_topk_values",
                        tag="injective")
    indices = te.compute(shape, lambda *r: tir.cast(idx(*r), attrs.dtype), name="T_topk_indices",
                         tag="injective")
    if attrs.ret_type == "values":
        return [values]
    return [indices] if attrs.ret_type == "indices" else [values, indices]


defop("topk", _topk_rel, _topk_ref, OPAQUE, attrs=TopKAttrs,
      doc="The k largest (or smallest) elements along an axis and their indices.",
      compute=_topk_compute)


def topk(data: Any, k: int = 1, axis: int = -1, ret_type: str = "both", is_ascend: bool = False,
         dtype: str = "int32") -> Any:
    """The ``k`` largest elements of ``data`` along ``axis`` (smallest with ``is_ascend``),
    sorted, ties broken by the lower index. ret_type "both" gives a TupleWrapper (values,
    indices)."""
    if run_time(k):
        return dyn_op("topk")(data, k, axis, ret_type, is_ascend, dtype)
    attrs = TopKAttrs(int(numbers(k)), axis, ret_type, is_ascend, dtype)
    out = call("topk", data, attrs=attrs)
    return TupleWrapper(out, 2) if ret_type == "both" else out


# ---------------------------------------------------------------- cumsum, cumprod
@attrs_class("ScanopAttrs")
class ScanopAttrs(OpAttrs):
    """cumsum/cumprod: the axis (None: of the flattened data), the output dtype ("" = the
    input's) and whether position i excludes element i."""

    axis: int | None = None
    dtype: str = ""
    exclusive: bool = False
    _op: ClassVar[str] = "cumsum/cumprod"

    def __post_init__(self) -> None:
        self._int("axis", optional=True)
        self._dtype("dtype", allow_empty=True)
        self._bool("exclusive")


def _scan_rel(name: str) -> Any:
    def rel(args: list[TensorType], attrs: ScanopAttrs) -> TensorType:
        data = args[0]
        dtype = attrs.dtype or data.dtype
        if attrs.axis is None:
            return tensor_of((dim_prod(data.shape),), dtype)
        norm_axis(name, attrs.axis, data.ndim)
        return tensor_of(data.shape, dtype)

    return rel


def _scan_ref(fn: Any, identity: int) -> Any:
    def ref(data: np.ndarray, attrs: ScanopAttrs) -> np.ndarray:
        dtype = attrs.dtype or data.dtype
        x, axis = (data.reshape(-1), 0) if attrs.axis is None else (data, attrs.axis % data.ndim)
        out = fn(x.astype(dtype), axis=axis, dtype=dtype)
        if attrs.exclusive:
            out = np.concatenate([np.full_like(np.take(out, [0], axis), identity),
                                  np.take(out, np.arange(out.shape[axis] - 1), axis)], axis)
        return out.astype(dtype)

    return ref


def _scan_compute(reducer: Any, identity: int) -> Any:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        dtype = out_type.dtype  # type: ignore[attr-defined]
        if attrs.axis is None:
            from ... import topi

            size: PrimExpr = tir.const(1)
            for d in x.shape:
                size = size * d
            x = topi.reshape(x, [size])
        axis = 0 if attrs.axis is None else attrs.axis % x.ndim

        def f(*i: PrimExpr) -> PrimExpr:
            j = te.reduce_axis((0, x.shape[axis]), "j")
            src = (*i[:axis], j.var, *i[axis + 1:])
            upto = j.var < i[axis] if attrs.exclusive else j.var <= i[axis]
            value = tir.Select_(upto, tir.cast(x(*src), dtype), tir.const(identity, dtype))
            return reducer(value, axis=[j])

        return [te.compute(x.shape, f, name="T_scan", tag="comm_reduce")]

    return rule


for _name, _fn, _red, _ident in (("cumsum", np.cumsum, te.sum, 0),
                                 ("cumprod", np.cumprod, te.prod, 1)):
    defop(_name, _scan_rel(_name), _scan_ref(_fn, _ident), OPAQUE, attrs=ScanopAttrs,
          doc=f"Cumulative {_name[3:]} along an axis (optionally exclusive).",
          compute=_scan_compute(_red, _ident))


def cumsum(data: Any, axis: int | None = None, dtype: str | None = None,
           exclusive: bool | None = None) -> Call:
    """Running sums of ``data`` along ``axis`` (None: of the flattened data); ``exclusive``
    leaves element i out of position i."""
    return call("cumsum", data, attrs=ScanopAttrs(axis, dtype or "", bool(exclusive)))


def cumprod(data: Any, axis: int | None = None, dtype: str | None = None,
            exclusive: bool | None = None) -> Call:
    """Running products of ``data`` along ``axis`` (see cumsum)."""
    return call("cumprod", data, attrs=ScanopAttrs(axis, dtype or "", bool(exclusive)))
