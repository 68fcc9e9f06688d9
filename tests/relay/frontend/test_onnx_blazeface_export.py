"""MediaPipe's BlazeFace as its PyTorch ports export it (opset 13; built by
``relay.testing.exported_onnx.blazeface``): explicit Pads for TensorFlow's SAME padding before
the strided convs (folded into the convs: ``FoldExplicitPadding``), blocks whose skip a
channel Pad widens to 28, 36, 42... channels (the 1x1 conv padded to whole blocks, the skip its
residual, padded with zero channels: ``AlterOpLayout``), and heads transposed to channels-last
and concatenated. Against onnxruntime (float32, 1e-4 of each output's scale: conv sums)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _onnx_util import run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx import blazeface

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def test_blazeface_matches_onnxruntime_with_no_image_pad_and_blocked_blocks():
    model = blazeface(image=64)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype("float32")
    compiled = ember.compile(model, threads=1)
    lib = compiled.factory.lib
    source = "".join(m.get_source() for m in [lib, *lib.imported_modules])
    widths = re.findall(r"pad_width=\[\[0, 0\], \[\d+, \d+\], \[(\d+), (\d+)\], \[(\d+), (\d+)\]\]",
                        source)
    assert widths and all(w == ("0",) * 4 for w in widths)  # channel pads of the skips only
    plain = {k for k in re.findall(r'func_name_hint="([^"]+)"', source)
             if k.startswith("fused_nn_conv2d")}
    assert len(plain) <= 1, plain  # a head's 1x1 conv to 2 channels (more padding than work)
    # sixteen residual blocks of random weights grow the values to ~40: errors are measured
    # against each output's scale (float32 sums in another order: 1e-4 of it)
    for got, want in zip(compiled(x), run_ort(model, {"input": x})):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
