"""QDQ models (DequantizeLinear -> Conv [-> Relu | Clip] -> QuantizeLinear, as quantize_static
writes them) rewritten to nn.contrib_qconv2d, against onnxruntime (which fuses the same
pattern into its int8 conv). Tolerance: 1 unit of the quantized output (the requantization
scale's float rounding may differ), at least 99% of the values equal; and cases that must keep
the float path (a bias quantized with another scale, run-time weights)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember.relay.frontend import from_onnx

ort = pytest.importorskip("onnxruntime")


def _qdq_model(c, o, h, act, *, groups=1, bias_scale_factor=1.0, per_channel=True, seed=0,
               stride=1):
    rng = np.random.default_rng(seed)
    sx, zx = np.array(0.03, "float32"), np.array(120, "uint8")
    ws = (rng.uniform(0.002, 0.01, o) if per_channel else np.array(0.005)).astype("float32")
    w = rng.integers(-127, 128, (o, c // groups, 3, 3)).astype("int8")
    bias = rng.integers(-3000, 3000, o).astype("int32")
    sb = (sx * ws * np.float32(bias_scale_factor)).astype("float32")
    if not per_channel:
        sb = np.full(o, sb, "float32")
    inits = {"sx": sx, "zx": zx, "w": w, "ws": ws, "wz": np.zeros(ws.shape, "int8"),
             "b": bias, "sb": sb, "bz": np.zeros(o, "int32"),
             "sy": np.array(0.05, "float32"), "zy": np.array(110, "uint8"),
             "lo": np.array(0.0, "float32"), "hi": np.array(6.0, "float32")}
    axis = {"axis": 0} if per_channel else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], **axis),
             helper.make_node("DequantizeLinear", ["b", "sb", "bz"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["conv"], pads=[1, 1, 1, 1],
                              group=groups, strides=[stride, stride])]
    last = "conv"
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["conv"], ["act"]))
        last = "act"
    elif act == "relu6":
        nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["act"]))
        last = "act"
    nodes += [helper.make_node("QuantizeLinear", [last, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info(
        "x", TP.FLOAT, [1, c, h, h])], [helper.make_tensor_value_info("y", TP.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = rng.standard_normal((1, c, h, h)).astype("float32") * 2
    return model, x


def _compare(model, x, fused: bool, op: str = "nn.contrib_qconv2d", off_share: float = 0.01):
    """ember against onnxruntime: every output within one quantum (0.05), at most
    ``off_share`` of them more than half a quantum off; ``op`` in the import iff ``fused``."""
    mod, _ = from_onnx(model)
    assert (op in str(mod)) == fused
    got = np.asarray(ember.compile(model, threads=1)(x))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    units = np.abs(got.astype(np.float64) - want) / 0.05
    assert units.max() <= 1 + 1e-3, units.max()
    assert (units > 0.5).mean() < off_share


@pytest.mark.parametrize("act", ["none", "relu", "relu6"])
@pytest.mark.parametrize("per_channel", [True, False])
def test_qdq_conv_is_fused(act, per_channel):
    model, x = _qdq_model(16, 24, 9, act, per_channel=per_channel, seed=len(act))
    _compare(model, x, fused=True)


def test_qdq_depthwise_stride2_is_fused():
    model, x = _qdq_model(12, 12, 11, "relu6", groups=12, stride=2)
    _compare(model, x, fused=True)


def test_qdq_bias_of_another_scale_keeps_the_float_conv():
    model, x = _qdq_model(8, 8, 5, "relu", bias_scale_factor=1.5)
    _compare(model, x, fused=False)


def _qdq_gemm_model(k, n, *, op="Gemm", trans_b=True, bias=False, per_channel=True,
                    bias_scale_factor=1.0, m=3, seed=0):
    """DQ(x) -> Gemm (transB) or MatMul [+ DQ(int32 bias)] -> Q -> DQ, as quantize_static
    writes a classifier (its weight (N, K) per-channel along axis 0 with transB)."""
    rng = np.random.default_rng(seed)
    sx, zx = np.array(0.03, "float32"), np.array(120, "uint8")
    ws = (rng.uniform(0.002, 0.01, n) if per_channel else np.array(0.005)).astype("float32")
    w = rng.integers(-127, 128, (n, k) if trans_b else (k, n)).astype("int8")
    sb = np.broadcast_to(sx * ws * np.float32(bias_scale_factor), (n,)).astype("float32")
    inits = {"sx": sx, "zx": zx, "w": w, "ws": ws, "wz": np.zeros(ws.shape, "int8"),
             "b": rng.integers(-3000, 3000, n).astype("int32"), "sb": sb,
             "bz": np.zeros(n, "int32"), "sy": np.array(0.05, "float32"),
             "zy": np.array(110, "uint8")}
    axis = {"axis": 0 if trans_b else 1} if per_channel else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], **axis),
             helper.make_node("DequantizeLinear", ["b", "sb", "bz"], ["bd"], axis=0)]
    if op == "Gemm":
        nodes.append(helper.make_node("Gemm", ["xd", "wd"], ["mm"], transB=int(trans_b)))
    else:
        nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["mm"]))
    last = "mm"
    if bias:
        nodes.append(helper.make_node("Add", ["mm", "bd"], ["biased"]))
        last = "biased"
    nodes += [helper.make_node("QuantizeLinear", [last, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info(
        "x", TP.FLOAT, [m, k])], [helper.make_tensor_value_info("y", TP.FLOAT, None)],
        [numpy_helper.from_array(v, name) for name, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model, rng.standard_normal((m, k)).astype("float32") * 2


def _compare_dense(model, x, fused: bool):
    _compare(model, x, fused, op="nn.contrib_qdense", off_share=0.02)


@pytest.mark.parametrize("op, trans_b", [("Gemm", True), ("Gemm", False), ("MatMul", False)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("per_channel", [True, False])
def test_qdq_gemm_is_the_int8_dense(op, trans_b, bias, per_channel):
    """K = 37 and N = 21: not multiples of the kernel's blocks of 4 and 16."""
    model, x = _qdq_gemm_model(37, 21, op=op, trans_b=trans_b, bias=bias,
                               per_channel=per_channel, seed=len(op) + bias)
    _compare_dense(model, x, fused=True)


def test_qdq_gemm_bias_of_another_scale_keeps_the_float_gemm():
    model, x = _qdq_gemm_model(16, 8, bias=True, bias_scale_factor=1.5)
    _compare_dense(model, x, fused=False)
