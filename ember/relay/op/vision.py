"""``vision.all_class_non_max_suppression``: non-maximum suppression per batch and class
(ONNX NonMaxSuppression; Relay's op of that name with ``output_format="onnx"``).

    selected, count = all_class_non_max_suppression(boxes, scores, max_output, iou, score)
    selected[:count[0]]          # int64 (selected, 3): (batch, class, box) triples

boxes (batch, n, 4) and scores (batch, classes, n) are float32; ``max_output_boxes_per_class``
(int64), ``iou_threshold`` and ``score_threshold`` (float32) are scalars known at run time. Per
batch and class, boxes are taken by decreasing score (equal scores: the lower index first),
only those scoring above ``score_threshold`` (unless ``has_score_threshold`` is false); one is
selected unless its IoU with a box selected before it is above ``iou_threshold``, up to
``max_output_boxes_per_class`` (none for 0, no limit when negative). Boxes are corners in either
order (y1, x1, y2, x2), or with ``center_point_box`` (x centre, y centre, width, height).

The number selected depends on the values, so the op returns a buffer with room for the most
there can be (batch x classes x min(n, ``max_output_size``), where ``max_output_size`` is a
bound known when the model is built, -1 for none) and the count; the importer slices the first
``count`` rows. The C kernel (``kernels/nms.h``) sorts each class's candidates once and
compares each with the boxes selected before it: no n x n matrix.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.types import Any as AnyDim
from ...ir.types import TensorType, TupleType, Type
from ...te import tensor as te
from ...tir import op as tir
from ._attrs_base import OpAttrs, attrs_class
from ._reg import OPAQUE, call, defop
from ._shape import fail, fmt_type, known, tensor_of
from ._tuple import TupleWrapper

__all__ = ["all_class_non_max_suppression"]

OP = "vision.all_class_non_max_suppression"
I64, F32 = "int64", "float32"


@attrs_class("AllClassNonMaximumSuppressionAttrs")
class AllClassNMSAttrs(OpAttrs):
    """``center_point_box`` (the boxes' format), ``has_score_threshold`` (whether the
    score_threshold argument applies), ``max_output_size`` (a bound on the run-time limit that
    sizes the output, -1: none) and ``output_format`` ("onnx" only)."""

    center_point_box: bool = False
    has_score_threshold: bool = True
    max_output_size: int = -1
    output_format: str = "onnx"
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        self._bool("center_point_box", "has_score_threshold")
        self._int("max_output_size")
        self._choice("output_format", ("onnx",))


# A bound past this is no bound (torchvision exports the limit as sys.maxsize): the sizes are
# int32 in the kernels' loops.
MAX_BOUND = 2**31 - 1


def _bound(attrs: AllClassNMSAttrs) -> int | None:
    """The static bound on the selected boxes per class, None when there is none."""
    b = attrs.max_output_size
    return None if b < 0 or b >= MAX_BOUND else b


def _rows(batch: Any, classes: Any, n: Any, bound: int | None) -> Any:
    if not (known(batch) and known(classes) and known(n)):
        return AnyDim()
    return batch * classes * (n if bound is None else min(n, bound))


def _rel(args: list[TensorType], attrs: AllClassNMSAttrs) -> Type:
    boxes, scores, limit, iou, score = args
    if boxes.ndim != 3 or known(boxes.shape[2]) and boxes.shape[2] != 4 or boxes.dtype != F32:
        raise fail(OP, f"boxes must be float32 (batch, n, 4), got {fmt_type(boxes)}")
    if scores.ndim != 3 or scores.dtype != F32:
        raise fail(OP, f"scores must be float32 (batch, classes, n), got {fmt_type(scores)}")
    for k, (a, b) in enumerate(((boxes.shape[0], scores.shape[0]),
                                (boxes.shape[1], scores.shape[2]))):
        if known(a) and known(b) and a != b:
            raise fail(OP, f"boxes {fmt_type(boxes)} and scores {fmt_type(scores)} disagree "
                           f"on the {('batch', 'box count')[k]}")
    for name, t, dtype in (("max_output_boxes_per_class", limit, I64),
                           ("iou_threshold", iou, F32), ("score_threshold", score, F32)):
        if t.ndim != 0 or t.dtype != dtype:
            raise fail(OP, f"{name} must be a {dtype} scalar, got {fmt_type(t)}")
    rows = _rows(boxes.shape[0], scores.shape[1], boxes.shape[1], _bound(attrs))
    return TupleType((tensor_of((rows, 3), I64), tensor_of((1,), I64)))


def _edges(b: np.ndarray, center: bool) -> tuple[np.ndarray, ...]:
    if center:
        return (b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2, b[:, 0] + b[:, 2] / 2,
                b[:, 1] + b[:, 3] / 2)
    return (np.minimum(b[:, 1], b[:, 3]), np.minimum(b[:, 0], b[:, 2]),
            np.maximum(b[:, 1], b[:, 3]), np.maximum(b[:, 0], b[:, 2]))


def _ref(boxes: np.ndarray, scores: np.ndarray, limit: np.ndarray, iou: np.ndarray,
         score: np.ndarray, attrs: AllClassNMSAttrs) -> tuple[np.ndarray, np.ndarray]:
    batch, n = boxes.shape[:2]
    classes = scores.shape[1]
    cap = n if int(limit) < 0 else min(int(limit), n)
    found = []
    for b in range(batch):
        x0, y0, x1, y1 = _edges(boxes[b].astype(F32), attrs.center_point_box)
        area = (x1 - x0) * (y1 - y0)
        for c in range(classes):
            s = scores[b, c]
            order = sorted((i for i in range(n) if not attrs.has_score_threshold or
                            s[i] > score), key=lambda i: (-s[i], i))
            kept: list[int] = []
            for i in order:
                if len(kept) >= cap:
                    break
                if not any(_suppresses(j, i, x0, y0, x1, y1, area, float(iou)) for j in kept):
                    kept.append(i)
                    found.append((b, c, i))
    rows = _rows(batch, classes, n, _bound(attrs))
    out = np.zeros((rows, 3), I64)
    out[:len(found)] = np.array(found, I64).reshape(-1, 3)
    return out, np.array([len(found)], I64)


def _suppresses(j: int, i: int, x0: np.ndarray, y0: np.ndarray, x1: np.ndarray, y1: np.ndarray,
                area: np.ndarray, iou: float) -> bool:
    w = np.float32(min(x1[j], x1[i]) - max(x0[j], x0[i]))
    h = np.float32(min(y1[j], y1[i]) - max(y0[j], y0[i]))
    if w <= 0 or h <= 0:
        return False
    inter = w * h
    union = area[j] + area[i] - inter
    if inter <= 0 or area[j] <= 0 or area[i] <= 0 or union <= 0:
        return False
    return bool(inter / union > iou)


def _compute(attrs: AllClassNMSAttrs, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    from ...topi.vision import all_class_non_max_suppression as topi_nms

    boxes, scores, limit, iou, score = inputs
    n, bound = boxes.shape[1], _bound(attrs)
    per_class = n if bound is None else tir.min(n, bound)
    rows = boxes.shape[0] * scores.shape[1] * per_class
    return topi_nms(boxes, scores, limit, iou, score, rows,
                    has_score_threshold=attrs.has_score_threshold,
                    center_point_box=attrs.center_point_box)


defop(OP, _rel, _ref, OPAQUE, args=("boxes", "scores", "max_output_boxes_per_class",
                                    "iou_threshold", "score_threshold"),
      attrs=AllClassNMSAttrs, level=10, compute=_compute,
      doc="Non-maximum suppression per batch and class (ONNX's output format).")


def all_class_non_max_suppression(boxes: Any, scores: Any, max_output_boxes_per_class: Any = -1,
                                  iou_threshold: Any = -1.0, score_threshold: Any = None,
                                  output_format: str = "onnx", *, center_point_box: bool = False,
                                  max_output_size: int = -1) -> TupleWrapper:
    """(selected (batch, class, box) triples in a buffer of the most there can be, then
    zeros; their count): see the module docstring. Python numbers become scalar constants;
    ``score_threshold=None`` takes every box as a candidate."""
    from ...ir.expr import RelayExpr, const

    def scalar(v: Any, dtype: str) -> Any:
        return v if isinstance(v, RelayExpr) else const(np.array(v, dtype))

    has = score_threshold is not None
    if max_output_size < 0 and not isinstance(max_output_boxes_per_class, RelayExpr) and \
            int(max_output_boxes_per_class) >= 0:
        max_output_size = int(max_output_boxes_per_class)
    attrs = AllClassNMSAttrs(center_point_box, has, max_output_size, output_format)
    return TupleWrapper(call(OP, boxes, scores, scalar(max_output_boxes_per_class, I64),
                             scalar(iou_threshold, F32),
                             scalar(score_threshold if has else 0.0, F32), attrs=attrs), 2)
