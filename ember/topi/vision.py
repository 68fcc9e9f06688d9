"""Non-maximum suppression: a call of ``ember_non_max_suppression``
(``ember/include/ember/kernels/nms.h``) for the ``vision.all_class_non_max_suppression`` op."""
from __future__ import annotations

from ..te import tensor as te
from ..tir import op as tir
from .nn.sizes import Dim, succeeds

HEADER = "ember/kernels/nms.h"


def all_class_non_max_suppression(boxes: te.Tensor, scores: te.Tensor, max_output: te.Tensor,
                                  iou_threshold: te.Tensor, score_threshold: te.Tensor,
                                  rows: Dim, *, has_score_threshold: bool,
                                  center_point_box: bool) -> list[te.Tensor]:
    """(int64 (rows, 3) selected (batch, class, box) triples, then zeros; int64 (1,) their
    count) of boxes (batch, n, 4) and scores (batch, classes, n), float32. The limit (int64)
    and the thresholds (float32) are scalars whose values are read at run time."""
    batch, n = boxes.shape[0], boxes.shape[1]
    classes = scores.shape[1]
    inputs = [boxes, scores, max_output, iou_threshold, score_threshold]

    def body(ins: list, outs: list) -> object:
        limit, iou, score = (ins[k].vload([]) for k in (2, 3, 4))
        call = tir.call_extern(
            "int32", "ember_non_max_suppression", ins[0].data, ins[1].data,
            tir.cast(batch, "int64"), tir.cast(classes, "int64"), tir.cast(n, "int64"), limit,
            iou, int(has_score_threshold), score, int(center_point_box), outs[0].data,
            tir.cast(rows, "int64"), outs[1].data, header=HEADER)
        return succeeds(call, "vision.all_class_non_max_suppression: ember_non_max_suppression "
                              "failed (out of workspace memory, or too few output rows)")

    return te.extern([(rows, 3), (1,)], inputs, body, name="T_nms",
                     dtype=["int64", "int64"], tag="non_max_suppression")
