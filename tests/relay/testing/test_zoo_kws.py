"""The keyword spotter over an STFT front end (``ember.relay.testing.kws``, issue 21):

- its front end (framing, window, DFT, magnitude, mel filters, log) against numpy's rfft on
  the frames (rtol 1e-5, atol 1e-5 on the log-mel values, which lie between 0.1 and 5 here:
  float32 sums of 512 products against float64 FFTs differ by about 1e-6);
- its ONNX twin, written as torch.onnx writes ``torch.stft`` (a (batch, samples) signal into
  an ``STFT`` node), run by onnxruntime against ember's reference interpreter on the Relay
  model, every weight drawn at random; and the twin imported by ``relay.frontend.from_onnx``
  and compiled against onnxruntime and against the compiled Relay model. Tolerance: rtol 1e-4
  and atol 1e-5 times the output's scale (at least 1), as the other zoo twins;
- its dynamic twin with a ``?`` batch (benchmarks/bench_dynamic.py), and why there is none
  with a ``?`` audio length.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember
from ember import relay
from ember.ir.types import Any as AnyDim
from ember.relay.testing import dscnn, kws, onnx_twin
from ember.relay.transform import InferType
from ember.testing import find_c_compiler

from _zoo_checks import assert_close as _assert_close  # noqa: E402
from _zoo_checks import onnxruntime_output as _onnxruntime  # noqa: E402

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
# a quarter second: 22 frames of 512 samples every 160
TINY: dict[str, Any] = {"samples": 4000, "num_mels": 16, "filters": 8, "num_blocks": 2,
                        "num_classes": 5}


def _waveform(batch: int, samples: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (batch, samples)).astype("float32")


def _numpy_log_mel(x: np.ndarray, n_fft: int = 512, win_length: int = 480, hop: int = 160,
                   num_mels: int = 40, rate: int = 16000) -> np.ndarray:
    frames = 1 + (x.shape[1] - n_fft) // hop
    left = (n_fft - win_length) // 2
    window = np.zeros(n_fft)
    window[left:left + win_length] = np.hanning(win_length + 1)[:-1]  # periodic Hann
    cut = np.stack([x[:, i * hop:i * hop + n_fft] for i in range(frames)], 1)
    magnitude = np.abs(np.fft.rfft(cut.astype("float64") * window, axis=-1))
    mel = magnitude @ kws.mel_filters(n_fft, num_mels, rate).astype("float64")
    return np.log(mel + kws.LOG_OFFSET)


@pytest.mark.parametrize("batch, samples, config", [
    (1, 16000, {}),  # the full-size front end: 97 frames of 40 mels
    (2, 3000, {"n_fft": 256, "win_length": 200, "hop_length": 80, "num_mels": 20}),
    (1, 1000, {"n_fft": 64, "win_length": 63, "hop_length": 64, "num_mels": 8,
               "sample_rate": 8000}),  # an odd window in an even frame: its extra zero after
])
def test_front_end_matches_numpy_rfft(batch: int, samples: int, config: dict) -> None:
    data = relay.var("data", shape=(batch, samples), dtype="float32")
    func = relay.Function([data], kws.log_mel(data, samples, **config))
    x = _waveform(batch, samples)
    got = relay.create_executor("debug", mod=ember.IRModule.from_expr(func)).evaluate()(x)
    want = _numpy_log_mel(x, *(config.get(k, d) for k, d in (
        ("n_fft", 512), ("win_length", 480), ("hop_length", 160), ("num_mels", 40),
        ("sample_rate", 16000))))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_window_and_mel_filters() -> None:
    window = kws.hann_window(480, 512)
    assert window.shape == (512,) and not window[:16].any() and not window[496:].any()
    np.testing.assert_allclose(window[16:496], np.hanning(481)[:-1], atol=1e-7)
    filters = kws.mel_filters(512, 40, 16000)
    assert filters.shape == (257, 40) and filters.min() >= 0 and filters.max() <= 1
    hz = np.linspace(0, 8000, 257)
    used = filters.any(axis=1)
    assert filters.any(axis=0).all()  # every filter reads some bin, the narrowest included
    assert hz[used].min() > 20 and hz[used].max() < 4000
    assert (np.diff(filters.argmax(axis=0)) >= 0).all()  # centres rise with the filter index


def _random_weights(params: dict[str, Any], seed: int = 1) -> dict[str, np.ndarray]:
    """Every weight at random (create_workload's zero biases and unit scales would hide a
    bias or scale that the twin puts in the wrong place)."""
    rng = np.random.default_rng(seed)
    return {k: (v.numpy() if "weight" in k else rng.uniform(0.5, 1.5, v.shape) if "gamma" in k
                else rng.uniform(-0.5, 0.5, v.shape)).astype("float32")
            for k, v in params.items()}




def test_twin_matches_the_interpreter() -> None:
    mod, params = kws.get_workload(batch_size=2, **TINY)
    weights = _random_weights(params)
    model = kws.export_onnx(mod, weights)
    onnx.checker.check_model(model, full_check=True)
    x = _waveform(2, TINY["samples"])
    want = relay.create_executor("debug", mod=mod).evaluate()(x, **weights).numpy()
    assert want.shape == (2, TINY["num_classes"])
    _assert_close(_onnxruntime(model, x), want)


def test_twin_is_written_as_torch_onnx_writes_stft() -> None:
    model, mod, params = onnx_twin("kws", **TINY)
    nodes = list(model.graph.node)
    assert [n.op_type for n in nodes[:10]] == [
        "STFT", "Transpose", "Pow", "ReduceSum", "Sqrt", "Transpose", "MatMul", "Add", "Log",
        "Unsqueeze"]
    assert Counter(n.op_type for n in nodes[10:]) == Counter(
        n.op_type for n in dscnn_twin_nodes(TINY))
    stft = nodes[0]
    assert stft.input[0] == "data" and [i.name for i in model.graph.input] == ["data"]
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, TINY["samples"]]  # no trailing axis of 1: torch.onnx writes none
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    assert [inits[n].tolist() for n in (stft.input[1], stft.input[3])] == [160, 512]
    np.testing.assert_array_equal(inits[stft.input[2]], kws.hann_window(480, 512))
    assert inits["mel_filters"].shape == (257, TINY["num_mels"])
    assert set(params) <= set(inits)


def dscnn_twin_nodes(config: dict[str, Any]) -> list[Any]:
    """The nodes of the DS-CNN twin of the same CNN (over MFCCs instead of the front end)."""
    frames = 1 + (config["samples"] - 512) // 160
    model, _, _ = onnx_twin("dscnn", input_shape=(frames, config["num_mels"]),
                            filters=config["filters"], num_blocks=config["num_blocks"],
                            num_classes=config["num_classes"])
    return list(model.graph.node)


def _graph_build(mod: ember.IRModule, params: dict[str, Any], x: np.ndarray) -> np.ndarray:
    from ember.contrib import graph_executor

    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input("data", x)
    m.run()
    return m.get_output(0).numpy()


def _compiled_twins_agree(kwargs: dict[str, Any]) -> None:
    model, mod, params = onnx_twin("kws", **kwargs)
    onnx.checker.check_model(model, full_check=True)
    imported, imported_params = relay.frontend.from_onnx(model)
    x = _waveform(1, kwargs.get("samples", 16000), seed=2)
    ours = _graph_build(imported, imported_params, x)
    _assert_close(ours, _onnxruntime(model, x))
    _assert_close(ours, _graph_build(mod, params, x))


@needs_cc
def test_imported_twin_compiles_and_matches_onnxruntime_and_the_relay_model() -> None:
    _compiled_twins_agree(TINY)


@needs_cc
@pytest.mark.slow
def test_full_size_twin_compiles_and_matches_onnxruntime() -> None:
    _compiled_twins_agree({})


def test_full_size_shapes() -> None:
    mod, params = kws.get_workload()
    main = mod["main"]
    assert [int(d) for d in main.params[0].checked_type.shape] == [1, 16000]
    assert [int(d) for d in main.body.checked_type.shape] == [1, 12]
    # the CNN sees 97 frames of 40 mels: its first conv is DS-CNN's 10x4/2, 64 filters
    assert params["conv1_weight"].shape == (64, 1, 10, 4)
    assert params["fc_weight"].shape == (12, 64)


def _bench_dynamic() -> Any:
    bench = Path(__file__).resolve().parents[3] / "benchmarks"
    sys.path.insert(0, str(bench))
    import bench_dynamic

    return bench_dynamic


def test_dynamic_batch_twin_types_at_every_shape_and_length_is_refused() -> None:
    bench = _bench_dynamic()
    twin = bench.TWINS["kws"]
    mod = bench.twin_module("kws", bench.probe_module(twin.model, {}, False))
    assert isinstance(mod["main"].params[0].type_annotation.shape[0], AnyDim)
    for shape in twin.shapes:
        ty = InferType()(bench.with_input_shape(mod, shape))["main"].checked_type.ret_type
        assert tuple(int(d) for d in ty.shape) == (shape[0], 12)
    # a ? length: the frame index table is a constant with a row per frame
    longer = bench.probe_module("kws", {"samples": 5000}, False)
    with pytest.raises(ValueError, match=r"a constant of shape \(22, 512\) is \(29, 512\)"):
        bench.dynamic_twin(bench.probe_module("kws", {}, False), longer, (1,))


def test_export_refuses_a_foreign_module_or_missing_weights() -> None:
    mod, params = kws.get_workload(**TINY)
    partial = {k: v for k, v in params.items() if k != "fc_bias"}
    with pytest.raises(ValueError, match=r"params lack \['fc_bias'\]"):
        kws.export_onnx(mod, partial)
    other, other_params = dscnn.get_workload(filters=8, num_blocks=1)
    with pytest.raises(ValueError, match="no front end of kws.get_workload"):
        kws.export_onnx(other, other_params)
    with pytest.raises(ValueError, match="needs opset 17"):
        kws.export_onnx(mod, params, opset=16)


@pytest.mark.parametrize("kwargs, match", [
    ({"samples": 500}, "500 samples give 0 frames of 512 every 160"),
    ({"samples": 900}, "900 samples give 3 frames"),
    ({"num_mels": 3}, "and 3 mels; the CNN needs at least 4"),
    ({"win_length": 600}, "win_length=600, n_fft=512"),
    ({"hop_length": 0}, "hop_length=0"),
    ({"filters": 0}, "must be positive"),
])
def test_bad_configurations_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        kws.get_workload(**kwargs)
