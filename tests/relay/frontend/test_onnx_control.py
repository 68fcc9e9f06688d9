"""If and Loop against onnxruntime, run by the VM (float32 rtol/atol 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, run_ort, run_vm
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from ember import relay


def _model(nodes, inputs, outputs, inits=(), opset=16):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _vi(name, elem=TP.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _if_model():
    """if (sum(x) > 0) { (x * 2, x + outer) } else { (x - 1, relu(x)) }"""
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t0"]), helper.make_node("Add", ["x", "c"],
                                                                          ["t1"])],
        "then", [], [_vi("t0", shape=[2, 3]), _vi("t1", shape=[2, 3])],
        [numpy_helper.from_array(np.array(2, "float32"), "two")])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["e0"]), helper.make_node("Relu", ["x"], ["e1"])],
        "else", [], [_vi("e0", shape=[2, 3]), _vi("e1", shape=[2, 3])],
        [numpy_helper.from_array(np.array(1, "float32"), "one")])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"]),
             helper.make_node("Add", ["x", "x"], ["c"]),
             helper.make_node("If", ["cond"], ["y0", "y1"], then_branch=then_g,
                              else_branch=else_g)]
    return _model(nodes, [_vi("x", shape=[2, 3])], [_vi("y0"), _vi("y1")],
                  [numpy_helper.from_array(np.array(0, "float32"), "zero")])


def test_if_both_branches_through_the_vm():
    model = _if_model()
    for sign in (1.0, -1.0):
        x = (sign * np.abs(np.random.default_rng(0).standard_normal((2, 3)))).astype("float32")
        compare(f"If sign {sign}", run_vm(model, [x]), run_ort(model, {"x": x}))


def test_if_with_known_condition_imports_the_taken_branch():
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [_vi("t")])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [_vi("e")])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    model = _model(nodes, [_vi("x", shape=[3])], [_vi("y")],
                   [numpy_helper.from_array(np.array([False]), "c")])
    mod, _ = relay.frontend.from_onnx(model)
    assert "abs" in relay.analysis.list_op_freqs(mod)
    assert "negative" not in relay.analysis.list_op_freqs(mod)


def _loop_model():
    """for i < M while cond: acc = acc + x * i; scan out acc; cond = sum(acc) < limit."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "body", [_vi("i", TP.INT64, []), _vi("cond_in", TP.BOOL, []), _vi("acc_in", shape=[3])],
        [_vi("cond_out", TP.BOOL, []), _vi("acc_out", shape=[3]), _vi("scan", shape=[3])])
    nodes = [helper.make_node("Loop", ["M", "cond", "acc0"], ["acc", "scans"], body=body)]
    return _model(nodes, [_vi("x", shape=[3]), _vi("M", TP.INT64, []), _vi("cond", TP.BOOL, []),
                          _vi("acc0", shape=[3]), _vi("limit", shape=[])],
                  [_vi("acc"), _vi("scans")])


@pytest.mark.parametrize("trips,limit", [(5, 1e9), (0, 1e9), (10, 20.0)])
def test_loop_carried_values_and_scan_outputs(trips, limit):
    model = _loop_model()
    rng = np.random.default_rng(trips)
    feeds = {"x": rng.random(3).astype("float32"), "M": np.array(trips, "int64"),
             "cond": np.array(True), "acc0": rng.random(3).astype("float32"),
             "limit": np.array(limit, "float32")}
    compare(f"Loop M={trips}", run_vm(model, list(feeds.values())), run_ort(model, feeds))


def test_loop_with_a_growing_carried_value():
    """The carried tensor grows each iteration (its axis becomes ?); no trip count, the
    condition stops the loop."""
    body = helper.make_graph(
        [helper.make_node("Concat", ["v_in", "one"], ["v_out"], axis=0),
         helper.make_node("Size", ["v_out"], ["n"]),
         helper.make_node("Less", ["n", "stop"], ["cond_out"])],
        "body", [_vi("i", TP.INT64, []), _vi("c", TP.BOOL, []), _vi("v_in", shape=None)],
        [_vi("cond_out", TP.BOOL, []), _vi("v_out")],
        [numpy_helper.from_array(np.array([1.5], "float32"), "one")])
    nodes = [helper.make_node("Loop", ["", "cond", "v0"], ["v"], body=body)]
    model = _model(nodes, [_vi("cond", TP.BOOL, []), _vi("v0", shape=[2]),
                           _vi("stop", TP.INT64, [])], [_vi("v")])
    feeds = {"cond": np.array(True), "v0": np.array([1, 2], "float32"),
             "stop": np.array(6, "int64")}
    compare("growing Loop", run_vm(model, list(feeds.values())), run_ort(model, feeds))
