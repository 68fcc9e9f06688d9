"""Values known only at run time: what the converters share when a shape, an axis or a count
comes from a graph input or from ``Shape`` of a tensor with a symbolic axis.

Such a value becomes an argument of the operator's dynamic form (``relay.op.dyn``: its VM
shape function reads it and checks it, naming the node); ``DynamicToStatic`` makes the op
static again wherever the value becomes known. The helpers build the small int64 vectors
those ops take (a value per axis of the data, axes made non-negative) with ordinary ops.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from ._node import Node

I64 = "int64"


def int64(node: Node, i: int, what: str) -> RelayExpr:
    """Input ``i`` (an integer tensor) as int64; FrontendError naming it otherwise."""
    x, dtype = node.input(i, what), node.dtype(i)
    if not dtype.startswith(("int", "uint")):
        raise node.fail(f"input {i} ({what}) must be an integer tensor, got {dtype}")
    return x if dtype == I64 else _op.cast(x, I64)


def vector(values: Sequence[int]) -> RelayExpr:
    return const(np.asarray(values, I64).reshape(-1))


def scalar(value: RelayExpr) -> RelayExpr:
    """A one-element tensor as a 0-d one."""
    return _op.reshape(value, [])


def length(node: Node, i: int, what: str) -> int:
    """The static length of the 1-D input ``i``; unsupported when only known at run time."""
    ty = node.type(i)
    if ty.ndim != 1 or not isinstance(ty.shape[0], int):
        raise node.unsupported(f"input {i} ({what}) has the shape {ty.shape}; its length fixes "
                               "the result's rank, so it must be a 1-D tensor of static length")
    return ty.shape[0]


def nonnegative_axes(axes: RelayExpr, ndim: int) -> RelayExpr:
    """int64 axes in [-ndim, ndim) made non-negative (run-time values)."""
    n = const(np.array(ndim, I64))
    return _op.where(_op.less(axes, const(np.array(0, I64))), _op.add(axes, n), axes)


def on_axes(values: RelayExpr, axes: RelayExpr | Sequence[int], ndim: int,
            fill: int | RelayExpr) -> RelayExpr:
    """The vector of ``ndim`` values: ``values`` at ``axes`` (non-negative, known or not),
    ``fill`` elsewhere (an int, or a vector of ``ndim`` values)."""
    if not isinstance(axes, RelayExpr) and list(axes) == list(range(ndim)):
        return values
    index = axes if isinstance(axes, RelayExpr) else vector(axes)
    base = fill if isinstance(fill, RelayExpr) else vector([fill] * ndim)
    return _op.scatter_elements(base, index, values, 0)


def dims_at(x: RelayExpr, axes: RelayExpr | Sequence[int]) -> RelayExpr:
    """The run-time sizes of ``x`` along ``axes``."""
    index = axes if isinstance(axes, RelayExpr) else vector(axes)
    return _op.take(_op.shape_of(x, I64), index, axis=0)


def axes_mask(axes: RelayExpr, ndim: int) -> RelayExpr:
    """bool[ndim]: which axes the non-negative int64 vector ``axes`` names."""
    hits = _op.equal(_op.expand_dims(axes, 1), vector(list(range(ndim))))
    return _op.any(hits, axis=[0])


def without_axes(node: Node, x: RelayExpr, mask: RelayExpr, ndim: int, count: int
                 ) -> RelayExpr:
    """``x`` with the ``count`` axes that ``mask`` marks removed (their sizes must be 1:
    dyn.reshape checks the element count). Kept axis i goes to position i - (marked axes up
    to i); the marked ones to the last slot, which is cut off."""
    rank = ndim - count
    pos = _op.subtract(vector(list(range(ndim))), _op.cumsum(_op.cast(mask, I64), axis=0))
    pos = _op.where(mask, vector([ndim - 1]), pos)
    moved = _op.scatter_elements(vector([0] * ndim), pos, _op.shape_of(x, I64), 0)
    newshape = _op.strided_slice(moved, [0], [rank])
    return _op.dyn.reshape(x, newshape, allowzero=True, where=node.label)


def with_axes(node: Node, x: RelayExpr, axes: RelayExpr, ndim: int, count: int) -> RelayExpr:
    """``x`` with ``count`` axes of size 1 inserted at the run-time positions ``axes`` (of
    the result, non-negative): the other positions take the input's sizes in order."""
    rank = ndim + count
    mask = axes_mask(axes, rank)
    if ndim == 0:
        return _op.dyn.reshape(x, vector([1] * rank), where=node.label)
    source = _op.subtract(vector(list(range(rank))), _op.cumsum(_op.cast(mask, I64), axis=0))
    sizes = _op.take(_op.shape_of(x, I64), source, axis=0, mode="clip")  # (unused where 1)
    newshape = _op.where(mask, vector([1]), sizes)
    return _op.dyn.reshape(x, newshape, allowzero=True, where=node.label)
