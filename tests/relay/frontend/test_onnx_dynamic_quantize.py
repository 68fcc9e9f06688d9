"""DynamicQuantizeLinear's range through nn.contrib_minmax (minmax.h, one pass) against
onnxruntime, and the kernel against numpy at every SIMD level. Tolerance: exact (the range is
a min and a max; scale, zero point and y are the same float32 arithmetic as onnxruntime's)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import ember
from ember import relay
from ember.relay.frontend import from_onnx

ort = pytest.importorskip("onnxruntime")


def _model(shape):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    graph = helper.make_graph(
        [node], "dql", [helper.make_tensor_value_info("x", TP.FLOAT, list(shape))],
        [helper.make_tensor_value_info(n, t, None)
         for n, t in (("y", TP.UINT8), ("s", TP.FLOAT), ("z", TP.UINT8))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("shape, shift", [((128, 256), 0.0), ((3, 37), 0.5), ((1,), -2.0),
                                          ((2, 5, 17), 3.0)])
def test_dynamic_quantize_linear_against_onnxruntime(shape, shift):
    x = (np.random.default_rng(len(shape)).standard_normal(shape) + shift).astype("float32")
    model = _model(shape)
    assert "nn.contrib_minmax" in str(from_onnx(model)[0])
    got = ember.compile(model, threads=1)(x)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def _assert_equals_onnxruntime(x):
    """y, y_scale and y_zero_point of DynamicQuantizeLinear(x) exactly as onnxruntime's."""
    model = _model(x.shape)
    got = ember.compile(model, threads=1)(x)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("scale", [1e28, 1e-40], ids=["huge", "subnormal-scale"])
def test_dynamic_quantize_linear_extreme_ranges(scale):
    """Quotients x / scale at the ends of [0, 255] whatever the range's magnitude (the int32
    rounding of the quantized values)."""
    x = (np.array([[2.0, -0.6, 0.0, 0.7], [1.3, -0.05, 0.4, 1.9]]) * scale).astype("float32")
    _assert_equals_onnxruntime(x)


def test_dynamic_quantize_linear_of_all_zeros_matches_onnxruntime():
    """No range: onnxruntime's scale 1 (the spec's (0 - 0) / 255 would divide 0 by 0)."""
    x = np.zeros((2, 5), "float32")
    _assert_equals_onnxruntime(x)


def _minmax(x, target="llvm"):
    v = relay.var("x", shape=x.shape, dtype="float32")
    mod = ember.IRModule.from_expr(relay.Function([v], relay.nn.contrib_minmax(v)))
    m = relay.build(mod, target)["default"](ember.cpu())
    m.set_input(x=x)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize("level", [pytest.param("native", id="host"),
                                   pytest.param("haswell", id="avx2"),
                                   pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable")])
def test_minmax_kernel_at_every_level(level, monkeypatch):
    """Sizes around the vector loops (four chains of 16, 8 or 4 lanes, then single vectors,
    then a scalar tail), extremes anywhere in them, NaN in a later chain and in the tail."""
    if level not in ("c", "native"):
        monkeypatch.setenv("EMBER_MARCH", level)
    target = "c" if level == "c" else "llvm"
    rng = np.random.default_rng(3)
    for n in (1, 15, 16, 17, 100, 147):
        x = rng.standard_normal(n).astype("float32")
        x[rng.integers(0, n)] = 9.0
        x[rng.integers(0, n)] = -7.5
        np.testing.assert_array_equal(_minmax(x, target), [x.min(), x.max()])
    for n, at in ((40, 33), (147, 100), (147, 145)):
        x = rng.standard_normal(n).astype("float32")
        x[at] = np.nan
        assert np.isnan(_minmax(x, target)).all()


def test_minmax_of_an_empty_run_time_tensor_is_an_error_and_the_model_runs_on():
    """A symbolic size that is 0 at run time: a clear error (the kernel read x[0] before), and
    the next call with data runs."""
    v = relay.var("x", shape=(relay.Any(),), dtype="float32")
    mod = ember.IRModule.from_expr(relay.Function([v], relay.nn.contrib_minmax(v)))
    model = ember.compile(mod, executor="vm")
    with pytest.raises(ember.TVMError, match="input is empty"):
        model(np.zeros(0, "float32"))
    np.testing.assert_array_equal(np.asarray(model(np.array([2.0, -1.0], "float32"))),
                                  [-1.0, 2.0])
