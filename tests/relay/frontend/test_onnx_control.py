"""If and Loop against onnxruntime, run by the VM (float32 rtol/atol 1e-5, integers and bools
exactly), from small graphs to the shapes of real models: a greedy beam-search loop with a
data-dependent trip count, a growing carried tensor and a condition computed in the body; If
branches that read outer values and return different shapes."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, run_ort, run_vm
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from ember import relay
from ember.runtime.errors import FrontendError, OpNotImplemented


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


# ---------------------------------------------------------------- real-model shapes
def _init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _beam_body():
    """One greedy step of B beams: next token, its log-probability, the new state; the loop
    goes on while a beam is unfinished (a condition computed in the body)."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["h", "w_out"], ["logits"]),
        n("LogSoftmax", ["logits"], ["logp"], axis=1),
        n("ArgMax", ["logp"], ["best"], axis=1, keepdims=1),
        n("ReduceMax", ["logp"], ["best_p"], axes=[1], keepdims=0),
        n("Concat", ["tokens", "best"], ["tokens_out"], axis=1),
        n("Not", ["finished"], ["live"]),
        n("Cast", ["live"], ["live_f"], to=TP.FLOAT),
        n("Mul", ["best_p", "live_f"], ["gain"]),
        n("Add", ["score", "gain"], ["score_out"]),
        n("Squeeze", ["best", "axes1"], ["tok"]),
        n("Equal", ["tok", "eos"], ["is_eos"]),
        n("Or", ["finished", "is_eos"], ["finished_out"]),
        n("Gather", ["embed", "tok"], ["emb"]),
        n("MatMul", ["h", "w_h"], ["hh"]),
        n("Add", ["hh", "emb"], ["pre"]),
        n("Add", ["pre", "context"], ["pre2"]),  # an outer-scope value
        n("Tanh", ["pre2"], ["h_out"]),
        n("Cast", ["finished_out"], ["fin_i"], to=TP.INT64),
        n("ReduceMin", ["fin_i"], ["all_done"], keepdims=0),
        n("Equal", ["all_done", "zero"], ["go_on"]),
    ]
    inputs = [_vi("i", TP.INT64, []), _vi("c", TP.BOOL, []), _vi("h", shape=[3, 4]),
              _vi("tokens", TP.INT64, [3, None]), _vi("score", shape=[3]),
              _vi("finished", TP.BOOL, [3])]
    outputs = [_vi("go_on", TP.BOOL, []), _vi("h_out", shape=[3, 4]),
               _vi("tokens_out", TP.INT64, [3, None]), _vi("score_out", shape=[3]),
               _vi("finished_out", TP.BOOL, [3]), _vi("best_p", shape=[3])]
    return helper.make_graph(nodes, "beam_step", inputs, outputs)


def _beam_model():
    """Greedy decoding of 3 beams: the trip count is max(lengths) (read from the data), the
    carried token matrix grows by a column per step, the context projection is computed once
    outside the loop and read by the body; scan output: each step's log-probabilities."""
    rng = np.random.default_rng(7)
    n = helper.make_node
    nodes = [
        n("ReduceMax", ["lengths"], ["max_len"], keepdims=0),
        n("MatMul", ["enc", "w_c"], ["proj"]),
        n("Tanh", ["proj"], ["context"]),
        n("Loop", ["max_len", "", "h0", "bos", "score0", "fin0"],
          ["h_T", "tokens", "score", "finished", "step_p"], body=_beam_body()),
    ]
    inits = [_init("w_out", rng.standard_normal((4, 5)).astype("float32")),
             _init("w_h", (0.5 * rng.standard_normal((4, 4))).astype("float32")),
             _init("w_c", rng.standard_normal((4, 4)).astype("float32")),
             _init("embed", rng.standard_normal((5, 4)).astype("float32")),
             _init("axes1", np.array([1], "int64")), _init("eos", np.array(0, "int64")),
             _init("zero", np.array(0, "int64")), _init("bos", np.full((3, 1), 1, "int64")),
             _init("score0", np.zeros(3, "float32")), _init("fin0", np.zeros(3, bool))]
    inputs = [_vi("h0", shape=[3, 4]), _vi("enc", shape=[3, 4]), _vi("lengths", TP.INT64, [2])]
    outputs = [_vi("h_T"), _vi("tokens", TP.INT64), _vi("score"), _vi("finished", TP.BOOL),
               _vi("step_p")]
    return _model(nodes, inputs, outputs, inits, opset=13)


@pytest.mark.parametrize("seed,lengths", [(0, [4, 2]), (1, [9, 3]), (2, [0, 0]), (5, [20, 1])])
def test_beam_search_like_loop(seed, lengths):
    """Stops at max(lengths) steps (seeds 0, 1), at once (2), or when every beam has met the
    end token (5: after 4 of 20 steps)."""
    model = _beam_model()
    rng = np.random.default_rng(seed)
    feeds = {"h0": rng.standard_normal((3, 4)).astype("float32"),
             "enc": rng.standard_normal((3, 4)).astype("float32"),
             "lengths": np.array(lengths, "int64")}
    compare(f"beam seed {seed}", run_vm(model, list(feeds.values())), run_ort(model, feeds))


def _functions_in(expr):
    from ember.ir.expr import Function
    from ember.ir.visitor import post_order

    return [e for e in post_order(expr) if isinstance(e, Function)]


def test_values_computed_outside_a_loop_are_computed_once():
    """The body reads tanh(x @ w) from the enclosing graph: it is passed to the loop function
    as a parameter, not recomputed at every iteration."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "h"], ["acc_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [_vi("i", TP.INT64, []), _vi("c_in", TP.BOOL, []), _vi("acc_in", shape=[4, 4])],
        [_vi("c_out", TP.BOOL, []), _vi("acc_out", shape=[4, 4])])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h0"]),
             helper.make_node("Tanh", ["h0"], ["h"]),
             helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)]
    model = _model(nodes, [_vi("x", shape=[4, 4]), _vi("M", TP.INT64, [])], [_vi("y")],
                   [_init("w", np.eye(4, dtype="float32") * 0.5)])
    mod, _ = relay.frontend.from_onnx(model)
    (loop_fn,) = [f for f in _functions_in(mod["main"].body)]
    inside = relay.analysis.list_op_freqs(relay.Function(list(loop_fn.params), loop_fn.body))
    assert "nn.dense" not in inside and "tanh" not in inside, inside
    assert len(loop_fn.params) == 5  # i, cond, acc, and the invariants h and M
    for trips in (0, 3):
        feeds = {"x": np.random.default_rng(trips).random((4, 4)).astype("float32"),
                 "M": np.array(trips, "int64")}
        compare(f"invariant M={trips}", run_vm(model, list(feeds.values())),
                run_ort(model, feeds))


def test_if_branches_read_outer_values_and_return_different_shapes():
    """then: concat(x, relu(x)) of shape (4, 3); else: x * relu(x) of shape (2, 3); the
    output is (?, 3), and what follows it computes with its run-time size."""
    then_g = helper.make_graph([helper.make_node("Concat", ["x", "r"], ["t"], axis=0)], "then",
                               [], [_vi("t", shape=[4, 3])])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "r"], ["e"])], "else", [],
                               [_vi("e", shape=[2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Shape", ["y"], ["rows"]),
             helper.make_node("ReduceSum", ["y", "axes0"], ["col_sums"], keepdims=0),
             helper.make_node("Reshape", ["y", "flat"], ["y_flat"])]
    model = _model(nodes, [_vi("x", shape=[2, 3])],
                   [_vi("y"), _vi("rows", TP.INT64), _vi("col_sums"), _vi("y_flat")],
                   [_init("zero", np.array(0, "float32")), _init("axes0", np.array([0])),
                    _init("flat", np.array([-1], "int64"))], opset=13)
    mod, _ = relay.frontend.from_onnx(model)
    assert "?" in str(mod["main"].checked_type.ret_type.fields[0])
    for sign in (1.0, -1.0):
        x = (sign * np.abs(np.random.default_rng(3).standard_normal((2, 3)))).astype("float32")
        compare(f"If shapes sign {sign}", run_vm(model, [x]), run_ort(model, {"x": x}))


def test_if_branches_of_different_rank_are_refused():
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                               [_vi("t")])
    else_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)],
                               "else", [], [_vi("e")])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                              else_branch=else_g)]
    model = _model(nodes, [_vi("x", shape=[3]), _vi("c", TP.BOOL, [])], [_vi("y")])
    with pytest.raises(OpNotImplemented, match=r"If node 'branch': output 0 is "
                                               r"Tensor\[\(3\), float32\] in then_branch but "
                                               r"float32 in else_branch \(the branches must "
                                               r"agree on dtype and rank\)"):
        relay.frontend.from_onnx(model)


def test_if_condition_must_be_a_bool():
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                               [_vi("t")])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                              else_branch=then_g)]
    model = _model(nodes, [_vi("x", shape=[3]), _vi("c", TP.FLOAT, [])], [_vi("y")])
    with pytest.raises(FrontendError, match="If node 'branch': cond must be a one-element "
                                            "bool tensor"):
        relay.frontend.from_onnx(model)


def test_loop_dynamic_scan_elements_are_stacked_after_the_loop():
    """The scan output's element shape is only known at run time (a slice at the iteration
    number): its elements are collected in a List and stacked after the loop."""
    body = helper.make_graph(
        [helper.make_node("Add", ["i", "one"], ["end"]),
         helper.make_node("Unsqueeze", ["i", "axes0"], ["start1"]),
         helper.make_node("Unsqueeze", ["end", "axes0"], ["end1"]),
         helper.make_node("Slice", ["x", "start1", "end1"], ["piece"]),
         helper.make_node("Add", ["y_in", "piece"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scan"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body", [_vi("i", TP.INT64, []), _vi("c", TP.BOOL, []), _vi("y_in", shape=[1])],
        [_vi("c_out", TP.BOOL, []), _vi("y_out", shape=[1]), _vi("scan", shape=None)],
        [_init("one", np.array(1, "int64")), _init("axes0", np.array([0], "int64"))])
    nodes = [helper.make_node("Loop", ["M", "", "y0"], ["y", "scans"], body=body)]
    model = _model(nodes, [_vi("x", shape=[6]), _vi("M", TP.INT64, []), _vi("y0", shape=[1])],
                   [_vi("y"), _vi("scans")], opset=13)
    for trips in (1, 4):
        feeds = {"x": np.arange(6, dtype="float32"), "M": np.array(trips, "int64"),
                 "y0": np.array([0.5], "float32")}
        compare(f"dynamic scan M={trips}", run_vm(model, list(feeds.values())),
                run_ort(model, feeds))
