"""torchvision's ShuffleNetV2 as torch.onnx writes it (opset 13; built by
``relay.testing.exported_onnx.shufflenet_v2``): Split, a branch of 1x1, depthwise 3x3 and 1x1
convs on 58 and 116 channels (no multiple of a vector width), Concat and the channel shuffle
(Reshape to five axes with a shape computed from Shape/Gather/Div, Transpose, Reshape back);
batch symbolic.

Every conv runs blocked: the branch's padded to whole blocks, the depthwise conv reading the
padded 1x1 result as it is (``channel_pad``; AlterOpLayout), and the convs reading the plain
shuffled value read it zero-padded into blocks (``padded_blocks``). Compiled with no shapes and
with a shape, at batch 1 and 3, on even and odd maps, against onnxruntime (float32 rtol/atol
1e-4: conv sums)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx import shufflenet_v2

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _model(image: int = 64):
    return shufflenet_v2(stages=(116, 232), repeats=(2, 2), classes=10, image=image)


def _source(compiled) -> str:
    lib = compiled.factory.lib
    return "".join(m.get_source() for m in [lib, *lib.imported_modules])


@pytest.mark.parametrize("batch,image", [(1, 64), (3, 72)])  # 72: maps of 9 and 5
def test_shufflenet_with_a_shape_runs_every_conv_blocked(batch, image):
    model = _model(image)
    x = np.random.default_rng(0).standard_normal((batch, 3, image, image)).astype("float32")
    static = ember.compile(model, threads=1, input_shapes={"input": x.shape})
    plain = set(re.findall(r"/\* from: fn \([^\n]*\n  %0 = nn\.conv2d\([^\n]*", _source(static)))
    assert not plain, plain
    compare("shufflenet static", [static(x)], run_ort(model, {"input": x}), SUMS)


def test_shufflenet_without_shapes_matches_onnxruntime():
    model = _model()
    dynamic = ember.compile(model, threads=1)
    rng = np.random.default_rng(1)
    for batch in (1, 3, 1):
        x = rng.standard_normal((batch, 3, 64, 64)).astype("float32")
        got = dynamic(x)
        assert got.shape == (batch, 10)
        compare(f"shufflenet batch {batch}", [got], run_ort(model, {"input": x}), SUMS)
