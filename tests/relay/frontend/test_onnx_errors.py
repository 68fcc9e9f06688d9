"""Bad models give one clear exception that names what is wrong and where (node name and op
type, input or initializer); nothing crashes or recurses with the size of the model."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import run_graph
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.runtime.errors import (
    FrontendError,
    OpAttributeRequired,
    OpAttributeUnImplemented,
    OpNotImplemented,
    TypeInferenceError,
)


def _model(nodes, inputs=None, outputs=("y",), inits=(), opset=13, domains=()):
    inputs = inputs if inputs is not None else [
        helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])]
    outs = [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outputs]
    graph = helper.make_graph(nodes, "g", inputs, outs, list(inits))
    imports = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, 1) for d in domains]]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = min(model.ir_version, 10)
    return model


def _relu_model():
    return _model([helper.make_node("Relu", ["x"], ["y"], name="r")])


def test_unsupported_ops_are_listed_once_with_their_nodes():
    sub = helper.make_graph([helper.make_node("Unique", ["x"], ["u"], name="in_branch")],
                            "b", [], [helper.make_tensor_value_info("u", TP.FLOAT, None)])
    nodes = [helper.make_node("NonZero", ["x"], ["a"], name="nz1"),
             helper.make_node("NonZero", ["x"], ["b"], name="nz2"),
             helper.make_node("FusedMatMul", ["x", "x"], ["c"], name="fm", domain="com.microsoft"),
             helper.make_node("LayerNormalization", ["x", "x"], ["d"], name="ln"),
             helper.make_node("If", ["cond"], ["e"], name="if", then_branch=sub, else_branch=sub),
             helper.make_node("Relu", ["x"], ["y"], name="fine")]
    model = _model(nodes, domains=["com.microsoft"], inits=[
        numpy_helper.from_array(np.array(True), "cond")])
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_onnx(model)
    msg = str(info.value)
    assert isinstance(info.value, NotImplementedError)
    assert "4 operator type(s)" in msg
    assert "NonZero (not supported): nodes 'nz1', 'nz2'" in msg
    assert "com.microsoft.FusedMatMul (not supported): node 'fm'" in msg
    assert "LayerNormalization (supported for opsets 17 to 21, the model uses 13): node 'ln'" \
        in msg
    assert "Unique (not supported): node 'in_branch'" in msg
    assert "Relu" not in msg


@pytest.mark.parametrize("opset", [9, 22])
def test_opset_out_of_range(opset):
    model = _model([helper.make_node("Relu", ["x"], ["y"])], opset=opset)
    with pytest.raises(OpNotImplemented, match=f"ONNX opset {opset} .* ember imports opsets 11 "
                                               "to 21"):
        relay.frontend.from_onnx(model)
    mod, _ = relay.frontend.from_onnx(model, opset=13)  # override
    assert "nn.relu" in relay.analysis.list_op_freqs(mod)


def test_malformed_and_truncated_files(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\xffnot a model at all\x13\x37" * 5)
    with pytest.raises(FrontendError, match="junk.onnx.*(not a readable ONNX model|not an "
                                            "ONNX model)"):
        relay.frontend.from_onnx(str(junk))
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(FrontendError, match="not an ONNX model"):
        relay.frontend.from_onnx(str(empty))
    with pytest.raises(FileNotFoundError, match="no such file"):
        relay.frontend.from_onnx(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError, match="expected an onnx.ModelProto or a path"):
        relay.frontend.from_onnx(42)


def test_every_truncation_gives_a_clear_error(tmp_path):
    """Cut a model with weights at many points: each cut is either refused with an ember
    error or (cut on a field boundary) imports consistently; never another exception."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.random((3, 3)).astype("float32"), "w")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                    helper.make_node("Relu", ["m"], ["y"], name="r")], inits=[w])
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    for cut in range(1, len(data), max(1, len(data) // 40)):
        path.write_bytes(data[:cut])
        try:
            relay.frontend.from_onnx(str(path))
        except (FrontendError, OpNotImplemented, OpAttributeRequired, TypeInferenceError) as err:
            assert str(err)
        # a cut on a field boundary may still parse into a smaller, valid model


def test_initializer_size_contradicts_dims():
    bad = numpy_helper.from_array(np.zeros(6, "float32"), "w")
    bad.dims[:] = [4, 3]
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[bad])
    with pytest.raises(FrontendError, match=r"initializer 'w': dims \[4, 3\] need 12 "
                                            r"element\(s\) of float32, but the tensor holds 6"):
        relay.frontend.from_onnx(model)


def test_shape_argument_errors():
    model = _relu_model()
    with pytest.raises(FrontendError, match=r"shape= names 'img', which is not an input of the "
                                            r"model; its inputs are 'x'"):
        relay.frontend.from_onnx(model, shape={"img": (2, 3)})
    with pytest.raises(FrontendError, match=r"'x' the shape \(2, 4\).*declares \(2, 3\): "
                                            "dimension 1 is 3, not 4"):
        relay.frontend.from_onnx(model, shape={"x": (2, 4)})
    with pytest.raises(FrontendError, match=r"gives 'x' rank 3 .* declares rank 2"):
        relay.frontend.from_onnx(model, shape={"x": (2, 3, 1)})
    with pytest.raises(FrontendError, match="-1 is not a size"):
        relay.frontend.from_onnx(model, shape={"x": (-1, 3)})


def test_undefined_input_element_type():
    model = _model([helper.make_node("Relu", ["x"], ["y"])],
                   inputs=[helper.make_tensor_value_info("x", TP.UNDEFINED, [2])])
    with pytest.raises(FrontendError, match="graph input 'x' has an undefined element type"):
        relay.frontend.from_onnx(model)
    mod, _ = relay.frontend.from_onnx(model, dtype={"x": "float32"})
    assert mod["main"].params[0].type_annotation.dtype == "float32"
    strings = _model([helper.make_node("Identity", ["x"], ["y"])],
                     inputs=[helper.make_tensor_value_info("x", TP.STRING, [2])])
    with pytest.raises(FrontendError, match="graph input 'x' has element type STRING"):
        relay.frontend.from_onnx(strings)


def test_missing_required_input_and_attribute():
    model = _model([helper.make_node("Gemm", ["x"], ["y"], name="fc")])
    with pytest.raises(FrontendError, match=r"Gemm node 'fc': input 1 \(B\) is required"):
        relay.frontend.from_onnx(model)
    model = _model([helper.make_node("Concat", ["x", "x"], ["y"], name="cat")])
    with pytest.raises(OpAttributeRequired, match="Concat node 'cat': attribute axis is "
                                                  "required"):
        relay.frontend.from_onnx(model)
    model = _model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")])
    with pytest.raises(FrontendError, match="Relu node 'r': input 'nowhere' is not defined"):
        relay.frontend.from_onnx(model)


def test_type_errors_and_unsupported_values_name_the_node():
    model = _model([helper.make_node("Add", ["x", "w"], ["y"], name="plus")],
                   inits=[numpy_helper.from_array(np.zeros(4, "float32"), "w")])
    with pytest.raises(TypeInferenceError, match="Add node 'plus': add: cannot broadcast"):
        relay.frontend.from_onnx(model)
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                   inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("s", TP.INT64, [2])])
    with pytest.raises(OpNotImplemented, match=r"Reshape node 'rs': input 1 \(shape\) must be "
                                               "known when importing"):
        relay.frontend.from_onnx(model)
    model = _model([helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode="wrap")],
                   inits=[numpy_helper.from_array(np.zeros(4, "int64"), "p")], opset=19)
    with pytest.raises(OpAttributeUnImplemented, match="Pad node 'pad': attribute mode='wrap'"):
        relay.frontend.from_onnx(model)


def test_cycle_is_reported():
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Relu", ["x"], ["y"], name="out")]
    with pytest.raises(FrontendError, match="cycle: nodes 'first', 'second'"):
        relay.frontend.from_onnx(_model(nodes))


def test_nodes_out_of_order_are_sorted():
    nodes = [helper.make_node("Relu", ["m"], ["y"]), helper.make_node("Neg", ["x"], ["m"])]
    x = np.array([[1, -2, 3], [-4, 5, -6]], "float32")
    np.testing.assert_array_equal(run_graph(_model(nodes), {"x": x})[0], np.maximum(-x, 0))


def _chain(n):
    nodes = [helper.make_node("Relu" if k % 2 else "Add",
                              [f"v{k - 1}" if k else "x"] + ([] if k % 2 else ["c"]), [f"v{k}"])
             for k in range(n)]
    nodes[-1].output[0] = "y"
    return _model(nodes, inits=[numpy_helper.from_array(np.array(-0.25, "float32"), "c")])


def _chain_check(n):
    model = _chain(n)
    mod, params = relay.frontend.from_onnx(model)
    assert sum(relay.analysis.list_op_freqs(mod).values()) == n
    # FuseOps' default bound: groups of 256 ops lower to 256-deep expressions (iteratively).
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params)
    gm = factory["default"](ember.cpu(0))
    x = np.array([[1e3, 2, 3], [-1, 0, 5e3]], "float32")
    gm.set_input("x", x)
    gm.run()
    want = x.copy()
    for _ in range(n // 2):
        want = np.maximum(want - 0.25, 0)
    np.testing.assert_allclose(gm.get_output(0).numpy(), want, rtol=1e-5)


def test_a_10000_node_chain_imports():
    mod, _ = relay.frontend.from_onnx(_chain(10_000))
    assert sum(relay.analysis.list_op_freqs(mod).values()) == 10_000


def test_a_long_chain_builds():
    _chain_check(600)


@pytest.mark.slow
def test_a_10000_node_chain_builds():
    _chain_check(10_000)
