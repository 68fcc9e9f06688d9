"""NonMaxSuppression through ``vision.all_class_non_max_suppression`` (kernels/nms.h) against
onnxruntime: hypothesis-drawn batches, classes, box counts (0 too), limits (0, past the box
count, run-time), IoU and score thresholds, both box formats, ties, flipped corners and boxes of
no area, on one model compiled with every size symbolic; a YOLO-style post-processing graph at
8400 anchors; the errors. Results are integers: exact."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, graph_model, run_ort
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx import yolo_post_nms
from ember.runtime.errors import FrontendError, OpNotImplemented

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _model(center: int, with_score: bool, limit: int | None = None):
    """One NonMaxSuppression node; boxes (B, N, 4) and scores (B, C, N) symbolic; the limit
    a constant when given, else an input (as the thresholds are)."""
    inputs = ["b", "s", "m" if limit is None else "mc", "i"] + (["t"] if with_score else [])
    infos = [helper.make_tensor_value_info("b", TP.FLOAT, ["batch", "boxes", 4]),
             helper.make_tensor_value_info("s", TP.FLOAT, ["batch", "classes", "boxes"]),
             helper.make_tensor_value_info("i", TP.FLOAT, [1])]
    infos += [helper.make_tensor_value_info("m", TP.INT64, [1])] if limit is None else []
    infos += [helper.make_tensor_value_info("t", TP.FLOAT, [1])] if with_score else []
    inits = [helper.make_tensor("mc", TP.INT64, [1], [limit])] if limit is not None else []
    node = helper.make_node("NonMaxSuppression", inputs, ["y"], name="nms",
                            center_point_box=center)
    model = graph_model([node], inputs=infos, inits=inits, opset=11)
    model.graph.output[0].type.tensor_type.elem_type = TP.INT64
    return model


def _boxes(rng: np.random.Generator, batch: int, classes: int, n: int, center: int):
    xy = rng.uniform(0, 10, (batch, n, 2))
    wh = rng.uniform(0.5, 4, (batch, n, 2))
    wh[:, ::5] = 0.0  # boxes of no area never suppress nor are suppressed
    if center:
        boxes = np.concatenate([xy, wh], -1)
    else:  # (y1, x1, y2, x2), some corners flipped
        boxes = np.concatenate([xy[..., ::-1], xy[..., ::-1] + wh], -1)
        boxes[:, ::3] = boxes[:, ::3][..., [2, 3, 0, 1]]
    if n > 3:
        boxes[:, 3] = boxes[:, 2]  # a duplicate box
    scores = np.round(rng.uniform(0, 1, (batch, classes, n)), 1)  # many ties
    return boxes.astype("float32"), scores.astype("float32")


_COMPILED: dict = {}


def _compiled(center: int, with_score: bool):
    key = (center, with_score)
    if key not in _COMPILED:
        model = _model(center, with_score)
        _COMPILED[key] = (model, ember.compile(model))
    return _COMPILED[key]


@needs_cc
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=st.integers(1, 3), classes=st.integers(1, 4), n=st.integers(0, 40),
       limit=st.integers(-2, 9), iou=st.sampled_from([0.0, 0.3, 0.5, 0.9]),
       score=st.sampled_from([None, 0.0, 0.45]), center=st.integers(0, 1),
       seed=st.integers(0, 2**32 - 1))
def test_nms_matches_onnxruntime_at_run_time_sizes(batch, classes, n, limit, iou, score, center,
                                                   seed):
    model, run = _compiled(center, score is not None)
    boxes, scores = _boxes(np.random.default_rng(seed), batch, classes, n, center)
    inputs = {"b": boxes, "s": scores, "m": np.array([limit], "int64"),
              "i": np.array([iou], "float32")}
    if score is not None:
        inputs["t"] = np.array([score], "float32")
    label = f"nms {batch}x{classes}x{n} limit {limit} iou {iou} score {score} center {center}"
    compare(label, [run(**inputs)], run_ort(model, inputs))


@needs_cc
def test_a_constant_limit_bounds_the_output_and_matches_onnxruntime():
    model = _model(0, True, limit=3)
    run = ember.compile(model)
    rng = np.random.default_rng(3)
    for batch, classes, n in ((2, 3, 30), (1, 1, 2), (1, 5, 0)):
        boxes, scores = _boxes(rng, batch, classes, n, 0)
        inputs = {"b": boxes, "s": scores, "i": np.array([0.4], "float32"),
                  "t": np.array([0.2], "float32")}
        compare(f"nms limit 3 {batch}x{classes}x{n}", [run(**inputs)], run_ort(model, inputs))


@needs_cc
@pytest.mark.parametrize("limit", [2**63 - 1, 2**31, 2**31 - 1])
def test_a_limit_past_int32_is_no_bound(limit):
    """torchvision exports NMS with max_output_boxes_per_class = sys.maxsize: the output holds
    every box (its int32 sizes did not overflow into a negative allocation)."""
    model = _model(1, True, limit=limit)
    run = ember.compile(model)
    boxes, scores = _boxes(np.random.default_rng(5), 2, 3, 30, 1)
    inputs = {"b": boxes, "s": scores, "i": np.array([0.4], "float32"),
              "t": np.array([0.2], "float32")}
    compare(f"nms limit {limit}", [run(**inputs)], run_ort(model, inputs))


@needs_cc
def test_yolo_style_post_processing_at_any_anchor_count():
    model = yolo_post_nms()
    run = ember.compile(model)
    rng = np.random.default_rng(8)
    for batch, anchors in ((1, 8400), (2, 300), (1, 1)):
        preds = rng.random((batch, 12, anchors), dtype=np.float32)
        preds[:, :2] *= 100
        preds[:, 2:4] *= 20
        compare(f"yolo post {batch}x{anchors}", list(run(preds)),
                run_ort(model, {"preds": preds}))


def test_nms_errors_name_the_node_and_the_shapes():
    node = helper.make_node("NonMaxSuppression", ["b", "s"], ["y"], name="nms")
    bad = graph_model([node], opset=11, inputs=[
        helper.make_tensor_value_info("b", TP.FLOAT, [1, 4, 4]),
        helper.make_tensor_value_info("s", TP.FLOAT, [1, 2, 5])])
    with pytest.raises(FrontendError, match=r"NonMaxSuppression node 'nms': boxes \[1, 4, 4\] "
                                            r"and scores \[1, 2, 5\] must be"):
        ember.relay.frontend.from_onnx(bad)
    f64 = graph_model([node], opset=11, inputs=[
        helper.make_tensor_value_info("b", TP.DOUBLE, [1, 4, 4]),
        helper.make_tensor_value_info("s", TP.DOUBLE, [1, 2, 4])])
    with pytest.raises(OpNotImplemented, match="NonMaxSuppression node 'nms'.*float32"):
        ember.relay.frontend.from_onnx(f64)
