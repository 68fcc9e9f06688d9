"""An EfficientDet-style detector as torch.onnx writes zylo117's port (opset 13; built by
``relay.testing.exported_onnx_more.efficientdet``, reduced): TF-SAME max pools as explicit
Pads, BiFPN fusion weights normalised in the graph (folded at build time), separable convs,
swish, nearest upsampling, heads transposed to channels-last and concatenated over levels.
Against onnxruntime (scores after a sigmoid, boxes)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx_more import efficientdet

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def test_efficientdet_matches_onnxruntime():
    model = efficientdet(image=128, width=16, layers=2, classes=6, anchors=3, head_depth=1)
    x = np.random.default_rng(0).standard_normal((1, 3, 128, 128)).astype("float32")
    got = ember.compile(model, threads=1)(x)
    want = run_ort(model, {"input": x})
    boxes = 3 * sum(s * s for s in (16, 8, 4, 2, 1))  # anchors per cell over P3..P7
    assert [g.shape for g in got] == [(1, boxes, 6), (1, boxes, 4)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())
