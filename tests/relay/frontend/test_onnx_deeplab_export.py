"""DeepLabV3+ on a MobileNetV2 backbone as torch.onnx writes it (opset 13; built by
``relay.testing.exported_onnx_more.deeplabv3plus``): dilated depthwise stages, ASPP with
dilations 6, 12 and 18 (larger than the map at this size: the taps fall in the padding), an
image pooling branch resized back bilinearly to the ``Shape`` of the map, the decoder's
resizes to ``Shape``-computed sizes (half-pixel and align_corners). Against onnxruntime, at a
fixed size and with height and width left symbolic (two sizes through one build)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import check_without_shapes, run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx_more import deeplabv3plus

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


@pytest.mark.parametrize("align_corners", [False, True])
def test_deeplabv3plus_matches_onnxruntime(align_corners):
    model = deeplabv3plus(aspp=32, classes=5, align_corners=align_corners)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 48)).astype("float32")
    got = ember.compile(model, threads=1, input_shapes={"input": x.shape})(x)
    want = run_ort(model, {"input": x})[0]
    assert got.shape == (1, 5, 64, 48)
    # float32 conv sums in another order: 1e-4 of the output's scale
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow
def test_deeplabv3plus_symbolic_size_matches_onnxruntime():
    check_without_shapes(deeplabv3plus(aspp=32, classes=5), ((1, 3, 64, 64), (2, 3, 32, 80)))
