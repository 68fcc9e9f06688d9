"""ONNX node names carried through import, the optimisation passes and fusion: each kernel
of a build knows the ONNX nodes it computes (``relay.analysis.source_nodes``, the graph JSON's
``source_nodes``)."""
from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend tests need the onnx package")
from onnx import TensorProto, helper

import ember
from ember import relay
from ember.contrib import cc
from ember.ir.expr import Call, Function
from ember.ir.visitor import post_order
from ember.relay.analysis import source_nodes


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_relu_add():
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8, 3, 3],
                           rng.uniform(-1, 1, 8 * 8 * 9).astype("float32"))
    b = helper.make_tensor("b", TensorProto.FLOAT, [8], rng.uniform(-1, 1, 8).astype("float32"))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "x"], ["y"], name="residual")]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8, 6, 6]) for n in "xy"]
    return _model(nodes, io[:1], io[1:], [w, b])


def matmul_gelu():
    """MatMul then GELU as exporters spell it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    rng = np.random.default_rng(1)
    consts = [helper.make_tensor("w", TensorProto.FLOAT, [16, 16],
                                 rng.uniform(-1, 1, 256).astype("float32"))]
    consts += [helper.make_tensor(n, TensorProto.FLOAT, [], [v])
               for n, v in (("sqrt2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Div", ["m", "sqrt2"], ["d"], name="gelu_div"),
             helper.make_node("Erf", ["d"], ["e"], name="gelu_erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="gelu_add"),
             helper.make_node("Mul", ["m", "a"], ["p"], name="gelu_mul"),
             helper.make_node("Mul", ["p", "half"], ["y"], name="gelu_half")]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 16]) for n in "xy"]
    return _model(nodes, io[:1], io[1:], consts)


def kernels(model):
    """The ONNX nodes of each fused kernel of the optimised model."""
    mod, params = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    return [source_nodes(e.op) for e in post_order(opt["main"])
            if isinstance(e, Call) and isinstance(e.op, Function)]


def test_import_gives_each_call_its_onnx_node():
    mod, _ = relay.frontend.from_onnx(conv_relu_add())
    calls = [e for e in post_order(mod["main"]) if isinstance(e, Call)]
    assert all(c.span is not None for c in calls)
    assert source_nodes(mod["main"]) == ["conv", "relu", "residual"]


def test_conv_relu_add_is_one_kernel_naming_all_three():
    covering = [k for k in kernels(conv_relu_add()) if k]
    assert covering == [["conv", "relu", "residual"]]


def test_gelu_decomposition_keeps_every_node_name():
    covered = [n for k in kernels(matmul_gelu()) for n in k]
    assert sorted(covered) == sorted(["matmul", "gelu_div", "gelu_erf", "gelu_add",
                                      "gelu_mul", "gelu_half"])


def test_batch_norm_folded_into_the_conv_keeps_its_name():
    rng = np.random.default_rng(2)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [4, 4, 1, 1],
                                rng.uniform(-1, 1, 16).astype("float32"))]
    inits += [helper.make_tensor(n, TensorProto.FLOAT, [4], rng.uniform(0.5, 1, 4)
                                 .astype("float32")) for n in ("g", "beta", "mean", "var")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["y"],
                              name="bn")]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 4, 4]) for n in "xy"]
    covered = [n for k in kernels(_model(nodes, io[:1], io[1:], inits)) for n in k]
    assert sorted(covered) == ["bn", "conv"]


def test_transposed_conv_phase_conv_and_interleave_both_name_the_node():
    # the 2x2/2 ConvTranspose of DBNet's head: a blocked phase conv, then its interleave
    rng = np.random.default_rng(3)
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 16, 2, 2],
                           rng.uniform(-1, 1, 16 * 16 * 4).astype("float32"))
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], name="deconv",
                              strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 10, 10])
    named = [k for k in kernels(_model(nodes, [x], [y], [w])) if k]
    assert len(named) == 2 and all("deconv" in k for k in named), named


def test_tokens_of_a_blocked_map_keep_their_node_names():
    # conv -> tokens (Reshape, Transpose) -> Relu: FoldTokenLayouts' blocked copy names them
    rng = np.random.default_rng(4)
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 16, 3, 3],
                           rng.uniform(-1, 1, 16 * 16 * 9).astype("float32"))
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [1, 16, 36])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "shape"], ["r"], name="flatten"),
             helper.make_node("Transpose", ["r"], ["t"], name="tokens", perm=[0, 2, 1]),
             helper.make_node("Relu", ["t"], ["y"], name="act")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 6, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 36, 16])
    covered = [n for k in kernels(_model(nodes, [x], [y], [w, shape])) for n in k]
    assert sorted(covered) == ["act", "conv", "flatten", "tokens"]


def test_a_model_built_from_the_python_api_has_no_node_names():
    x = relay.var("x", shape=(2, 3))
    func = relay.Function([x], relay.nn.relu(x + relay.const(1.0)))
    assert source_nodes(func) == []


@pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
def test_graph_json_lists_each_kernels_onnx_nodes():
    mod, params = relay.frontend.from_onnx(conv_relu_add())
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params)
    nodes = json.loads(factory.get_graph_json())["nodes"]
    named = [n["attrs"]["source_nodes"] for n in nodes
             if n["op"] == "tvm_op" and "source_nodes" in n["attrs"]]
    assert named == [["conv", "relu", "residual"]]
    # the graph executor reads the attribute back with the graph; its profile shows it
    dbg = factory.debug_create("default", ember.cpu(0))
    assert [n.extra_attrs["source_nodes"] for n in dbg.graph.nodes
            if "source_nodes" in n.extra_attrs] == named
    report = dbg.profile(x=np.zeros((1, 8, 6, 6), "float32"))
    assert [c["Source Nodes"] for c in report.calls if "Source Nodes" in c] == \
        ["conv,relu,residual"]
    assert "Source Nodes" in report.table()
