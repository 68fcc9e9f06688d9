"""ONNX TensorScatter (the KV-cache update of attention models): ``scatter_elements`` of the
update into the past cache along the sequence axis, at ``write_indices[b] + i`` (modulo the
cache length in circular mode)."""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import norm_axis

I64 = "int64"


def tensor_scatter(node: Node) -> RelayExpr:
    past, past_shape = node.input(0, "past_cache"), node.static_shape(0, "past_cache")
    update, shape = node.input(1, "update"), node.static_shape(1, "update")
    ndim = len(past_shape)
    axis = norm_axis(node, node.attr("axis", -2), ndim)
    if axis == 0:
        raise node.fail("axis must not be 0 (the batch axis)")
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise node.fail(f"mode must be 'linear' or 'circular', got {mode!r}")
    others = [a for a in range(ndim) if a != axis]
    if len(shape) != ndim or any(shape[a] != past_shape[a] for a in others) \
            or shape[axis] > past_shape[axis]:
        raise node.fail(f"update has shape {list(shape)}, which must match past_cache "
                        f"{list(past_shape)} except along axis {axis}, where it may be shorter")
    at = [1] * ndim
    at[axis] = shape[axis]
    steps = node.const(np.arange(shape[axis]).reshape(at), I64)
    if node.has_input(2):
        if node.shape(2) != (shape[0],):
            raise node.fail(f"write_indices must have shape [{shape[0]}] (one per batch "
                            f"entry), got {list(node.shape(2))}")
        start = _op.reshape(_op.cast(node.input(2), I64), [shape[0]] + [1] * (ndim - 1))
        steps = _op.add(start, steps)
    if mode == "circular":
        steps = _op.floor_mod(steps, node.const(past_shape[axis], I64))
    indices = _op.broadcast_to(steps, shape)
    return _op.scatter_elements(past, indices, update, axis=axis)
