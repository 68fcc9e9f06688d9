"""NonMaxSuppression, decomposed: sort, pairwise IoU, a fixed-point loop for the greedy
selection, and the selected (batch, class, box) triples cut to their run-time count.

Per batch and class, boxes are taken by decreasing score (ties: the lower index first);
one is selected when its score is above ``score_threshold`` (when given) and its IoU with
every box selected before it is at most ``iou_threshold``, until
``max_output_boxes_per_class`` are selected (ONNX's reference, including its rules for
boxes of zero area). The greedy choice is the unique fixed point of "kept = valid and not
suppressed by a kept box before it" (box i depends only on boxes before it): starting from
every valid box, a recursive local function (VM) applies that rule until nothing changes, at
most N times and usually a few. The result's length is known only at run time (``nonzero_padded`` then
``dyn.strided_slice``): the VM runs it. Memory and time grow as batches x classes x N^2.
"""
from __future__ import annotations

import numpy as np

from ....ir.expr import Call, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var, const
from ....ir.types import FuncType, TensorType, TupleType
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import check_constant_size, scalar

F32, I64 = "float32", "int64"


def _edges(node: Node, b: RelayExpr) -> tuple[RelayExpr, RelayExpr, RelayExpr, RelayExpr]:
    """(x_min, x_max, y_min, y_max) of boxes (..., 4) in the node's box format."""
    parts = [_op.take(b, const(np.array(k, I64)), axis=-1) for k in range(4)]
    if node.attr("center_point_box", 0):  # (x_center, y_center, width, height)
        half_w = _op.divide(parts[2], scalar(2.0, F32))
        half_h = _op.divide(parts[3], scalar(2.0, F32))
        return (_op.subtract(parts[0], half_w), _op.add(parts[0], half_w),
                _op.subtract(parts[1], half_h), _op.add(parts[1], half_h))
    y1, x1, y2, x2 = parts  # corners in either order
    return (_op.minimum(x1, x2), _op.maximum(x1, x2), _op.minimum(y1, y2),
            _op.maximum(y1, y2))


def _suppresses(node: Node, boxes: RelayExpr, threshold: RelayExpr, n: int) -> RelayExpr:
    """bool (B, C, N, N): box j (sorted, before i) suppresses box i."""
    x0, x1, y0, y1 = _edges(node, boxes)

    def pair(v: RelayExpr) -> tuple[RelayExpr, RelayExpr]:  # as rows i and as columns j
        return _op.expand_dims(v, 3), _op.expand_dims(v, 2)

    (ax0, bx0), (ax1, bx1), (ay0, by0), (ay1, by1) = map(pair, (x0, x1, y0, y1))
    zero = scalar(0.0, F32)
    width = _op.subtract(_op.minimum(ax1, bx1), _op.maximum(ax0, bx0))
    height = _op.subtract(_op.minimum(ay1, by1), _op.maximum(ay0, by0))
    inter = _op.multiply(width, height)
    area_i = _op.multiply(_op.subtract(ax1, ax0), _op.subtract(ay1, ay0))
    area_j = _op.multiply(_op.subtract(bx1, bx0), _op.subtract(by1, by0))
    union = _op.subtract(_op.add(area_i, area_j), inter)
    ok = [_op.greater(width, zero), _op.greater(height, zero), _op.greater(inter, zero),
          _op.greater(area_i, zero), _op.greater(area_j, zero), _op.greater(union, zero)]
    safe = _op.where(ok[-1], union, scalar(1.0, F32))
    over = _op.greater(_op.divide(inter, safe), threshold)
    before = const(np.tril(np.ones((n, n), bool), -1))  # j < i
    out = _op.logical_and(over, before)
    for cond in ok:
        out = _op.logical_and(out, cond)
    return out


def _greedy(node: Node, valid: RelayExpr, suppress: RelayExpr,
            dims: tuple[int, int, int]) -> RelayExpr:
    """The fixed point of keep = valid and not any(keep[j] and suppress[i, j]): a recursive
    local function (VM) that steps until keep stops changing. ``valid`` and ``suppress``
    are passed along as parameters (the function captures nothing)."""
    imp = node.scope.importer
    keep_t, changed_t = TensorType(dims, "bool"), TensorType((), "bool")
    params = [imp.tensor_var("keep", "bool", dims), imp.tensor_var("changed", "bool", ()),
              imp.tensor_var("valid", "bool", dims),
              imp.tensor_var("suppress", "bool", (*dims, dims[-1]))]
    keep, changed, valid_p, suppress_p = params
    hit = _op.any(_op.logical_and(_op.expand_dims(keep, 2), suppress_p), axis=[3])
    new = _op.logical_and(valid_p, _op.logical_not(hit))
    ret = TupleType((keep_t, changed_t))
    loop = Var("nms_loop", FuncType(tuple(imp.typer.types[p] for p in params), ret))
    imp.typer.declare(loop, loop.type_annotation)  # type: ignore[arg-type]
    again = Call(loop, (new, _op.any(_op.not_equal(new, keep)), valid_p, suppress_p))
    func = Function(tuple(params), If(changed, again, Tuple((keep, changed))), ret)
    result = Let(loop, func, Call(loop, (valid, const(np.array(True)), valid, suppress)))
    node.declare(result, ret)
    out = TupleGetItem(result, 0)
    node.declare(out, keep_t)
    return out


def non_max_suppression(node: Node) -> RelayExpr:
    boxes, scores = node.input(0, "boxes"), node.input(1, "scores")
    batch, n, four = node.static_shape(0, "boxes")
    s_batch, classes, s_n = node.static_shape(1, "scores")
    if four != 4 or (s_batch, s_n) != (batch, n):
        raise node.fail(f"boxes {[batch, n, four]} and scores {[s_batch, classes, s_n]} must "
                        "be (B, N, 4) and (B, C, N)")
    if node.dtype(0) != F32 or node.dtype(1) != F32:
        raise node.unsupported("boxes and scores other than float32")
    check_constant_size(node, (n, n), f"the pairwise order of {n} boxes")
    limit = _scalar_input(node, 2, I64, 0)
    iou = _scalar_input(node, 3, F32, 0.0)
    sorted_scores, order = _op.topk(scores, n, 2, ret_type="both", is_ascend=False,
                                    dtype=I64)
    spread = _op.broadcast_to(_op.expand_dims(boxes, 1), (batch, classes, n, 4))
    picked = _op.gather(spread, 2, _op.broadcast_to(_op.expand_dims(order, 3),
                                                    (batch, classes, n, 4)))
    valid = _op.greater(sorted_scores, _scalar_input(node, 4, F32, 0.0)) if node.has_input(
        4) else _op.ones_like(_op.cast(sorted_scores, "bool"))
    keep = _greedy(node, valid, _suppresses(node, picked, iou, n), (batch, classes, n))
    rank = _op.cumsum(_op.cast(keep, I64), axis=2, exclusive=True)
    final = _op.logical_and(keep, _op.less(rank, _op.maximum(limit, scalar(0, I64))))
    coords, count = _op.nonzero_padded(final)
    cut = _op.strided_slice(coords, rt.vector([0]), count, axes=[1])  # (3, selected)
    box = _op.gather_nd(order, cut)
    rows = [_op.take(cut, const(np.array(k, I64)), axis=0) for k in (0, 1)]
    return _op.stack([*rows, box], 1)


def _scalar_input(node: Node, i: int, dtype: str, default: float) -> RelayExpr:
    """Optional input ``i`` (a scalar or one value) as a 0-d ``dtype`` tensor."""
    if not node.has_input(i):
        return scalar(default, dtype)
    x = node.input(i)
    if node.type(i).ndim:
        x = rt.scalar(x)
    return x if node.dtype(i) == dtype else _op.cast(x, dtype)
