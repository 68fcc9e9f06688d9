"""Converters of the indexing operators: Gather, GatherElements, GatherND, ScatterElements,
TopK, CumSum.

ONNX indices may be negative (counting from the end); Relay's ``take`` runs in "wrap" mode,
and the gather/scatter ops below wrap negative indices themselves. An index outside
``[-n, n)`` is an error in ONNX (onnxruntime raises): constant indices are checked here, run-time
ones by a ``check_indices`` op in front of the gather or scatter. A TopK K known only at
run time goes to ``dyn.topk``; a CumSum axis known only at run time sums along every axis
and picks the one asked for (rank times the work).
"""
from __future__ import annotations

from ....ir.expr import RelayExpr
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._symbolic import SymShape
from ._util import norm_axis


def gather(node: Node) -> RelayExpr:
    data, ty = node.input(0, "data"), node.type(0)
    axis = norm_axis(node, node.attr("axis", 0), ty.ndim)
    _gather_sym(node)
    return _op.take(data, _indices(node, (axis,)), axis=axis, mode="wrap")


def _indices(node: Node, axes: tuple[int, ...]) -> RelayExpr:
    """Input 1 (indices into data's ``axes``: one, or one per position of the tuples along
    indices' last axis), checked to be in range: now when constant, else at run time."""
    idx, value = node.input(1, "indices"), node.value(1)
    sizes = [node.type(0).shape[a] for a in axes]
    if value is None or not all(isinstance(n, int) for n in sizes):
        return _op.check_indices(node.input(0), idx, axes, where=node.label)
    flat = value.reshape(-1).astype("int64")
    for k, n in enumerate(sizes):
        part = flat[k::len(axes)]
        bad = ((part < -n) | (part >= n)).nonzero()[0]
        if bad.size:
            at = int(bad[0]) * len(axes) + k
            raise node.fail(f"index {flat[at]} (element {at} of the indices, flat) is out of "
                            f"range for axis {axes[k]} of data (size {n}): indices must be in "
                            f"[{-n}, {n - 1}]")
    return idx


def _gather_sym(node: Node) -> None:
    """Gather of a symbolic shape value with known indices picks its elements."""
    sym, idx = node.sym(0), node.value(1)
    if sym is None or sym.scalar or idx is None or idx.ndim > 1:
        return
    n = len(sym.elems)
    picked = tuple(sym.elems[int(i) % n] for i in idx.reshape(-1))
    node.set_sym(SymShape(picked, scalar=idx.ndim == 0))


def gather_elements(node: Node) -> RelayExpr:
    ndim = node.ndim(0)
    if node.ndim(1) != ndim:
        raise node.fail(f"indices must have the rank of data ({ndim}), got {node.ndim(1)}")
    axis = norm_axis(node, node.attr("axis", 0), ndim)
    return _op.gather(node.input(0), axis, _indices(node, (axis,)))


def gather_nd(node: Node) -> RelayExpr:
    """GatherND: ONNX puts the index tuples on the last axis of indices, Relay's gather_nd on
    the first, so the indices are transposed."""
    idx, ity = node.input(1, "indices"), node.type(1)
    if ity.ndim < 1:
        raise node.fail("indices must have rank >= 1")
    batch_dims = node.attr("batch_dims", 0)
    index_rank = ity.shape[-1]
    if not isinstance(index_rank, int):
        raise node.unsupported("a dynamic index tuple length (last axis of indices)")
    if batch_dims + index_rank > node.ndim(0):
        raise node.fail(f"indices address {index_rank} axes after {batch_dims} batch axes, but "
                        f"data has rank {node.ndim(0)}")
    idx = _indices(node, tuple(range(batch_dims, batch_dims + index_rank)))
    perm = [ity.ndim - 1, *range(ity.ndim - 1)]
    return _op.gather_nd(node.input(0), _op.transpose(idx, perm), batch_dims=batch_dims,
                         index_rank=index_rank)


_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def scatter_elements(node: Node) -> RelayExpr:
    ndim = node.ndim(0)
    axis = norm_axis(node, node.attr("axis", 0), ndim)
    reduction = node.choice("reduction", "none", tuple(_REDUCTIONS))
    if node.ndim(1) != ndim or node.ndim(2) != ndim:
        raise node.fail("data, indices and updates must have the same rank")
    return _op.scatter_elements(node.input(0), _indices(node, (axis,)), node.input(2), axis,
                                _REDUCTIONS[reduction])


def scatter_nd(node: Node) -> RelayExpr:
    """ScatterND: indices (..., k) hold index tuples along their last axis; Relay's scatter_nd
    takes them along axis 0."""
    reduction = node.choice("reduction", "none", tuple(_REDUCTIONS))
    rank = node.ndim(1)
    if rank < 1:
        raise node.fail("indices must have rank >= 1 (index tuples along the last axis)")
    tuple_length = node.type(1).shape[-1]
    if not isinstance(tuple_length, int) or tuple_length > node.ndim(0):
        raise node.fail(f"indices {node.type(1).shape} must hold index tuples of a static "
                        f"length of at most data's rank {node.ndim(0)} along their last axis")
    checked = _indices(node, tuple(range(tuple_length)))
    indices = _op.transpose(checked, (rank - 1, *range(rank - 1)))
    return _op.scatter_nd(node.input(0, "data"), indices, node.input(2, "updates"),
                          _REDUCTIONS[reduction])


def top_k(node: Node) -> list[RelayExpr]:
    x, ty = node.input(0), node.type(0)
    axis = norm_axis(node, node.attr("axis", -1), ty.ndim)
    if node.value(1) is None:  # a K known only at run time
        if node.type(1).shape not in ((), (1,)):
            raise node.fail(f"K must hold one value, got shape {node.type(1).shape}")
        out = _op.dyn.topk(x, rt.int64(node, 1, "K"), axis, ret_type="both",
                           is_ascend=not node.attr("largest", 1), dtype="int64",
                           where=node.label)
        return [out[0], out[1]]
    k = int(node.ints(1, "K")[0])
    if k < 0 or (isinstance(ty.shape[axis], int) and k > ty.shape[axis]):
        raise node.fail(f"K={k} is out of range for an axis of size {ty.shape[axis]}")
    out = _op.topk(x, k, axis, ret_type="both", is_ascend=not node.attr("largest", 1),
                   dtype="int64")
    return [out[0], out[1]]


def cum_sum(node: Node) -> RelayExpr:
    x, ndim = node.input(0), node.ndim(0)
    if node.value(1) is None:  # an axis known only at run time: each axis's sum, picked
        axis = rt.nonnegative_axes(rt.scalar(rt.int64(node, 1, "axis")), ndim)
        out = _cum_sum(node, x, 0)
        for a in range(1, ndim):
            out = _op.where(_op.equal(axis, node.const(a, rt.I64)), _cum_sum(node, x, a), out)
        return out
    return _cum_sum(node, x, norm_axis(node, node.ints(1, "axis")[0], ndim))


def _cum_sum(node: Node, x: RelayExpr, axis: int) -> RelayExpr:
    exclusive = bool(node.attr("exclusive", 0))
    if node.attr("reverse", 0):
        return _op.reverse(_op.cumsum(_op.reverse(x, axis), axis, exclusive=exclusive), axis)
    return _op.cumsum(x, axis, exclusive=exclusive)
