"""Whisper's audio encoder as optimum / torch.onnx writes it (opset 14; built by
``relay.testing.exported_onnx_more.whisper_encoder``, reduced): Conv1d + erf GELU, positions
added, LayerNorm spelled out, q and k scaled separately, head reshapes from ``Shape``
chains; the batch symbolic. Against onnxruntime at two batch sizes through one build."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx_more import whisper_encoder

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def test_whisper_encoder_matches_onnxruntime():
    model = whisper_encoder(mels=16, frames=120, width=64, heads=2, layers=2)
    compiled = ember.compile(model, threads=1)
    for batch in (1, 2):
        x = np.random.default_rng(batch).standard_normal((batch, 16, 120)).astype("float32")
        got = compiled(x)
        want = run_ort(model, {"input_features": x})[0]
        assert got.shape == (batch, 60, 64)
        # layer norms keep the scale near 1; matmul sums in another order
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
