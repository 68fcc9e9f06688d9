"""STFT and DFT nodes whose length has prime factors 2, 3 and 5 run as an FFT
(``signal.frames_fft``): against numpy in float64 and onnxruntime, at the lengths audio models
use (400, 512), odd ones (60, 100), zero padding and truncation, complex signals and run-time
batch and length. Tolerances: relative to the largest output (an FFT's error grows with
log N; float32 sums of 512 terms of size 3 stay below 1e-5 of the peak)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import graph_model, rand, run_graph, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.api.model import ModelInputError

RNG = np.random.default_rng(20261129)
TOL = 2e-6  # of the peak magnitude, against numpy in float64
ORT_TOL = 1e-4  # against onnxruntime, whose float32 transforms of 400 points err by 4e-5


def _close(got, want, what="", tol=TOL):
    assert got.shape == want.shape, (got.shape, want.shape, what)
    peak = max(float(np.abs(want).max()), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * peak, err_msg=what)


def _ops(model):
    mod, _ = relay.frontend.from_onnx(model)
    return {e.op.name for e in ember.ir.post_order(mod["main"].body)
            if isinstance(e, ember.ir.expr.Call) and hasattr(e.op, "name")}


def _as_onnx(z):
    return np.stack([z.real, z.imag], -1).astype("float32")


def _as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0]


def _stft_model(shape, step, window=None, length=None, onesided=1):
    inputs = ["s", "step", "w" if window is not None else "", "n" if length else ""]
    while inputs[-1] == "":
        inputs.pop()
    inits = [numpy_helper.from_array(np.array(step, "int64"), "step")]
    if window is not None:
        inits.append(numpy_helper.from_array(window, "w"))
    if length:
        inits.append(numpy_helper.from_array(np.array(length, "int64"), "n"))
    node = helper.make_node("STFT", inputs, ["y"], onesided=onesided)
    return graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT, shape)],
                       inits=inits, opset=17)


def _stft_numpy(signal, step, window, length, onesided):
    z = _as_complex(signal if signal.ndim == 3 else signal[..., None]).astype("complex128")
    count = max(0, 1 + (z.shape[1] - length) // step)
    frames = np.stack([z[:, i * step:i * step + length] * window for i in range(count)], 1) \
        if count else np.zeros((z.shape[0], 0, length))
    y = np.fft.fft(frames, axis=-1)
    return _as_onnx(y[..., :length // 2 + 1] if onesided else y)


@pytest.mark.parametrize("samples, step, length, window_kind, onesided, complex_", [
    (16000, 160, 512, "torch400", 1, False),  # torch.stft(n_fft=512, win_length=400)
    (4000, 160, 400, "hann", 1, False),        # Whisper's n_fft 400 = 2^4 5^2
    (1000, 7, 60, "hann", 1, False),
    (900, 33, 100, None, 0, False),
    (700, 50, 96, "hann", 0, True),
    (3000, 128, 256, "hamming", 1, False)])
def test_stft_takes_the_fft_and_matches_numpy_and_onnxruntime(samples, step, length,
                                                              window_kind, onesided, complex_):
    window = None
    if window_kind == "torch400":  # a 400-tap window centred in 512, zeros around it
        window = np.zeros(length, "float32")
        window[56:456] = np.hanning(400)
    elif window_kind == "hann":
        window = np.hanning(length).astype("float32")
    elif window_kind == "hamming":
        window = np.hamming(length).astype("float32")
    shape = [2, samples, 2] if complex_ else [2, samples, 1]
    model = _stft_model(shape, step, window, None if window is not None else length, onesided)
    assert "signal.frames_fft" in _ops(model) and "nn.dense" not in _ops(model)
    signal = rand(RNG, *shape)
    got = run_graph(model, {"s": signal})[0]
    want = _stft_numpy(signal, step, window if window is not None else np.ones(length), length,
                       onesided)
    _close(got, want, "numpy")
    _close(got, run_ort(model, {"s": signal})[0], "onnxruntime", ORT_TOL)


def test_stft_of_run_time_batch_and_length_through_compile():
    """torch-style (batch, samples) signal with both axes dynamic: the frame count follows each
    call's length (a shape function), none for a signal shorter than a frame."""
    window = np.hanning(400).astype("float32")
    model = _stft_model(["batch", "samples"], 160, window)
    assert "signal.frames_fft" in _ops(model)
    run = ember.compile(model)
    for batch, samples in ((1, 16000), (3, 4321), (2, 400), (1, 559), (2, 560)):
        signal = rand(RNG, batch, samples)
        got = run(signal)
        _close(got, _stft_numpy(signal, 160, window, 400, 1), f"{batch}x{samples}")
        _close(got, run_ort(model, {"s": signal})[0], f"ort {batch}x{samples}", ORT_TOL)
    assert run(rand(RNG, 2, 399)).shape == (2, 0, 201, 2)


def test_stft_with_a_window_known_only_at_run_time_keeps_the_matrix():
    node = helper.make_node("STFT", ["s", "step", "w"], ["y"])
    model = graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT,
                                                                      [1, 300, 1]),
                                        helper.make_tensor_value_info("w", TP.FLOAT, [64])],
                        inits=[numpy_helper.from_array(np.array(20, "int64"), "step")], opset=17)
    assert "signal.frames_fft" not in _ops(model)
    signal, window = rand(RNG, 1, 300, 1), np.hanning(64).astype("float32")
    got = run_graph(model, {"s": signal, "w": window})[0]
    _close(got, _stft_numpy(signal, 20, window, 64, 1))


def _dft_model(x_shape, dft_length=None, **attrs):
    inputs = ["x"] + (["n"] if dft_length is not None else [])
    inits = [numpy_helper.from_array(np.array(dft_length, "int64"), "n")] if dft_length else []
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    return graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, x_shape)],
                       inits=inits, opset=17)


@pytest.mark.parametrize("shape, axis, length, onesided", [
    ((3, 64, 1), 1, None, 0),      # rank 3: the signals are the batch
    ((3, 64, 1), 1, None, 1),      # torch.fft.rfft
    ((2, 100, 2), 1, None, 0),     # complex
    ((2, 5, 60, 1), 2, None, 1),   # rank 4, transformed axis last but one
    ((2, 48, 3, 2), 1, None, 0),   # a middle axis, complex
    ((2, 50, 1), 1, 64, 1),        # zero-padded to 64
    ((2, 70, 2), 1, 64, 0)])       # truncated to 64
def test_dft_takes_the_fft_and_matches_numpy(shape, axis, length, onesided):
    model = _dft_model(list(shape), length, axis=axis, onesided=onesided)
    assert "signal.frames_fft" in _ops(model)
    x = rand(RNG, *shape)
    z = _as_complex(x).astype("complex128")
    n = length or shape[axis]
    want = (np.fft.rfft(z.real, n=n, axis=axis) if onesided else np.fft.fft(z, n=n, axis=axis))
    got = run_graph(model, {"x": x})[0]
    _close(got, _as_onnx(want))


def test_dft_of_a_run_time_batch_takes_the_fft():
    model = _dft_model(["batch", 128, 1], axis=1, onesided=1)
    assert "signal.frames_fft" in _ops(model)
    run = ember.compile(model)
    for batch in (1, 5):
        x = rand(RNG, batch, 128, 1)
        _close(run(x), _as_onnx(np.fft.rfft(x[..., 0].astype("float64"), axis=1)))
        _close(run(x), run_ort(model, {"x": x})[0], "onnxruntime", ORT_TOL)


def test_inverse_dft_and_lengths_with_other_factors_keep_the_matrix():
    assert "signal.frames_fft" not in _ops(_dft_model([2, 64, 2], axis=1, inverse=1))
    assert "signal.frames_fft" not in _ops(_dft_model([2, 49, 1], axis=1))  # 7^2
    assert "signal.frames_fft" not in _ops(_dft_model([2, 16, 1], axis=1))  # too short to pay


def test_stft_with_a_run_time_step_matches_numpy_and_rejects_a_step_below_one():
    """A step known only at run time keeps the frame table; each call's step sets the frame
    count (none for a signal shorter than a frame), and a step of 0 or below is an error,
    not one frame or none."""
    node = helper.make_node("STFT", ["s", "step", "", "n"], ["y"])
    model = graph_model([node], inputs=[
        helper.make_tensor_value_info("s", TP.FLOAT, [1, "samples"]),
        helper.make_tensor_value_info("step", TP.INT64, [])],
        inits=[numpy_helper.from_array(np.array(64, "int64"), "n")], opset=17)
    run = ember.compile(model)
    for samples, step in ((1000, 160), (1000, 1), (64, 7), (700, 33)):
        signal = rand(RNG, 1, samples)
        got = run(signal, np.array(step, "int64"))
        _close(got, _stft_numpy(signal, step, np.ones(64), 64, 1), f"{samples} step {step}")
    assert run(rand(RNG, 1, 63), np.array(5, "int64")).shape == (1, 0, 33, 2)
    for step in (0, -1, -160):
        with pytest.raises(ModelInputError, match="step must not be 0"):
            run(rand(RNG, 1, 1000), np.array(step, "int64"))
    assert run(rand(RNG, 1, 1000), np.array(100, "int64")).shape == (1, 10, 33, 2)
