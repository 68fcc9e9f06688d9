"""onnxruntime's com.microsoft quantized operators (what quantize_static's QOperator format
writes around QLinearConv) against onnxruntime.

Tolerance: ember dequantizes, runs the float op and requantizes (round half to even);
onnxruntime uses integer arithmetic or lookup tables for some of them, which may round a value
at a .5 boundary the other way: at most 1 unit apart, and at least 90% of the values equal.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember.relay.frontend import from_onnx

ort = pytest.importorskip("onnxruntime")
MS = "com.microsoft"


def _model(nodes, inputs, inits, out_type=TP.UINT8):
    graph = helper.make_graph(
        nodes, "q", [helper.make_tensor_value_info(k, TP.UINT8 if v.dtype == np.uint8 else
                                                   TP.INT8, list(v.shape))
                     for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", out_type, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model


def _run(nodes, inputs, inits, out_type=TP.UINT8):
    model = _model(nodes, inputs, inits, out_type)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    got = np.asarray(ember.compile(model, threads=1)(*inputs.values()))
    assert got.shape == want.shape and got.dtype == want.dtype
    return got, want


def _close(got, want, unit=1):
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert diff.max(initial=0) <= unit, diff.max()
    assert (diff > 0).mean() < 0.1


SCALES = {"sa": np.array(0.05, "float32"), "za": np.array(120, "uint8"),
          "sb": np.array(0.03, "float32"), "zb": np.array(7, "uint8"),
          "sy": np.array(0.08, "float32"), "zy": np.array(100, "uint8")}


def _u8(rng, *shape):
    return rng.integers(0, 256, shape).astype("uint8")


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary(op):
    rng = np.random.default_rng(1)
    a, b = _u8(rng, 2, 5, 7), _u8(rng, 5, 1)
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"], domain=MS)
    _close(*_run([node], {"a": a, "b": b}, SCALES))


@pytest.mark.parametrize("op, attrs", [
    ("QLinearGlobalAveragePool", {}), ("QLinearSigmoid", {}),
    ("QLinearLeakyRelu", {"alpha": 0.1}), ("QLinearSoftmax", {"axis": -1, "opset": 13}),
    ("QLinearAveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})])
def test_qlinear_unary(op, attrs):
    rng = np.random.default_rng(2)
    x = _u8(rng, 1, 6, 9, 8)
    node = helper.make_node(op, ["a", "sa", "za", "sy", "zy"], ["y"], domain=MS, **attrs)
    if op == "QLinearSoftmax":
        inits = {**SCALES, "sy": np.array(1 / 256, "float32"), "zy": np.array(0, "uint8")}
    else:
        inits = SCALES
    _close(*_run([node], {"a": x}, inits))


def test_qlinear_concat():
    rng = np.random.default_rng(3)
    a, b = _u8(rng, 1, 3, 4), _u8(rng, 1, 5, 4)
    node = helper.make_node("QLinearConcat", ["sy", "zy", "a", "sa", "za", "b", "sb", "zb"],
                            ["y"], domain=MS, axis=1)
    _close(*_run([node], {"a": a, "b": b}, SCALES))


@pytest.mark.parametrize("quantized_out", [True, False])
@pytest.mark.parametrize("trans_a, trans_b, per_channel", [(0, 1, False), (0, 0, True),
                                                             (1, 1, True)])
def test_qgemm(quantized_out, trans_a, trans_b, per_channel):
    """A constant B takes the int8 GEMM (nn.contrib_qdense), in either layout; a transposed
    A the int32 decomposition. Per-column zero points and scales of B (per_channel)."""
    rng = np.random.default_rng(4)
    a = _u8(rng, 20, 3) if trans_a else _u8(rng, 3, 20)
    b = rng.integers(-100, 100, (7, 20) if trans_b else (20, 7)).astype("int8")
    inits = {"sa": np.array(0.05, "float32"), "za": np.array(120, "uint8"), "b": b,
             "sb": (rng.uniform(0.005, 0.02, 7) if per_channel else np.array(0.01)).astype(
                 "float32"),
             "zb": (rng.integers(-20, 20, 7) if per_channel else np.array(0)).astype("int8"),
             "c": rng.integers(-500, 500, 7).astype("int32"),
             "sy": np.array(0.2, "float32"), "zy": np.array(128, "uint8")}
    names = ["a", "sa", "za", "b", "sb", "zb", "c"] + (["sy", "zy"] if quantized_out else [])
    node = helper.make_node("QGemm", names, ["y"], domain=MS, transA=trans_a, transB=trans_b,
                            alpha=1.0)
    got, want = _run([node], {"a": a}, inits, TP.UINT8 if quantized_out else TP.FLOAT)
    if quantized_out:
        _close(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("a", TP.UINT8, a.shape)],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(MS, 1)])
    assert ("nn.contrib_qdense" in from_onnx(model)[0].astext()) == (not trans_a)


@pytest.mark.parametrize("dtype, shape", [("int8", (2, 19, 7, 7)), ("uint8", (1, 3, 1, 1)),
                                          ("uint8", (1, 33, 5, 11))])
def test_qlinear_global_average_pool_sums_ints(dtype, shape):
    """The global mean as onnxruntime takes it: an int32 sum of the values less their zero
    point (one integer reduction, not a float one over dequantized values), s8 and u8, a 1x1
    map, batch 2."""
    rng = np.random.default_rng(4)
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    x = rng.integers(lo, hi, shape).astype(dtype)
    inits = {"sa": np.array(0.05, "float32"), "za": np.array(-9 if dtype == "int8" else 120,
                                                                dtype),
             "sy": np.array(0.04, "float32"), "zy": np.array(3, dtype)}
    node = helper.make_node("QLinearGlobalAveragePool", ["a", "sa", "za", "sy", "zy"], ["y"],
                            domain=MS)
    out_type = TP.INT8 if dtype == "int8" else TP.UINT8
    _close(*_run([node], {"a": x}, inits, out_type))
    text = str(from_onnx(_model([node], {"a": x}, inits, out_type))[0])
    assert "sum(" in text and "mean(" not in text
