"""Converters of the reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,
SumSquare}, ArgMax, ArgMin.

The axes are an attribute before opset 18 (13 for ReduceSum) and an optional input from then
on; ``noop_with_empty_axes`` (same opsets) makes "no axes" the identity instead of "all". An
axes input known only at run time reduces with ``_RunTimeAxes`` (each axis in turn where its
value names it, then dyn.strided_slice / dyn.reshape to the result's shape).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....ir.expr import RelayExpr
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import norm_axes, norm_axis

# first opset where the op's axes are an input
_AXES_INPUT_SINCE = {"ReduceSum": 13}


class _Axes:
    """Reductions over axes known at import (None: all of them)."""

    def __init__(self, axes: list[int] | None) -> None:
        self.axes = axes

    def reduce(self, kind: str, x: RelayExpr, keep: bool) -> RelayExpr:
        return getattr(_op, kind)(x, self.axes, keep)

    def squeeze(self, x: RelayExpr) -> RelayExpr:
        return _op.squeeze(x, self.axes)


class _RunTimeAxes:
    """Reductions over axes known only at run time (``mask``: which of the ``ndim`` axes).

    Each axis is reduced in turn where the mask says so: the reduction (size 1 on the axis)
    is appended to the data along the axis and a run-time slice keeps either the data or the
    reduction (so an empty axis reduces to its identity too). That is rank times the work of
    one reduction; a run-time reshape then drops the reduced axes (keepdims=0). Axes of a
    length known only at run time (keepdims=1 only: the length fixes the rank otherwise) may
    be empty: all axes then, or none with noop_with_empty_axes."""

    def __init__(self, node: Node, ndim: int) -> None:
        self.node, self.ndim = node, ndim
        axes = rt.nonnegative_axes(rt.int64(node, 1, "axes"), ndim)
        self.mask = rt.axes_mask(axes, ndim)
        n = node.type(1).shape[0] if node.type(1).ndim == 1 else None
        self.count = n if isinstance(n, int) else None
        if self.count is None:
            if not node.attr("keepdims", 1):
                rt.length(node, 1, "axes")  # raises: the result's rank would be unknown
            if not node.attr("noop_with_empty_axes", 0):
                empty = _op.equal(_op.take(_op.shape_of(axes, rt.I64), rt.vector([0]), axis=0),
                                  rt.vector([0]))
                self.mask = _op.logical_or(self.mask, empty)

    def reduce(self, kind: str, x: RelayExpr, keep: bool) -> RelayExpr:
        for a in range(self.ndim):
            picked = _op.take(self.mask, rt.vector([a]), axis=0)
            both = _op.concatenate([x, getattr(_op, kind)(x, [a], True)], a)
            size = rt.dims_at(x, [a])
            begin = _op.where(picked, size, rt.vector([0]))
            end = _op.add(size, _op.cast(picked, rt.I64))
            x = _op.dyn.strided_slice(both, begin, end, rt.vector([1]), axes=[a],
                                      where=self.node.label)
        return x if keep else self.squeeze(x)

    def squeeze(self, x: RelayExpr) -> RelayExpr:
        assert self.count is not None, "keepdims=0 needs a static number of axes"
        return rt.without_axes(self.node, x, self.mask, self.ndim, self.count)


def _reduce_axes(node: Node, ndim: int) -> _Axes | _RunTimeAxes | None:
    """How to reduce; None for the identity (no axes with noop_with_empty_axes)."""
    if node.opset >= _AXES_INPUT_SINCE.get(node.op_type, 18):
        given = node.has_input(1) and node.type(1).shape != (0,)
        if given and node.value(1) is None:
            return _RunTimeAxes(node, ndim)
        axes = node.ints(1, "axes") if given else []
        if not axes:
            return None if node.attr("noop_with_empty_axes", 0) else _Axes(None)
    else:
        axes = node.attr("axes", None)
        if axes is None:
            return _Axes(None)
    return _Axes(norm_axes(node, axes, ndim))


Reducer = _Axes | _RunTimeAxes


def reduce(build: Callable[[Reducer, RelayExpr, bool], RelayExpr]) -> Callable[[Node], Any]:
    """A converter from ``build(reducer, x, keepdims)``."""

    def convert(node: Node) -> RelayExpr:
        x, ndim = node.input(0), node.ndim(0)
        axes = _reduce_axes(node, ndim)
        if axes is None:
            return x
        keepdims = bool(node.attr("keepdims", 1))
        return build(axes, x, keepdims)

    return convert


def _kind(kind: str) -> Callable[[Node], Any]:
    return reduce(lambda r, x, k: r.reduce(kind, x, k))


def _square_sum(r: Reducer, x: RelayExpr, keep: bool) -> RelayExpr:
    return r.reduce("sum", _op.multiply(x, x), keep)


def _log_sum_exp(r: Reducer, x: RelayExpr, keep: bool) -> RelayExpr:
    top = r.reduce("max", x, True)
    out = _op.add(_op.log(r.reduce("sum", _op.exp(_op.subtract(x, top)), True)), top)
    return out if keep else r.squeeze(out)


REDUCERS: dict[str, Callable[[Node], Any]] = {
    "ReduceSum": _kind("sum"),
    "ReduceMean": _kind("mean"),
    "ReduceMax": _kind("max"),
    "ReduceMin": _kind("min"),
    "ReduceProd": _kind("prod"),
    "ReduceL1": reduce(lambda r, x, k: r.reduce("sum", _op.abs(x), k)),
    "ReduceL2": reduce(lambda r, x, k: _op.sqrt(_square_sum(r, x, k))),
    "ReduceSumSquare": reduce(_square_sum),
    "ReduceLogSum": reduce(lambda r, x, k: _op.log(r.reduce("sum", x, k))),
    "ReduceLogSumExp": reduce(_log_sum_exp),
}


def _arg(fn: Callable[..., RelayExpr]) -> Callable[[Node], Any]:
    def convert(node: Node) -> RelayExpr:
        x, ndim = node.input(0), node.ndim(0)
        axis = norm_axis(node, node.attr("axis", 0), ndim)
        out = fn(x, axis=[axis], keepdims=bool(node.attr("keepdims", 1)),
                 select_last_index=bool(node.attr("select_last_index", 0)))
        return _op.cast(out, "int64")

    return convert


arg_max = _arg(_op.argmax)
arg_min = _arg(_op.argmin)
