"""Sequence and optional graph inputs and outputs, through ``ember.compile`` (the VM) and the
``CompiledModel`` call path, against onnxruntime: a sequence input is a Python list of arrays,
an optional input None or its value; a sequence output comes back as a list, an optional one
as None or its value (onnxruntime's conventions).

The models are written as converters write them: a ``dim_param`` for the rows of each
sequence element, an ``If`` on ``OptionalHasElement`` around ``OptionalGetElement``, a
``Loop`` carrying an optional input. One build per model, reused across the checks.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import ember
from ember.api.model import ModelInputError
from ember.runtime.errors import FrontendError
from ember.testing import find_c_compiler

ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
F = TP.FLOAT
RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, opset=18, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _same(got, want, label):
    """Equal values, with lists element by element and None for None."""
    if want is None or isinstance(want, list):
        assert type(got) is type(want), f"{label}: got {type(got).__name__}, want {want!r}"
        if want is None:
            return
        assert len(got) == len(want), f"{label}: {len(got)} elements, onnxruntime {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{label}[{k}]")
        return
    assert isinstance(got, np.ndarray), f"{label}: got {type(got).__name__}"
    assert got.dtype == want.dtype and got.shape == want.shape, f"{label}: {got.dtype}" \
        f"{got.shape} vs {want.dtype}{want.shape}"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=label)


def _rows(*counts):
    return [RNG.standard_normal((n, 3)).astype("float32") for n in counts]


# ---------------------------------------------------------------- a sequence input
def _sequence_model():
    """A batch of variable-length row blocks as a sequence: its length, the blocks
    concatenated, the last block times ``w``, each block's row sums (SequenceMap), the
    sequence with ``x`` inserted at the front."""
    row_sum = helper.make_graph(
        [helper.make_node("ReduceSum", ["e", "one"], ["s"], keepdims=0)], "row_sum",
        [helper.make_tensor_value_info("e", F, ["r", 3])],
        [helper.make_tensor_value_info("s", F, ["r"])],
        [helper.make_tensor(name="one", data_type=TP.INT64, dims=[1], vals=[1])])
    nodes = [helper.make_node("SequenceLength", ["blocks"], ["n"]),
             helper.make_node("ConcatFromSequence", ["blocks"], ["cat"], axis=0),
             helper.make_node("SequenceAt", ["blocks", "last"], ["tail"]),
             helper.make_node("MatMul", ["tail", "w"], ["proj"]),
             helper.make_node("SequenceMap", ["blocks"], ["sums"], body=row_sum),
             helper.make_node("SequenceInsert", ["blocks", "x", "zero"], ["more"])]
    inputs = [helper.make_tensor_sequence_value_info("blocks", F, ["rows", 3]),
              helper.make_tensor_value_info("w", F, [3, 4]),
              helper.make_tensor_value_info("x", F, ["k", 3])]
    outputs = [helper.make_tensor_value_info("n", TP.INT64, []),
               helper.make_tensor_value_info("cat", F, ["total", 3]),
               helper.make_tensor_value_info("proj", F, ["rows", 4]),
               helper.make_tensor_sequence_value_info("sums", F, ["rows"]),
               helper.make_tensor_sequence_value_info("more", F, [None, 3])]
    inits = [helper.make_tensor("last", TP.INT64, [], [-1]),
             helper.make_tensor("zero", TP.INT64, [], [0])]
    return _model(nodes, inputs, outputs, inits=inits)


@pytest.fixture(scope="module")
def sequence_model():
    model = _sequence_model()
    return model, ember.compile(model)


def test_sequence_input_as_a_list_matches_onnxruntime(sequence_model, tmp_path):
    model, compiled = sequence_model
    assert compiled.executor == "vm"
    assert compiled.inputs[0].dtype == "List[Tensor[(?, 3), float32]]"
    w = RNG.standard_normal((3, 4)).astype("float32")
    for counts in ((2,), (1, 4, 3)):
        blocks, x = _rows(*counts), _rows(2)[0]
        want = _ort(model, {"blocks": blocks, "w": w, "x": x})
        got = compiled(blocks, w, x)
        for k, (g, o) in enumerate(zip(got, want)):
            _same(g, o, f"blocks {counts} output {k}")
        _same(compiled(blocks=tuple(blocks), w=w, x=x)[1], want[1], "a tuple for a list")
    compiled.save(tmp_path / "seq.so")  # the record keeps the list type: load converts too
    _same(ember.load(tmp_path / "seq.so")(blocks, w, x)[3], want[3], "loaded")


@pytest.mark.parametrize("value, message", [
    (np.zeros((2, 3), "float32"), r"input 'blocks': expected a list of float32\[\?, 3\] \(a "
                                  r"sequence: a Python list of arrays\), got ndarray"),
    (None, r"input 'blocks': expected a list of .*, got NoneType"),
    ([np.zeros((2, 3), "float32"), np.zeros((2, 3))],
     r"input 'blocks' element 1: expected float32\[\?, 3\], got float64\[2, 3\]"),
    ([np.zeros((2, 4), "float32")], r"input 'blocks' element 0: expected float32\[\?, 3\], "
                                    r"got float32\[2, 4\]"),
    ([np.zeros(3, "float32")], r"element 0: expected float32\[\?, 3\], got float32\[3\]"),
    ([["a", "b", "c"]], r"element 0: cannot convert a list of strings to float32"),
])
def test_wrong_sequence_values_name_the_input_and_element(sequence_model, value, message):
    _, compiled = sequence_model
    w, x = np.zeros((3, 4), "float32"), np.zeros((1, 3), "float32")
    with pytest.raises(ModelInputError, match=message):
        compiled(value, w, x)


def test_an_empty_sequence_stops_with_an_error_not_a_crash(sequence_model):
    _, compiled = sequence_model
    with pytest.raises(ember.TVMError):  # SequenceAt(-1) of nothing: a failed match
        compiled([], np.zeros((3, 4), "float32"), np.zeros((1, 3), "float32"))


# ---------------------------------------------------------------- optional inputs and outputs
def _optional_model():
    """``bias`` an optional input: ``y = x + bias`` when given, else ``x`` (If on
    OptionalHasElement, as converters write a None default); ``bias`` passed through as an
    optional output; ``acc`` a Loop that carries an optional (None after no trip when ``bias``
is None)."""
    get = helper.make_node("OptionalGetElement", ["bias"], ["b"])
    then = helper.make_graph([get, helper.make_node("Add", ["x", "b"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [2, 3])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [2, 3])])
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2, 3]))
    body = helper.make_graph(
        [helper.make_node("OptionalHasElement", ["acc_in"], ["has_in"]),
         helper.make_node("If", ["has_in"], ["acc_t"], then_branch=helper.make_graph(
             [helper.make_node("OptionalGetElement", ["acc_in"], ["prev"]),
              helper.make_node("Add", ["prev", "x"], ["sum"])], "then_acc", [],
             [helper.make_tensor_value_info("sum", F, [2, 3])]),
             else_branch=helper.make_graph(
             [helper.make_node("Identity", ["x"], ["first"])], "else_acc", [],
             [helper.make_tensor_value_info("first", F, [2, 3])])),
         helper.make_node("Optional", ["acc_t"], ["acc_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []),
         helper.make_tensor_value_info("c_in", TP.BOOL, []),
         helper.make_value_info("acc_in", opt_t)],
        [helper.make_tensor_value_info("c_out", TP.BOOL, []),
         helper.make_value_info("acc_out", opt_t)])
    nodes = [helper.make_node("OptionalHasElement", ["bias"], ["has"]),
             helper.make_node("If", ["has"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Identity", ["bias"], ["same"]),
             helper.make_node("Loop", ["trips", "", "bias"], ["acc"], body=body)]
    inputs = [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_value_info("bias", opt_t),
              helper.make_tensor_value_info("trips", TP.INT64, [])]
    outputs = [helper.make_tensor_value_info("y", F, [2, 3]), helper.make_value_info("same", opt_t),
               helper.make_value_info("acc", opt_t)]
    return _model(nodes, inputs, outputs)


def test_optional_input_none_or_value_matches_onnxruntime():
    model = _optional_model()
    compiled = ember.compile(model)
    assert compiled.executor == "vm"
    x = _rows(2)[0]
    for bias in (None, RNG.standard_normal((2, 3)).astype("float32")):
        for trips in (0, 3):
            feeds = {"x": x, "bias": bias, "trips": np.array(trips)}
            want = _ort(model, feeds)
            got = compiled(**feeds)
            for k, (g, o) in enumerate(zip(got, want)):
                _same(g, o, f"bias {'None' if bias is None else 'given'} trips {trips} "
                      f"output {k}")
    with pytest.raises(ModelInputError, match=r"input 'bias': expected float32\[2, 3\], "
                                              r"got float32\[3\]"):
        compiled(x, np.zeros(3, "float32"), np.array(1))


def test_optional_sequence_input_and_if_of_differing_presence():
    """test_identity_opt and test_if_opt of ONNX's node tests, as one model: an optional
    sequence passed through, and an If whose branches differ in presence."""
    opt_seq = helper.make_optional_type_proto(helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(F, [5])))
    then = helper.make_graph([helper.make_node("Optional", [], ["none"], type=opt_seq.
                                               optional_type.elem_type)], "then", [],
                             [helper.make_value_info("none", opt_seq)])
    other = helper.make_graph([helper.make_node("SequenceConstruct", ["v"], ["s"]),
                               helper.make_node("Optional", ["s"], ["some"])], "else", [],
                              [helper.make_value_info("some", opt_seq)])
    nodes = [helper.make_node("Identity", ["opt_in"], ["opt_out"]),
             helper.make_node("If", ["cond"], ["maybe"], then_branch=then, else_branch=other)]
    model = _model(nodes, [helper.make_value_info("opt_in", opt_seq),
                           helper.make_tensor_value_info("cond", TP.BOOL, []),
                           helper.make_tensor_value_info("v", F, [5])],
                   [helper.make_value_info("opt_out", opt_seq),
                    helper.make_value_info("maybe", opt_seq)], opset=16)
    compiled = ember.compile(model)
    v = np.arange(5, dtype="float32")
    for opt_in, cond in ((None, True), ([v, v * 2], False), ([], True)):
        feeds = {"opt_in": opt_in, "cond": np.array(cond), "v": v}
        want = _ort(model, feeds)
        for k, (g, o) in enumerate(zip(compiled(**feeds), want)):
            _same(g, o, f"opt_in {opt_in!r:.20} cond {cond} output {k}")


# ---------------------------------------------------------------- import-time errors
def test_sequence_elements_without_a_rank_take_it_from_their_use():
    """A sequence input whose elements have no shape: SequenceInsert of a vector makes them
    vectors (of any length), as onnxruntime runs it."""
    nodes = [helper.make_node("SequenceInsert", ["s", "t"], ["o"])]
    model = _model(nodes, [helper.make_tensor_sequence_value_info("s", TP.INT64, None),
                           helper.make_tensor_value_info("t", TP.INT64, [3])],
                   [helper.make_tensor_sequence_value_info("o", TP.INT64, None)])
    mod, _ = ember.relay.frontend.from_onnx(model)
    assert "%s: List[Tensor[(?), int64]]" in mod.astext()
    seq, t = [np.arange(4), np.arange(7)], np.arange(3)
    _same(ember.compile(model)(seq, t), _ort(model, {"s": seq, "t": t})[0], "insert")


def test_structured_input_errors_name_the_input():
    identity = [helper.make_node("Identity", ["s"], ["o"])]
    rankless = _model(identity, [helper.make_tensor_sequence_value_info("s", F, None)],
                      [helper.make_tensor_sequence_value_info("o", F, None)])
    with pytest.raises(FrontendError, match=r"graph input 's': the model gives no shape for the "
                                            r"tensors of this sequence and no use of it fixes "
                                            r"their rank; give it with shape=\{'s': "):
        ember.relay.frontend.from_onnx(rankless)
    mod, _ = ember.relay.frontend.from_onnx(rankless, shape={"s": (None, 4)})
    assert "%s: List[Tensor[(?, 4), float32]]" in mod.astext()
    typed = _model(identity, [helper.make_tensor_sequence_value_info("s", F, ["n", 3])],
                   [helper.make_tensor_sequence_value_info("o", F, None)])
    with pytest.raises(FrontendError, match=r"shape= gives 's' the shape \(2, 4\), but the "
                                            r"model declares \(\?, 3\): dimension 1 is 3"):
        ember.relay.frontend.from_onnx(typed, shape={"s": (2, 4)})
    nested = helper.make_sequence_type_proto(helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(F, [3])))
    with pytest.raises(ember.TVMError, match=r"graph input 's': a sequence of a sequences; "
                                             r"ember imports sequences of tensors"):
        ember.relay.frontend.from_onnx(_model(identity, [helper.make_value_info("s", nested)],
                                              [helper.make_value_info("o", nested)]))


def test_an_element_of_the_wrong_size_stops_with_a_clear_error():
    nodes = [helper.make_node("SequenceAt", ["s", "zero"], ["first"]),
             helper.make_node("Reshape", ["first", "to"], ["y"])]
    model = _model(nodes, [helper.make_tensor_sequence_value_info("s", F, ["n"])],
                   [helper.make_tensor_value_info("y", F, [2, 3])],
                   inits=[helper.make_tensor("zero", TP.INT64, [], [0]),
                          helper.make_tensor("to", TP.INT64, [2], [2, 3])])
    compiled = ember.compile(model)
    np.testing.assert_array_equal(compiled([np.arange(6, dtype="float32")]),
                                  np.arange(6, dtype="float32").reshape(2, 3))
    with pytest.raises(ember.TVMError, match=r"cannot reshape tensor float32\[5\] to \[2, 3\]"):
        compiled([np.arange(5, dtype="float32")])
