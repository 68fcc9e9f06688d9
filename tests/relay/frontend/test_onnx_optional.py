"""Optional, OptionalHasElement, OptionalGetElement and SequenceMap against onnxruntime
(optionals inside the graph: resolved at import where their presence is known there, else
Options on the VM), and what is refused. Optional graph inputs and outputs:
``test_onnx_seq_io.py``."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, graph_model, run_ort, run_vm
from onnx import TensorProto as TP
from onnx import helper

from ember import relay
from ember.runtime.errors import FrontendError

X = np.arange(6, dtype="float32").reshape(2, 3)
TENSOR_TYPE = helper.make_tensor_type_proto(TP.FLOAT, [2, 3])
F = TP.FLOAT


def _inputs(*names: str, shape=(2, 3), elem=F):
    return [helper.make_tensor_value_info(n, elem, list(shape)) for n in names]


def _model(nodes, inputs, outputs, opset=18):
    model = graph_model(nodes, inputs, outputs, opset=opset)
    for out in model.graph.output:  # of unknown type: onnxruntime infers it
        out.ClearField("type")
    return model


def _check(model, feeds):
    compare("model", run_vm(model, list(feeds.values())), run_ort(model, feeds))



def test_present_and_empty_optionals():
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["v"]),
             helper.make_node("Add", ["v", "x"], ["y"]),
             helper.make_node("Optional", [], ["e"], type=TENSOR_TYPE),
             helper.make_node("OptionalHasElement", ["e"], ["empty_has"]),
             helper.make_node("OptionalHasElement", ["x"], ["tensor_has"]),
             helper.make_node("OptionalGetElement", ["x"], ["tensor_get"])]
    model = _model(nodes, _inputs("x"), ["has", "y", "empty_has", "tensor_has", "tensor_get"])
    _check(model, {"x": X})


def test_if_branches_holding_values_merge():
    then = helper.make_graph([helper.make_node("Optional", ["x"], ["t"])], "then", [],
                             [helper.make_value_info("t", helper.make_optional_type_proto(
                                 TENSOR_TYPE))])
    neg = helper.make_node("Neg", ["x"], ["n"])
    other = helper.make_graph([neg, helper.make_node("Optional", ["n"], ["f"])], "else", [],
                              [helper.make_value_info("f", helper.make_optional_type_proto(
                                  TENSOR_TYPE))])
    nodes = [helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other),
             helper.make_node("OptionalGetElement", ["o"], ["y"])]
    model = _model(nodes, [*_inputs("x"), *_inputs("c", shape=(), elem=TP.BOOL)], ["y"])
    for cond in (True, False):
        _check(model, {"x": X, "c": np.array(cond)})


def test_sequence_map_with_a_tensor_and_a_second_sequence():
    body = helper.make_graph(
        [helper.make_node("Add", ["a", "t"], ["s"]), helper.make_node("Mul", ["s", "b"], ["m"]),
         helper.make_node("Shape", ["m"], ["shape"])], "body",
        [helper.make_tensor_value_info(n, F, None) for n in ("a", "t", "b")],
        [helper.make_tensor_value_info("m", F, None),
         helper.make_tensor_value_info("shape", TP.INT64, None)])
    nodes = [helper.make_node("SequenceConstruct", ["x", "y", "x"], ["seq"]),
             helper.make_node("SplitToSequence", ["z"], ["other"], axis=0, keepdims=1),
             helper.make_node("SequenceMap", ["seq", "t", "other"], ["mapped", "shapes"],
                              body=body),
             helper.make_node("ConcatFromSequence", ["mapped"], ["out"], axis=0),
             helper.make_node("ConcatFromSequence", ["shapes"], ["out_shapes"], axis=0,
                              new_axis=1)]
    inputs = [*_inputs("x", "y", shape=(1, 3)), *_inputs("t", shape=(3,)),
              *_inputs("z", shape=(3, 3))]
    model = _model(nodes, inputs, ["out", "out_shapes"])
    rng = np.random.default_rng(0)
    feeds = {"x": rng.random((1, 3), "float32"), "y": rng.random((1, 3), "float32"),
             "t": rng.random(3, "float32"), "z": rng.random((3, 3), "float32")}
    _check(model, feeds)


def test_refused_and_bad_optionals_name_the_node():
    empty_get = [helper.make_node("Optional", [], ["e"], type=TENSOR_TYPE),
                 helper.make_node("OptionalGetElement", ["e"], ["y"], name="get")]
    with pytest.raises(FrontendError, match="OptionalGetElement node 'get': the optional is "
                                            "empty"):
        relay.frontend.from_onnx(_model(empty_get, _inputs("x"), ["y"]))
    no_type = [helper.make_node("Optional", [], ["e"], name="opt"),
               helper.make_node("OptionalHasElement", ["e"], ["y"])]
    with pytest.raises(FrontendError, match="Optional node 'opt': an Optional without input "
                                            "needs the 'type' attribute"):
        relay.frontend.from_onnx(_model(no_type, _inputs("x"), ["y"]))
    then = helper.make_graph([helper.make_node("Optional", ["x"], ["t"])], "then", [],
                             [helper.make_value_info("t", helper.make_optional_type_proto(
                                 TENSOR_TYPE))])
    other = helper.make_graph([helper.make_node("Optional", [], ["f"], type=TENSOR_TYPE)],
                              "else", [], [helper.make_value_info(
                                  "f", helper.make_optional_type_proto(TENSOR_TYPE))])
    differ = [helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other,
                               name="if"),
              helper.make_node("OptionalHasElement", ["o"], ["y"])]
    # branches of differing presence: an Option whose presence the VM finds at run time
    model = _model(differ, [*_inputs("x"), *_inputs("c", shape=(), elem=TP.BOOL)], ["y"])
    for cond in (True, False):
        _check(model, {"x": X, "c": np.array(cond)})


def test_sequence_map_over_a_run_time_length_list():
    """A Loop appends n rows (n given at run time), SequenceMap adds t to each (@map on the
    VM), ConcatFromSequence stacks them."""
    loop_body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["row"]),
         helper.make_node("SequenceInsert", ["seq_in", "row"], ["seq_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "loop_body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("c_in", TP.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_in", F, None)],
        [helper.make_tensor_value_info("c_out", TP.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_out", F, None)])
    map_body = helper.make_graph(
        [helper.make_node("Add", ["a", "t"], ["s"])], "map_body",
        [helper.make_tensor_value_info(n, F, None) for n in ("a", "t")],
        [helper.make_tensor_value_info("s", F, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["n", "", "empty"], ["rows"], body=loop_body),
             helper.make_node("SequenceMap", ["rows", "t"], ["mapped"], body=map_body),
             helper.make_node("ConcatFromSequence", ["mapped"], ["out"], axis=0)]
    inputs = [helper.make_tensor_value_info("n", TP.INT64, []), *_inputs("x", shape=(1, 3)),
              *_inputs("t", shape=(3,))]
    model = _model(nodes, inputs, ["out"])
    rng = np.random.default_rng(1)
    _check(model, {"n": np.array(4, "int64"), "x": rng.random((1, 3), "float32"),
                   "t": rng.random(3, "float32")})
