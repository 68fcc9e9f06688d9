"""Converters of the reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,
SumSquare}, ArgMax, ArgMin.

The axes are an attribute before opset 18 (13 for ReduceSum) and an optional input from then
on; ``noop_with_empty_axes`` (same opsets) makes "no axes" the identity instead of "all".
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import norm_axes, norm_axis

# first opset where the op's axes are an input
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _reduce_axes(node: Node, ndim: int) -> list[int] | None:
    """The axes to reduce; None for all; [] for none (noop_with_empty_axes)."""
    if node.opset >= _AXES_INPUT_SINCE.get(node.op_type, 18):
        axes = node.ints(1, "axes") if node.has_input(1) else []
        if not axes:
            return [] if node.attr("noop_with_empty_axes", 0) else None
    else:
        axes = node.attr("axes", None)
        if axes is None:
            return None
    return norm_axes(node, axes, ndim)


def reduce(build: Callable[[RelayExpr, Any, bool], RelayExpr]) -> Callable[[Node], Any]:
    """A converter from ``build(x, axes, keepdims)``."""

    def convert(node: Node) -> RelayExpr:
        x, ndim = node.input(0), node.ndim(0)
        axes = _reduce_axes(node, ndim)
        if axes == []:
            return x
        keepdims = bool(node.attr("keepdims", 1))
        return build(x, axes, keepdims)

    return convert


def _square_sum(x: RelayExpr, axes: Any, keep: bool) -> RelayExpr:
    return _op.sum(_op.multiply(x, x), axes, keep)


def _log_sum_exp(x: RelayExpr, axes: Any, keep: bool) -> RelayExpr:
    top = _op.max(x, axes, True)
    out = _op.add(_op.log(_op.sum(_op.exp(_op.subtract(x, top)), axes, True)), top)
    return out if keep else _op.squeeze(out, axes)


REDUCERS: dict[str, Callable[[Node], Any]] = {
    "ReduceSum": reduce(lambda x, a, k: _op.sum(x, a, k)),
    "ReduceMean": reduce(lambda x, a, k: _op.mean(x, a, k)),
    "ReduceMax": reduce(lambda x, a, k: _op.max(x, a, k)),
    "ReduceMin": reduce(lambda x, a, k: _op.min(x, a, k)),
    "ReduceProd": reduce(lambda x, a, k: _op.prod(x, a, k)),
    "ReduceL1": reduce(lambda x, a, k: _op.sum(_op.abs(x), a, k)),
    "ReduceL2": reduce(lambda x, a, k: _op.sqrt(_square_sum(x, a, k))),
    "ReduceSumSquare": reduce(_square_sum),
    "ReduceLogSum": reduce(lambda x, a, k: _op.log(_op.sum(x, a, k))),
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
