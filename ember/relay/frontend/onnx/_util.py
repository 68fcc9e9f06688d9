"""Small helpers the converters share: scalars, axes, and reshapes that keep dynamic sizes."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....ir.expr import RelayExpr, const
from ....ir.types import TensorType
from ... import op as _op
from ._node import Node


def scalar(value: float, dtype: str) -> RelayExpr:
    """A 0-d constant of ``dtype``."""
    return const(np.array(value, dtype=dtype))


def norm_axis(node: Node, axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in [-ndim, ndim) made non-negative; FrontendError naming the node otherwise."""
    if not -ndim <= axis < ndim:
        raise node.fail(f"{what} {axis} is out of range for an input of rank {ndim}")
    return axis % ndim


def norm_axes(node: Node, axes: Sequence[int], ndim: int, what: str = "axes") -> list[int]:
    out = [norm_axis(node, int(a), ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise node.fail(f"{what} {list(axes)} names an axis twice")
    return out


def static(dims: Sequence[Any]) -> bool:
    return all(isinstance(d, int) for d in dims)


def product(dims: Sequence[Any]) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


# The most elements of a constant a converter computes with numpy at import (a DFT's cosine
# matrix, a window, an identity): sizes read from the model must not allocate without bound.
MAX_IMPORT_CONSTANT = 1 << 26


def check_constant_size(node: Node, shape: Sequence[int], what: str) -> None:
    """FrontendError naming the node when a constant of ``shape`` built at import would
    exceed ``MAX_IMPORT_CONSTANT`` elements."""
    n = product(shape)
    if n > MAX_IMPORT_CONSTANT:
        raise node.fail(f"{what} would be a constant of shape {list(shape)} ({n} elements), "
                        f"more than the {MAX_IMPORT_CONSTANT} an import builds")


def flatten_to_2d(x: RelayExpr, ty: TensorType, axis: int) -> RelayExpr:
    """``x`` reshaped to (prod(shape[:axis]), prod(shape[axis:])), also for dynamic sizes
    (merging leading axes pairwise with Relay's -3, then -1 for the rest)."""
    shape = ty.shape
    lead, tail = shape[:axis], shape[axis:]
    if static(lead) and static(tail):
        return _op.reshape(x, (product(lead), product(tail)))
    if static(lead):
        return _op.reshape(x, (product(lead), -1))
    if static(tail):
        return _op.reshape(x, (-1, product(tail)))
    out = x
    for _ in range(axis - 1):  # (a, b, c, ...) -> (a*b, c, ...)
        out = _op.reshape(out, (-3, -2))
    if axis == 0:
        return _op.reshape(out, (1, -1))
    return _op.reshape(out, (0, -1))


def expand_to_rank(x: RelayExpr, ndim: int, axis: int) -> RelayExpr:
    """A vector ``x`` reshaped to broadcast along ``axis`` of a rank-``ndim`` tensor."""
    trailing = ndim - axis - 1
    return _op.expand_dims(x, 1, trailing) if trailing > 0 else x
