"""ONNX Det: Gaussian elimination with partial pivoting, unrolled over the (static) matrix
size as Relay ops on the whole batch: per column, the row with the largest magnitude is
swapped up (the sign flips when it moves), its diagonal entry multiplies the determinant, and
the rows below are eliminated. A zero pivot makes the determinant 0 (and is replaced by 1 for
the division, so no NaN spreads)."""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node

MAX_SIZE = 64  # the elimination unrolls: n steps of O(n^2) work each


def det(node: Node) -> RelayExpr:
    x, shape = node.input(0, "X"), node.static_shape(0, "X")
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise node.fail(f"X must be [..., n, n] (square matrices), got shape {list(shape)}")
    n, batch = shape[-1], shape[:-2]
    if n > MAX_SIZE:
        raise node.unsupported(f"matrices of size {n} (the elimination unrolls; at most "
                               f"{MAX_SIZE})")
    dtype = node.dtype(0)
    if dtype not in ("float32", "float64"):
        raise node.fail(f"X must be float or double, got {dtype}")
    a = _op.reshape(x, (-1, n, n))
    b = int(np.prod(batch, dtype=np.int64))
    rows = node.const(np.arange(n).reshape(1, n, 1), "int64")
    result = node.const(np.ones((b,)), dtype)
    for k in range(n):
        a, factor = _eliminate(node, a, k, n, rows, dtype)
        result = _op.multiply(result, factor)
    return _op.reshape(result, batch)


def _eliminate(node: Node, a: RelayExpr, k: int, n: int, rows: RelayExpr, dtype: str
               ) -> tuple[RelayExpr, RelayExpr]:
    """Step ``k``: (the matrix with column k zero below the diagonal, pivot * sign)."""
    col = _op.abs(_op.squeeze(_op.strided_slice(a, [k], [k + 1], axes=[2]), [2]))  # (B, n)
    below = node.const(np.arange(n) >= k, "bool")
    pivot_row = _op.argmax(_op.where(below, col, node.const(-1, dtype)), axis=[1])  # (B,)
    p = _op.reshape(_op.cast(pivot_row, "int64"), (-1, 1, 1))
    row_k = _op.strided_slice(a, [k], [k + 1], axes=[1])  # (B, 1, n)
    row_p = _op.gather(a, 1, _op.broadcast_to_like(p, row_k))
    k_const = node.const(k, "int64")
    swapped = _op.where(_op.equal(rows, k_const), row_p,
                        _op.where(_op.equal(rows, p), row_k, a))
    pivot = _op.reshape(_op.strided_slice(row_p, [k], [k + 1], axes=[2]), (-1,))
    sign = _op.where(_op.equal(_op.reshape(p, (-1,)), k_const), node.const(1, dtype),
                     node.const(-1, dtype))
    zero = _op.equal(pivot, node.const(0, dtype))
    safe = _op.where(zero, node.const(1, dtype), pivot)
    factors = _op.divide(_op.strided_slice(swapped, [k], [k + 1], axes=[2]),
                         _op.reshape(safe, (-1, 1, 1)))  # (B, n, 1)
    factors = _op.where(_op.greater(rows, k_const), factors, node.const(0, dtype))
    eliminated = _op.subtract(swapped, _op.multiply(factors, row_p))
    return eliminated, _op.where(zero, node.const(0, dtype), _op.multiply(pivot, sign))
