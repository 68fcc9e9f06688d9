"""Scan against onnxruntime: scan axes and directions, states only or scan outputs only, a
body with initializers and one that reads the enclosing graph; unrolled for a known length
(graph executor), a loop for a symbolic one (VM); Scan-8's batch axis; errors that name the
node. Float32 rtol/atol 1e-5."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import OnnxCase, check, compare, make_model, rand, run_ort, run_vm
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from ember import relay
from ember.runtime.errors import FrontendError, OpAttributeInvalid, OpNotImplemented


def _vi(name, shape=None, elem=TP.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _mac_body():
    """(s, a, b) -> (s + a * b, s + a * b, a - b): a state, two scan outputs."""
    return helper.make_graph([
        helper.make_node("Mul", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["s", "ab"], ["s_out"]),
        helper.make_node("Identity", ["s_out"], ["acc"]),
        helper.make_node("Sub", ["a", "b"], ["diff"])], "mac",
        [_vi("s", [2]), _vi("a", [2]), _vi("b", [2])],
        [_vi("s_out", [2]), _vi("acc", [2]), _vi("diff", [2])])


def _mac_case(name: str, seq: int, seed: int = 0, **attrs) -> OnnxCase:
    rng = np.random.default_rng(seed)
    attrs.setdefault("num_scan_inputs", 2)
    node = helper.make_node("Scan", ["s0", "a", "bt"], ["sf", "y1", "y2"], body=_mac_body(),
                            **attrs)
    b_axis = attrs.get("scan_input_axes", [0, 0])[-1] % 2
    inputs = {"s0": rand(rng, 2), "a": rand(rng, seq, 2),
              "bt": rand(rng, 2, seq) if b_axis else rand(rng, seq, 2)}
    return OnnxCase(name, [node], inputs, ["sf", "y1", "y2"])


def _matrix_case(name: str, seq: int) -> OnnxCase:
    """A state that is a matrix, a body with an initializer, and no scan output."""
    rng = np.random.default_rng(7)
    body = helper.make_graph([
        helper.make_node("MatMul", ["row", "w"], ["m"]),
        helper.make_node("Add", ["m", "h"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["h_out"])], "rnn_cell",
        [_vi("h", [1, 3]), _vi("row", [1, 4])], [_vi("h_out", [1, 3])],
        [numpy_helper.from_array(rand(rng, 4, 3, lo=-.5, hi=.5), "w")])
    node = helper.make_node("Scan", ["h0", "rows"], ["h_last"], body=body, num_scan_inputs=1)
    return OnnxCase(name, [node], {"h0": rand(rng, 1, 3), "rows": rand(rng, seq, 1, 4)},
                    ["h_last"])


def test_scan_unrolled_matches_onnxruntime():
    check([
        _mac_case("plain", 5),
        _mac_case("reversed_outputs", 3, seed=3, scan_output_directions=[1, 1]),
        _mac_case("axes_dirs", 4, seed=1, scan_input_axes=[0, 1], scan_input_directions=[0, 1],
                  scan_output_axes=[1, -1], scan_output_directions=[1, 0]),
        _mac_case("one_step", 1, seed=2, scan_input_axes=[0, -1]),
        _matrix_case("matrix_state", 6),
    ], opset=16)


def test_scan_symbolic_length_loops_on_the_vm():
    case = _mac_case("c", 3, scan_input_axes=[0, 1], scan_output_directions=[1, 0])
    model = make_model([case], 16, symbolic={"a": ["T", 2], "bt": [2, "T"]})
    mod, _ = relay.frontend.from_onnx(model)
    assert "rnn_loop" in mod.astext()
    rng = np.random.default_rng(3)
    for seq in (1, 4, 9):
        args = [rand(rng, 2), rand(rng, seq, 2), rand(rng, 2, seq)]
        feeds = dict(zip(["c__s0", "c__a", "c__bt"], args))
        compare(f"Scan, {seq} steps", run_vm(model, args), run_ort(model, feeds))


def test_scan_body_reads_the_enclosing_graph():
    body = helper.make_graph([helper.make_node("Mul", ["x", "scale"], ["y"]),
                              helper.make_node("Add", ["s", "y"], ["s_out"])], "b",
                             [_vi("s", [3]), _vi("x", [3])], [_vi("s_out", [3]), _vi("y", [3])])
    nodes = [helper.make_node("Exp", ["k"], ["scale"]),
             helper.make_node("Scan", ["s0", "xs"], ["sf", "ys"], body=body, num_scan_inputs=1)]
    graph = helper.make_graph(nodes, "g", [_vi("k", [3]), _vi("s0", [3]), _vi("xs", ["T", 3])],
                              [_vi("sf"), _vi("ys")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    rng = np.random.default_rng(4)
    args = [rand(rng, 3), rand(rng, 3), rand(rng, 5, 3)]
    compare("Scan with an outer value", run_vm(model, args),
            run_ort(model, dict(zip(["k", "s0", "xs"], args))))


def test_scan8_runs_the_body_per_batch_element():
    """Scan-8: states (batch, ...), scan inputs (batch, seq, ...), sequence_lens absent or
    the full length."""
    rng = np.random.default_rng(5)
    body = _mac_body()
    plain = helper.make_node("Scan", ["", "s0", "a", "b"], ["sf", "y1", "y2"], body=body,
                             num_scan_inputs=2, directions=[0, 1])
    inputs = {"s0": rand(rng, 3, 2), "a": rand(rng, 3, 4, 2), "b": rand(rng, 3, 4, 2)}
    full = helper.make_node("Scan", ["lens", "s0", "a", "b"], ["sf", "y1", "y2"], body=body,
                            num_scan_inputs=2)
    check([OnnxCase("plain", [plain], inputs, ["sf", "y1", "y2"]),
           OnnxCase("full_lens", [full], inputs, ["sf", "y1", "y2"],
                    {"lens": np.array([4, 4, 4], "int64")})], opset=8)


# ---------------------------------------------------------------- errors
def _import(case: OnnxCase, opset: int = 16, symbolic=None):
    return relay.frontend.from_onnx(make_model([case], opset, symbolic=symbolic))


@pytest.mark.parametrize("attrs,error,match", [
    ({"num_scan_inputs": 4}, OpAttributeInvalid,
     r"Scan node 'c__Scan': attribute num_scan_inputs must be between 1 and the 3 input\(s\)"),
    ({"num_scan_inputs": 0}, OpAttributeInvalid, "num_scan_inputs must be between 1"),
    ({"scan_input_axes": [0]}, OpAttributeInvalid,
     r"scan_input_axes must be 2 value\(s\), one per scan input, got \[0\]"),
    ({"scan_input_directions": [0, 2]}, OpAttributeInvalid,
     r"scan_input_directions must be 0 \(forward\) or 1 \(reverse\)"),
    ({"scan_output_axes": [0, 0, 0]}, OpAttributeInvalid,
     r"scan_output_axes must be 2 value\(s\), one per scan output"),
    ({"scan_input_axes": [0, 2]}, FrontendError,
     "scan_input_axes entry 2 is out of range for an input of rank 2"),
])
def test_scan_attribute_errors_name_the_node(attrs, error, match):
    with pytest.raises(error, match=match):
        _import(_mac_case("c", 4, **attrs))


def test_scan_inputs_of_different_lengths_are_refused():
    case = _mac_case("c", 4)
    case.inputs["bt"] = case.inputs["bt"][:2]
    with pytest.raises(FrontendError, match=r"the scan inputs have different lengths \[4, 2\] "
                                            "along their scan axes"):
        _import(case)


def test_scan_body_arity_errors():
    case = _mac_case("c", 4)
    case.nodes[0] = helper.make_node("Scan", ["s0", "a"], ["sf", "y1", "y2"], body=_mac_body(),
                                     num_scan_inputs=1)
    with pytest.raises(FrontendError, match=r"the body has 3 inputs; expected 2 \(1 state"):
        _import(case)


def test_scan8_needs_a_known_batch_and_full_lengths():
    rng = np.random.default_rng(6)
    node = helper.make_node("Scan", ["lens", "s0", "a", "b"], ["sf", "y1", "y2"],
                            body=_mac_body(), num_scan_inputs=2)
    inputs = {"s0": rand(rng, 2, 2), "a": rand(rng, 2, 4, 2), "b": rand(rng, 2, 4, 2)}
    short = OnnxCase("c", [node], inputs, ["sf"], {"lens": np.array([4, 2], "int64")})
    with pytest.raises(OpNotImplemented, match="sequence_lens must be known and equal to the "
                                               "sequence length 4"):
        _import(short, opset=8)
    plain = OnnxCase("c", [helper.make_node("Scan", ["", "s0", "a", "b"], ["sf", "y1", "y2"],
                                            body=_mac_body(), num_scan_inputs=2)], inputs, ["sf"])
    with pytest.raises(OpNotImplemented, match="the batch size .* must be known"):
        _import(plain, opset=8, symbolic={"s0": ["n", 2], "a": ["n", 4, 2], "b": ["n", 4, 2]})


def test_scan_state_that_grows_cannot_loop():
    """ONNX states keep their shape; one that grows is refused when the loop is built."""
    body = helper.make_graph([helper.make_node("Concat", ["s", "x"], ["s_out"], axis=0)], "b",
                             [_vi("s", ["n"]), _vi("x", [1])], [_vi("s_out")])
    case = OnnxCase("c", [helper.make_node("Scan", ["s0", "xs"], ["sf"], body=body,
                                           num_scan_inputs=1)],
                    {"s0": np.zeros(1, "float32"), "xs": np.zeros((3, 1), "float32")}, ["sf"])
    with pytest.raises(OpNotImplemented, match=r"'c__Scan': state 0 changes from Tensor\[\(1\), "
                                               r"float32\] to Tensor\[\(2\), float32\] in a step"):
        _import(case, symbolic={"xs": ["T", 1]})
