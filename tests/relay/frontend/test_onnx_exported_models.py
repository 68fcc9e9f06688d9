"""Exporter-style models (``relay.testing.exported_onnx``) compiled with no shapes, against
onnxruntime: a PaddleOCR-style text detector (paddle2onnx's BatchNormalization, HardSigmoid
activations, Resize-11 upsampling, ConvTranspose head) at several image sizes (multiples of
32, as PaddleOCR resizes them: its FPN adds need them), and a Silero-style voice activity model (Conv1d STFT, LSTM with its state as inputs
and outputs) at several batches and lengths and in a streaming loop that feeds the state
back. Tolerances: SUMS (float32 sums of products)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx import paddle_text_detector, vad_lstm

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


@needs_cc
def test_paddle_style_text_detector_at_any_image_size():
    model = paddle_text_detector(channels=(8, 16, 16, 24), head=16)
    run = ember.compile(model)
    rng = np.random.default_rng(2)
    for shape in ((1, 3, 64, 64), (2, 3, 32, 96), (1, 3, 96, 160)):
        x = rng.random(shape, dtype=np.float32)
        compare(f"paddle det {shape}", [run(x)], run_ort(model, {"x": x}), SUMS)


@needs_cc
def test_vad_with_lstm_state_in_and_out_streams_like_onnxruntime():
    model = vad_lstm(nfft=64, hop=32, hidden=16)
    run = ember.compile(model)
    rng = np.random.default_rng(4)
    for batch, samples in ((1, 512), (3, 1000), (2, 64)):
        feeds = {"input": rng.standard_normal((batch, samples)).astype("float32"),
                 "h": rng.standard_normal((1, batch, 16)).astype("float32") * 0.1,
                 "c": rng.standard_normal((1, batch, 16)).astype("float32") * 0.1}
        compare(f"vad {batch}x{samples}", list(run(**feeds)), run_ort(model, feeds), SUMS)
    state = ours = {"h": np.zeros((1, 1, 16), "float32"), "c": np.zeros((1, 1, 16), "float32")}
    for _ in range(5):  # 256-sample chunks, the state fed back on both sides
        chunk = rng.standard_normal((1, 256)).astype("float32")
        want = run_ort(model, {"input": chunk, **state})
        got = list(run(chunk, ours["h"], ours["c"]))
        compare("vad stream", got, want, SUMS)
        state = {"h": want[1], "c": want[2]}
        ours = {"h": got[1], "c": got[2]}
