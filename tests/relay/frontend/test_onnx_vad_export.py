"""A Silero-style voice activity model as torch.onnx writes it
(``relay.testing.exported_onnx.vad_lstm``: a Conv1d STFT, an LSTM whose state comes in and goes
out), compiled with no shapes, against onnxruntime at several batches and lengths and in a
streaming loop that feeds the state back. Tolerances: SUMS (float32 sums of products).
Other exporter-style models: test_onnx_paddle_detector.py, test_onnx_kv_cache_export.py,
test_onnx_nms.py."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx import vad_lstm

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


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


@needs_cc
def test_vad_dynamic_build_equals_the_static_one():
    """The build with no shapes against the build at (1, 300), (1, 1, 16): the same kernels
    but for run-time extents (the STFT's merged magnitude rows, the pad's bound compared
    without a division), so the same values to float32 sums' rounding."""
    model = vad_lstm(nfft=64, hop=32, hidden=16)
    shapes = {"input": (1, 300), "h": (1, 1, 16), "c": (1, 1, 16)}
    rng = np.random.default_rng(5)
    feeds = {name: rng.standard_normal(shape).astype("float32") * 0.3
             for name, shape in shapes.items()}
    static = ember.compile(model, input_shapes=shapes)
    compare("vad dynamic vs static", list(ember.compile(model)(**feeds)),
            list(static(**feeds)), SUMS)
