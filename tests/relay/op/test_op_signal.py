"""signal.frames_fft: the type relation and its errors, the attrs' checks, and the FFT kernel
(kernels/fft.h) through the VM with run-time batch and length, against the op's numpy
reference (np.fft in float64; atol 2e-6 of the peak magnitude), over hypothesis-drawn
lengths (products of 2, 3 and 5), frame geometry and channels, and at forced SIMD levels."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.contrib import cc
from ember.ir.op import Op
from ember.relay.op.signal import FramesFFTAttrs, frames_fft, has_fft_plan
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError
from ember.topi.signal import fft_radices, fft_table

REF = Op.get("signal.frames_fft").op_def.reference
TOL = 2e-6


def _need_cc():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")


def _close(got, want, what=""):
    assert got.shape == want.shape, (got.shape, want.shape, what)
    peak = max(float(np.abs(want).max(initial=0.0)), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL * peak, err_msg=what)


def _infer(expr):
    mod = relay.transform.InferType()(ember.IRModule.from_expr(
        relay.Function(relay.analysis.free_vars(expr), expr)))
    return mod["main"].body.checked_type


def test_radices_and_plans():
    assert fft_radices(512) == [4, 4, 4, 4, 2]
    assert fft_radices(400) == [4, 4, 5, 5]
    assert fft_radices(90) == [2, 3, 3, 5]
    assert fft_radices(1) == []
    assert fft_radices(14) is None and not has_fft_plan(7) and has_fft_plan(60)


def test_type_relation_static_and_run_time_lengths():
    x = relay.var("x", shape=(2, 1000), dtype="float32")
    y = frames_fft(x, np.ones(400, "float32"), length=512, frame_length=512, step=160,
                   start=56, positions=400, onesided=True)
    assert tuple(_infer(y).shape) == (2, 4, 257, 2)  # 1 + (1000 - 512) // 160
    short = relay.var("s", shape=(2, 100, 2), dtype="float32")
    assert tuple(_infer(frames_fft(short, None, length=128, frame_length=128,
                                   step=1)).shape) == (2, 0, 128, 2)
    dyn = relay.var("d", shape=(relay.Any(), relay.Any()), dtype="float32")
    shape = _infer(frames_fft(dyn, None, length=64, frame_length=64, step=8)).shape
    assert all(isinstance(d, relay.Any) for d in shape[:2]) and tuple(shape[2:]) == (64, 2)


@pytest.mark.parametrize("shape, dtype, kwargs, match", [
    ((2, 3, 4), "float32", {}, r"signal must be float32 \(batch, samples\)"),
    ((2, 300), "float64", {}, "signal must be float32"),
    ((2, 300, 2), "float32", {"onesided": True}, "onesided needs a real signal")])
def test_type_errors_name_the_problem(shape, dtype, kwargs, match):
    x = relay.var("x", shape=shape, dtype=dtype)
    with pytest.raises(TypeInferenceError, match=match):
        _infer(frames_fft(x, None, length=64, frame_length=64, step=4, **kwargs))


def test_a_table_of_another_length_is_refused():
    x = relay.var("x", shape=(1, 300), dtype="float32")
    good = frames_fft(x, None, length=64, frame_length=64, step=4)
    bad = relay.Call(good.op, [x, relay.const(fft_table(32, np.ones(64)))], good.attrs)
    with pytest.raises(TypeInferenceError, match=r"table must be float32 \(\d+,\)"):
        _infer(bad)


@pytest.mark.parametrize("attrs, match", [
    ({"length": 7 * 16}, "prime factors are 2, 3 and 5"),
    ({"positions": 65}, "start \\+ positions within"),
    ({"start": 10, "positions": 60}, "start \\+ positions within"),
    ({"step": 0}, "step"),
    ({"length": 0}, "length")])
def test_attrs_are_checked(attrs, match):
    full = {"length": 64, "frame_length": 64, "step": 4, "start": 0, "positions": 64}
    full.update(attrs)
    with pytest.raises(OpAttributeInvalid, match=match):
        FramesFFTAttrs(**full)


def _vm(length, frame_length, step, start, positions, onesided, channels, window):
    shape = (relay.Any(), relay.Any()) if channels == 0 else (relay.Any(), relay.Any(), channels)
    x = relay.var("x", shape=shape, dtype="float32")
    y = frames_fft(x, window, length=length, frame_length=frame_length, step=step,
                   start=start, positions=positions, onesided=onesided)
    exe = relay.vm.compile(ember.IRModule.from_expr(relay.Function([x], y)), "llvm")
    return y, ember.runtime.vm.VirtualMachine(exe, ember.cpu())


@st.composite
def _geometry(draw):
    length = draw(st.sampled_from([1, 2, 3, 5, 6, 32, 45, 48, 60, 64, 100, 120, 128, 150, 400,
                                   512]))
    frame_length = draw(st.integers(1, 2 * length))
    positions = draw(st.integers(0, min(length, frame_length)))
    start = draw(st.integers(0, min(length, frame_length) - positions))
    channels = draw(st.sampled_from([0, 1, 2]))
    onesided = channels != 2 and draw(st.booleans())
    return length, frame_length, draw(st.integers(1, 70)), start, positions, onesided, channels


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_geometry())
def test_kernel_matches_numpy_at_run_time_sizes(geometry):
    """Frame counts that are not multiples of the vector width (nor of two of them: a real
    signal's block is two), a single frame, none, and batches of 1 and 3."""
    _need_cc()
    length, frame_length, step, start, positions, onesided, channels = geometry
    window = np.random.default_rng(length).uniform(0.1, 1.0, positions).astype("float32")
    y, vm = _vm(length, frame_length, step, start, positions, onesided, channels, window)
    table = y.args[1].data.numpy()
    rng = np.random.default_rng(positions)
    for batch, frames in ((1, 1), (3, 17), (1, 33), (2, 0)):
        samples = frame_length + (frames - 1) * step if frames else frame_length - 1
        shape = (batch, samples) if channels == 0 else (batch, samples, channels)
        x = rng.uniform(-3, 3, shape).astype("float32")
        got = vm.invoke("main", x).numpy()
        _close(got, REF(x, table, attrs=y.attrs), f"{geometry} {shape}")


@pytest.mark.parametrize("level", [pytest.param("haswell", id="avx2"),
                                   pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable", marks=pytest.mark.slow)])
def test_forced_simd_levels(level, monkeypatch):
    _need_cc()
    target = "c" if level == "c" else "llvm"
    if level != "c":
        monkeypatch.setenv("EMBER_MARCH", level)
    x = relay.var("x", shape=(2, 4000), dtype="float32")
    window = np.hanning(400).astype("float32")
    y = frames_fft(x, window, length=400, frame_length=400, step=160, onesided=True)
    m = relay.build(ember.IRModule.from_expr(relay.Function([x], y)), target)["default"](
        ember.cpu())
    xv = np.random.default_rng(3).uniform(-1, 1, (2, 4000)).astype("float32")
    m.set_input(x=xv)
    m.run()
    _close(m.get_output(0).numpy(), REF(xv, y.args[1].data.numpy(), attrs=y.attrs), level)
