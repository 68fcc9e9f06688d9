"""``scatter_nd``: write (or combine) slices of ``updates`` into a copy of ``data`` at index
tuples, the inverse of ``gather_nd`` (ONNX ScatterND; Relay's ``scatter_nd``).

Shapes, as Relay has them: ``data`` (X0, ..., Xn-1), ``indices`` (M, Y0, ..., Yk-1) with the
index tuples along axis 0, ``updates`` (Y0, ..., Yk-1, XM, ..., Xn-1)::

    out = copy(data); out[indices[:, y]] = updates[y]   (for each y, in order)

``mode`` "update" replaces (the last update to land on a place wins); "add", "mul", "min" and
"max" combine with the value there, and with earlier updates. Negative indices count from the
end of their axis; the kernel clamps indices still out of range (nothing is written outside),
the numpy reference raises IndexError.
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
from ._reg import OPAQUE, call, defop
from ._shape import fail, fmt_shape, may_equal
from .scatter_gather import _NP_REDUCE, _REDUCERS, _check_int, _combine, _fix_np, _fix_te

__all__ = ["scatter_nd"]

MODES = ("update", "add", "mul", "min", "max")


@attrs_class("ScatterNDAttrs")
class ScatterNDAttrs(OpAttrs):
    """scatter_nd: how an update combines with the value it lands on."""

    mode: str = "update"
    _op: ClassVar[str] = "scatter_nd"

    def __post_init__(self) -> None:
        self._choice("mode", MODES)


def _rel(args: list[TensorType], attrs: ScatterNDAttrs) -> TensorType:
    data, indices, updates = args
    op = "scatter_nd"
    _check_int(op, indices)
    if updates.dtype != data.dtype:
        raise fail(op, f"updates are {updates.dtype} but data is {data.dtype}")
    m = indices.shape[0] if indices.ndim else None
    if not isinstance(m, int) or m > data.ndim:
        raise fail(op, f"indices {fmt_shape(indices.shape)} must hold index tuples of a static "
                       f"length of at most data's rank {data.ndim} along axis 0")
    want = (*indices.shape[1:], *data.shape[m:])
    if updates.ndim != len(want) or not all(map(may_equal, updates.shape, want)):
        raise fail(op, f"updates must have shape {fmt_shape(want)} (indices.shape[1:] + "
                       f"data.shape[{m}:]), got {fmt_shape(updates.shape)}")
    return data


def _ref(data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
         attrs: ScatterNDAttrs) -> np.ndarray:
    out = data.copy()
    m = indices.shape[0]
    for y in np.ndindex(*indices.shape[1:]):
        where = tuple(int(_fix_np("scatter_nd", indices[(k, *y)], data.shape[k]))
                      for k in range(m))
        if attrs.mode == "update":
            out[where] = updates[y]
        else:
            out[where] = _NP_REDUCE[attrs.mode](out[where], updates[y])
    return out


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """For each output element, a reduction over every update tuple y that lands on it:
    O(size of data x number of tuples)."""
    data, indices, updates = inputs
    m = int(indices.shape[0].value)  # type: ignore[attr-defined]
    ys = indices.shape[1:]

    def lands(p: tuple, y: list[PrimExpr]) -> PrimExpr:
        return tir.all(*[_fix_te(indices(tir.const(k), *y), data.shape[k]) == p[k]
                         for k in range(m)])

    def axes() -> list[Any]:
        return [te.reduce_axis((0, n), f"y{i}") for i, n in enumerate(ys)]

    if attrs.mode == "update":  # the last tuple (in row-major order) that lands on p wins
        def last(*p: PrimExpr) -> PrimExpr:
            ax = axes()
            flat: PrimExpr = tir.const(0)
            for a, n in zip(ax, ys):
                flat = flat * n + a.var
            return te.max(tir.Select_(lands(p, [a.var for a in ax]), flat, tir.const(-1)),
                          axis=ax)

        found = te.compute(data.shape, last, name="T_scatter_nd_last", tag="comm_reduce")

        def pick(*p: PrimExpr) -> PrimExpr:
            rest, y = tir.max(found(*p), tir.const(0)), []
            for n in reversed(ys):  # the flat index back into (y0, ..., yk-1)
                y.insert(0, tir.truncmod(rest, n))
                rest = tir.div(rest, n)
            return tir.Select_(found(*p) >= 0, updates(*y, *p[m:]), data(*p))

        return [te.compute(data.shape, pick, name="T_scatter_nd", tag="injective")]

    red, neutral = _REDUCERS[attrs.mode]

    def gathered(*p: PrimExpr) -> PrimExpr:
        ax = axes()
        y = [a.var for a in ax]
        return red(tir.Select_(lands(p, y), updates(*y, *p[m:]), neutral(data.dtype)), axis=ax)

    acc = te.compute(data.shape, gathered, name="T_scatter_nd_acc", tag="comm_reduce")
    return [te.compute(data.shape, lambda *p: _combine(attrs.mode, data(*p), acc(*p)),
                       name="T_scatter_nd", tag="injective")]


defop("scatter_nd", _rel, _ref, OPAQUE, args=("data", "indices", "updates"),
      attrs=ScatterNDAttrs, doc="Write (or combine) slices of updates at index tuples.",
      compute=_compute)


def scatter_nd(data: Any, indices: Any, updates: Any, mode: str = "update") -> Call:
    """A copy of ``data`` with ``updates[y]`` written at ``indices[:, y]`` (index tuples along
    axis 0 of ``indices``); ``mode`` "add"/"mul"/"min"/"max" combines instead of replacing."""
    return call("scatter_nd", data, indices, updates, attrs=ScatterNDAttrs(mode))
