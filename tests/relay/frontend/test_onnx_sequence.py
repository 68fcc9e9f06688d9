"""ONNX sequence operators against onnxruntime, in the patterns exporters write them (float32
rtol/atol 1e-5, integers exactly).

A sequence of known length is a Relay tuple (built and run by the graph executor here); one
whose length is only known at run time (a run-time position, a Loop that appends) is a Prelude
List that the VM runs. Sequence outputs are compared element by element (onnxruntime returns a
list; the VM a tuple or List ADT, flattened).
"""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, run_graph, run_ort, run_vm
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from ember import relay
from ember.runtime.errors import FrontendError, OpNotImplemented


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _vi(name, elem=TP.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _seq_vi(name, elem=TP.FLOAT):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def _init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _flat(values):
    """onnxruntime's outputs with each sequence spread into its tensors."""
    out = []
    for v in values:
        out.extend(v if isinstance(v, list) else [v])
    return out


def _x(shape=(2, 6), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


# ---------------------------------------------------------------- known lengths: tuples
def test_torch_split_and_cat_as_exported():
    """torch.split(x, [2, 4], 1) -> SplitToSequence, list[-1] -> SequenceAt, torch.cat ->
    ConcatFromSequence, torch.stack -> ConcatFromSequence(new_axis=1), len -> SequenceLength,
    list.insert / list.pop(0) -> SequenceInsert / SequenceErase at known positions."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
        helper.make_node("SequenceAt", ["parts", "last"], ["tail"]),
        helper.make_node("SequenceInsert", ["parts", "x", "zero"], ["more"]),
        helper.make_node("SequenceErase", ["more", "one"], ["fewer"]),
        helper.make_node("ConcatFromSequence", ["fewer"], ["cat"], axis=-1),
        helper.make_node("SequenceLength", ["fewer"], ["n"]),
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
        helper.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=-1, new_axis=1),
        helper.make_node("SequenceConstruct", ["tail", "tail"], ["pair"]),
        helper.make_node("ConcatFromSequence", ["pair"], ["pair_cat"], axis=0),
        helper.make_node("SplitToSequence", ["x", "chunk"], ["chunks"], axis=1),
        helper.make_node("SequenceAt", ["chunks", "last"], ["chunk_tail"]),
    ]
    inits = [_init("sizes", np.array([2, 4], "int64")), _init("last", np.array(-1, "int64")),
             _init("zero", np.array(0, "int64")), _init("one", np.array(1, "int64")),
             _init("chunk", np.array(4, "int64"))]
    outs = ["tail", "cat", "n", "stacked", "pair_cat", "chunk_tail"]
    model = _model(nodes, [_vi("x", shape=[2, 6])],
                   [_vi(o, TP.INT64 if o == "n" else TP.FLOAT) for o in outs], inits)
    mod, _ = relay.frontend.from_onnx(model)
    assert "Cons" not in mod.astext()  # every length is known: no List
    for seed in (0, 1):
        x = _x(seed=seed)
        compare(f"split/cat seed {seed}", run_graph(model, {"x": x}), run_ort(model, {"x": x}))


def test_a_sequence_output_of_known_length():
    nodes = [helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1)]
    model = _model(nodes, [_vi("x", shape=[2, 6])], [_seq_vi("parts")],
                   [_init("sizes", np.array([1, 5], "int64"))])
    x = _x()
    compare("sequence output", run_vm(model, [x]), _flat(run_ort(model, {"x": x})))


# ---------------------------------------------------------------- run-time lengths: Lists
def _run_time_position_model():
    """Positions known only at run time: the tuple becomes a List and the VM works on it."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
        helper.make_node("SequenceAt", ["parts", "k"], ["at"]),
        helper.make_node("SequenceInsert", ["parts", "x", "k"], ["inserted"]),
        helper.make_node("SequenceAt", ["inserted", "k"], ["at_inserted"]),
        helper.make_node("SequenceLength", ["inserted"], ["n_inserted"]),
        helper.make_node("SequenceErase", ["parts", "k"], ["erased"]),
        helper.make_node("ConcatFromSequence", ["erased"], ["cat"], axis=1),
        helper.make_node("SequenceErase", ["inserted"], ["popped"]),
        helper.make_node("SequenceLength", ["popped"], ["n_popped"]),
        helper.make_node("ConcatFromSequence", ["erased"], ["stacked"], axis=0, new_axis=1),
    ]
    outs = [_vi("at"), _vi("at_inserted"), _vi("n_inserted", TP.INT64), _vi("cat"),
            _vi("n_popped", TP.INT64), _vi("stacked")]
    return _model(nodes, [_vi("x", shape=[2, 6]), _vi("k", TP.INT64, [])], outs,
                  [_init("sizes", np.array([2, 2, 2], "int64"))])


@pytest.mark.parametrize("k", [-3, -1, 0, 2])
def test_positions_known_only_at_run_time(k):
    model = _run_time_position_model()
    feeds = {"x": _x(seed=k + 3), "k": np.array(k, "int64")}
    compare(f"position {k}", run_vm(model, list(feeds.values())), run_ort(model, feeds))


def test_a_list_of_elements_of_different_sizes():
    """Inserting a (2, 6) tensor into a list of (2, 2) ones: the List's elements are (2, ?),
    and each element taken back has its own size."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
        helper.make_node("SequenceInsert", ["parts", "x", "k"], ["mixed"]),
        helper.make_node("SequenceAt", ["mixed", "k"], ["a"]),
        helper.make_node("SequenceAt", ["mixed", "zero"], ["b"]),
        helper.make_node("ReduceSum", ["a"], ["sa"], keepdims=0),
        helper.make_node("Shape", ["a"], ["shape_a"]),
        helper.make_node("ConcatFromSequence", ["mixed"], ["cat"], axis=1),
    ]
    model = _model(nodes, [_vi("x", shape=[2, 6]), _vi("k", TP.INT64, [])],
                   [_vi("a"), _vi("b"), _vi("sa"), _vi("shape_a", TP.INT64), _vi("cat")],
                   [_init("sizes", np.array([3, 3], "int64")), _init("zero", np.array(0))])
    for k in (0, 1, 2):
        feeds = {"x": _x(seed=k), "k": np.array(k, "int64")}
        compare(f"mixed k={k}", run_vm(model, list(feeds.values())), run_ort(model, feeds))


def _append_loop_model():
    """A scripted loop as torch exports it: ``out = []; for i in range(n): out.append(x * i)
    ; torch.cat(out)``, n read from the data; also len(out) and out[-1]."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("Slice", ["xi", "zero1", "i1", "axes1"], ["part"]),
         helper.make_node("SequenceInsert", ["seq_in", "part"], ["seq_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body", [_vi("i", TP.INT64, []), _vi("c", TP.BOOL, []), _seq_vi("seq_in")],
        [_vi("c_out", TP.BOOL, []), _seq_vi("seq_out")])
    body.node.insert(0, helper.make_node("Unsqueeze", ["i_plus", "axes0"], ["i1"]))
    body.node.insert(0, helper.make_node("Add", ["i", "one"], ["i_plus"]))
    nodes = [
        helper.make_node("ReduceMax", ["lengths"], ["n"], keepdims=0),
        helper.make_node("SequenceEmpty", [], ["empty"]),
        helper.make_node("Loop", ["n", "", "empty"], ["parts"], body=body),
        helper.make_node("ConcatFromSequence", ["parts"], ["cat"], axis=1),
        helper.make_node("SequenceLength", ["parts"], ["count"]),
        helper.make_node("SequenceAt", ["parts", "minus1"], ["last"]),
    ]
    inits = [_init("zero1", np.array([0], "int64")), _init("one", np.array(1, "int64")),
             _init("axes0", np.array([0], "int64")), _init("minus1", np.array(-1, "int64")),
             _init("axes1", np.array([1], "int64"))]
    return _model(nodes, [_vi("x", shape=[2, 6]), _vi("lengths", TP.INT64, [3])],
                  [_vi("cat"), _vi("count", TP.INT64), _vi("last")], inits)


@pytest.mark.parametrize("n", [1, 3, 6])
def test_a_loop_appending_to_a_list(n):
    """Each element is one column wider than the last: a List of (2, ?) tensors."""
    model = _append_loop_model()
    feeds = {"x": _x(seed=n), "lengths": np.array([1, n, 0], "int64")}
    compare(f"append loop n={n}", run_vm(model, list(feeds.values())), run_ort(model, feeds))


def test_if_branches_building_sequences_of_different_lengths():
    def branch(name, n):
        return helper.make_graph(
            [helper.make_node("SequenceConstruct", ["x"] * n, [f"{name}_s"])], name, [],
            [_seq_vi(f"{name}_s")])

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["seq"], then_branch=branch("then", 3),
                              else_branch=branch("else", 1)),
             helper.make_node("SequenceLength", ["seq"], ["n"]),
             helper.make_node("ConcatFromSequence", ["seq"], ["cat"], axis=0)]
    model = _model(nodes, [_vi("x", shape=[2, 3])], [_vi("n", TP.INT64), _vi("cat")],
                   [_init("zero", np.array(0, "float32"))])
    for sign in (1.0, -1.0):
        x = sign * np.abs(_x((2, 3)))
        compare(f"If sequences sign {sign}", run_vm(model, [x]), run_ort(model, {"x": x}))


# ---------------------------------------------------------------- errors
def _import(nodes, inputs=None, inits=()):
    model = _model(nodes, inputs or [_vi("x", shape=[2, 6])], [_vi("y")], inits)
    return relay.frontend.from_onnx(model)


def test_known_position_out_of_range_is_named():
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
             helper.make_node("SequenceAt", ["s", "k"], ["y"], name="pick")]
    with pytest.raises(FrontendError, match=r"SequenceAt node 'pick': position 2 is out of "
                                            r"range for a sequence of length 2 \(allowed: -2 to 1\)"):
        _import(nodes, inits=[_init("k", np.array(2, "int64"))])


def test_a_tensor_where_a_sequence_is_expected():
    nodes = [helper.make_node("SequenceLength", ["x"], ["y"], name="len")]
    with pytest.raises(FrontendError, match=r"SequenceLength node 'len': input 0 "
                                            r"\(input_sequence\) must be a sequence, got a "
                                            r"tensor"):
        _import(nodes)


def test_inserting_another_dtype_or_rank():
    nodes = [helper.make_node("SequenceConstruct", ["x"], ["s"]),
             helper.make_node("Cast", ["x"], ["xi"], to=TP.INT64),
             helper.make_node("SequenceInsert", ["s", "xi"], ["y"], name="ins")]
    with pytest.raises(FrontendError, match="ins.*cannot insert a int64 tensor into a sequence "
                                            "of float32"):
        _import(nodes)
    nodes = [helper.make_node("SequenceConstruct", ["x"], ["s"]),
             helper.make_node("Flatten", ["x"], ["flat"], axis=0),
             helper.make_node("Squeeze", ["flat", "axes"], ["v"]),
             helper.make_node("SequenceInsert", ["s", "v"], ["y"], name="ins")]
    with pytest.raises(OpNotImplemented, match="ins.*cannot hold both"):
        _import(nodes, inits=[_init("axes", np.array([0], "int64"))])


def test_concatenating_an_empty_sequence():
    nodes = [helper.make_node("SequenceEmpty", [], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, name="cat")]
    with pytest.raises(FrontendError, match="ConcatFromSequence node 'cat': cannot concatenate "
                                            "an empty sequence"):
        _import(nodes)


def test_split_sizes_that_do_not_fit():
    cases = {(3, 4): r"split sizes \[3, 4\] do not add up to the size 6 of axis 1",
             (7, -1): r"split sizes \[7, -1\] must not be negative"}
    for sizes, message in cases.items():
        nodes = [helper.make_node("SplitToSequence", ["x", "sizes"], ["y"], axis=1, name="sp")]
        with pytest.raises(FrontendError, match="SplitToSequence node 'sp': " + message):
            _import(nodes, inits=[_init("sizes", np.array(sizes, "int64"))])
    nodes = [helper.make_node("SplitToSequence", ["x", "sizes"], ["y"], axis=1, name="sp")]
    with pytest.raises(FrontendError, match="split 0 must be positive"):
        _import(nodes, inits=[_init("sizes", np.array(0, "int64"))])


def test_splitting_a_symbolic_axis_into_pieces_of_one_needs_its_size():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["y"], axis=1, name="sp")]
    with pytest.raises(OpNotImplemented, match="sp.*needs its size at import"):
        _import(nodes, [_vi("x", shape=[2, "n"])])
