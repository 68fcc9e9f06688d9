"""QLinearAdd through nn.contrib_qadd (the int8 kernel of qadd.h) against onnxruntime and numpy.

Tolerance: the kernel equals its numpy reference (topi.nn.qadd.reference) exactly, at every
SIMD level; onnxruntime forms the same float32 terms in another order (a fixed part first,
fused multiply-adds on some platforms), so a value whose sum lies within a rounding of a .5
boundary may round the other way: at most 1 unit apart, and at least 99% of the values equal.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.relay.frontend import from_onnx
from ember.topi.nn import qadd as kernel

ort = pytest.importorskip("onnxruntime")
MS = "com.microsoft"
ONNX_TYPE = {"uint8": TP.UINT8, "int8": TP.INT8}


def _model(shape, a_dtype, b_dtype, y_dtype, scales, zps):
    inits = {"sa": np.array(scales[0], "float32"), "za": np.array(zps[0], a_dtype),
             "sb": np.array(scales[1], "float32"), "zb": np.array(zps[1], b_dtype),
             "sy": np.array(scales[2], "float32"), "zy": np.array(zps[2], y_dtype)}
    node = helper.make_node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"],
                            domain=MS)
    graph = helper.make_graph(
        [node], "qadd", [helper.make_tensor_value_info("a", ONNX_TYPE[a_dtype], list(shape)),
                         helper.make_tensor_value_info("b", ONNX_TYPE[b_dtype], list(shape))],
        [helper.make_tensor_value_info("y", ONNX_TYPE[y_dtype], None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model


def _feeds(rng, shape, a_dtype, b_dtype):
    def draw(dtype):
        lo, hi = kernel.RANGES[dtype]
        return rng.integers(lo, hi + 1, shape).astype(dtype)
    return {"a": draw(a_dtype), "b": draw(b_dtype)}


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _check(model, feeds, target="llvm"):
    mod, params = from_onnx(model)
    assert "nn.contrib_qadd" in str(mod), "QLinearAdd did not take the int8 kernel"
    lib = relay.build(mod, target, params=params)
    m = lib["default"](ember.cpu())
    m.set_input(**feeds)
    m.run()
    got = m.get_output(0).numpy()
    call = mod["main"].body
    want_ref = call.op.op_def.reference(feeds["a"], feeds["b"], attrs=call.attrs)
    np.testing.assert_array_equal(got, want_ref)
    want = _ort(model, feeds)
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max(initial=0) <= 1, f"{int((diff > 0).sum())} values differ by {diff.max()}"
    assert (diff > 0).mean() <= 0.01


# onnxruntime's QLinearAdd takes one type for a, b and y (the kernel reads each operand in its
# own: the lowering case mixes them)
CASES = [  # shape, a, b, y dtypes, scales (a, b, y), zero points (a, b, y)
    ((1, 24, 56, 56), "uint8", "uint8", "uint8", (0.05, 0.03, 0.08), (120, 7, 100)),
    ((2, 3, 5, 7), "int8", "int8", "int8", (0.02, 0.11, 0.07), (-3, 5, 9)),
    ((37,), "uint8", "uint8", "uint8", (0.5, 0.25, 0.3), (0, 128, 255)),
    ((1, 1), "int8", "int8", "int8", (1e-3, 2.0, 0.5), (127, 0, -128)),
    ((3, 4097), "uint8", "uint8", "uint8", (0.01, 0.01, 0.02), (128, 128, 128)),
]


@pytest.mark.parametrize("case", CASES, ids=[str(c[0]) for c in CASES])
def test_qlinear_add_kernel_against_onnxruntime(case):
    shape, at, bt, yt, scales, zps = case
    _check(_model(shape, at, bt, yt, scales, zps),
           _feeds(np.random.default_rng(len(shape)), shape, at, bt))


@pytest.mark.parametrize("level", [pytest.param("haswell", id="avx2"),
                                   pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable")])
def test_qlinear_add_forced_simd_levels(level, monkeypatch):
    if level != "c":
        monkeypatch.setenv("EMBER_MARCH", level)
    shape = (2, 5, 9, 11)  # 990 values: vectors and a tail
    _check(_model(shape, "int8", "int8", "int8", (0.04, 0.06, 0.09), (17, -20, 31)),
           _feeds(np.random.default_rng(9), shape, "int8", "int8"),
           "c" if level == "c" else "llvm")


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       types=st.sampled_from([("uint8", "uint8", "uint8"), ("int8", "int8", "int8")]),
       scales=st.tuples(*[st.floats(0.0009765625, 1.0, width=32)] * 3), seed=st.integers(0, 2**16))
def test_qlinear_add_hypothesis(shape, types, scales, seed):
    rng = np.random.default_rng(seed)
    zps = tuple(int(rng.integers(*kernel.RANGES[t])) for t in types)
    _check(_model(shape, *types, scales, zps), _feeds(rng, shape, *types[:2]))


def test_broadcasting_add_keeps_the_decomposition():
    """Operands of different shapes: the float decomposition (no kernel)."""
    model = _model((2, 3), "uint8", "uint8", "uint8", (0.1, 0.1, 0.1), (1, 2, 3))
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 1
    mod, _ = from_onnx(model)
    assert "nn.contrib_qadd" not in str(mod)


def _qdq_add_model(shape, relu: bool, b_scale: float = 0.03):
    """QDQ: x and z quantized, dequantized, added [, relu], quantized, dequantized."""
    inits = {"sa": np.array(0.05, "float32"), "za": np.array(120, "uint8"),
             "sb": np.array(b_scale, "float32"), "zb": np.array(7, "uint8"),
             "sy": np.array(0.08, "float32"), "zy": np.array(100, "uint8")}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sa", "za"], ["xq"]),
             helper.make_node("QuantizeLinear", ["z", "sb", "zb"], ["zq"]),
             helper.make_node("DequantizeLinear", ["xq", "sa", "za"], ["xd"]),
             helper.make_node("DequantizeLinear", ["zq", "sb", "zb"], ["zd"]),
             helper.make_node("Add", ["xd", "zd"], ["sum"])]
    last = "sum"
    if relu:
        nodes.append(helper.make_node("Relu", ["sum"], ["act"]))
        last = "act"
    nodes += [helper.make_node("QuantizeLinear", [last, "sy", "zy"], ["y"])]
    graph = helper.make_graph(
        nodes, "qdq_add", [helper.make_tensor_value_info(n, TP.FLOAT, list(shape)) for n in "xz"],
        [helper.make_tensor_value_info("y", TP.UINT8, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("relu", [False, True])
def test_qdq_add_is_one_kernel(relu):
    """DequantizeLinear x 2 -> Add [-> Relu] -> QuantizeLinear: nn.contrib_qadd (onnxruntime
    fuses it into QLinearAdd); within a unit of onnxruntime."""
    shape = (1, 6, 11, 13)
    model = _qdq_add_model(shape, relu)
    mod, _ = from_onnx(model)
    assert "nn.contrib_qadd" in str(mod)
    rng = np.random.default_rng(4)
    feeds = {n: (rng.standard_normal(shape) * 3).astype("float32") for n in "xz"}
    got = np.asarray(ember.compile(model, threads=1)(*feeds.values()))
    want = _ort(model, feeds)
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    # with the relu onnxruntime does not fuse: it divides the float32 sum by y_scale where the
    # kernel multiplies by the ratios, so more sums round the other way (1.4% here)
    assert diff.max(initial=0) <= 1 and (diff > 0).mean() <= (0.03 if relu else 0.01)
    if relu:
        assert got.min() >= 100  # the output zero point: relu's floor


@pytest.mark.parametrize("a_shape, b_shape, message", [
    ((relay.Any(), 4), (relay.Any(), 4), "must have static shapes"),
    ((2, 4), (4, 2), "must have one shape"),
])
def test_qadd_refuses_operands_one_kernel_call_cannot_take(a_shape, b_shape, message):
    """Run-time sizes could differ between a and b (the kernel walks a's elements in both)."""
    a = relay.var("a", shape=a_shape, dtype="uint8")
    b = relay.var("b", shape=b_shape, dtype="uint8")
    mod = ember.IRModule.from_expr(relay.Function([a, b], relay.nn.contrib_qadd(a, b)))
    with pytest.raises(ember.TVMError, match=message):
        relay.transform.InferType()(mod)
