"""NonMaxSuppression: ``vision.all_class_non_max_suppression`` (a C kernel: per batch and
class, one sort of the candidates and an IoU test against the boxes selected before each),
then the selected (batch, class, box) triples cut to their run-time count.

Boxes, classes and the batch may be known only at run time. The output buffer has room for
batch x classes x min(n, max_output_boxes_per_class) triples when the limit is a constant
(exporters write it so), else batch x classes x n; ONNX's rules apply (a limit of 0 selects
nothing; the score threshold, when given, keeps boxes scoring above it).
"""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import scalar

F32, I64 = "float32", "int64"


def non_max_suppression(node: Node) -> RelayExpr:
    boxes, scores = node.input(0, "boxes"), node.input(1, "scores")
    b_shape, s_shape = node.shape(0), node.shape(1)
    if len(b_shape) != 3 or len(s_shape) != 3 or (isinstance(b_shape[2], int) and
                                                  b_shape[2] != 4) or \
            any(isinstance(a, int) and isinstance(c, int) and a != c
                for a, c in ((b_shape[0], s_shape[0]), (b_shape[1], s_shape[2]))):
        raise node.fail(f"boxes {list(b_shape)} and scores {list(s_shape)} must be (B, N, 4) "
                        "and (B, C, N)")
    if node.dtype(0) != F32 or node.dtype(1) != F32:
        raise node.unsupported("boxes and scores other than float32")
    limit = _scalar_input(node, 2, I64, 0)
    known = node.value(2) if node.has_input(2) else np.array(0)
    bound = max(int(np.asarray(known).reshape(-1)[0]), 0) if known is not None else -1
    selected, count = _op.vision.all_class_non_max_suppression(
        boxes, scores, _op.maximum(limit, scalar(0, I64)), _scalar_input(node, 3, F32, 0.0),
        _scalar_input(node, 4, F32, 0.0) if node.has_input(4) else None,
        center_point_box=bool(node.attr("center_point_box", 0)), max_output_size=bound)
    return _op.strided_slice(selected, rt.vector([0]), count, axes=[0])


def _scalar_input(node: Node, i: int, dtype: str, default: float) -> RelayExpr:
    """Optional input ``i`` (a scalar or one value) as a 0-d ``dtype`` tensor."""
    if not node.has_input(i):
        return scalar(default, dtype)
    x = node.input(i)
    if node.type(i).ndim:
        x = rt.scalar(x)
    return x if node.dtype(i) == dtype else _op.cast(x, dtype)
