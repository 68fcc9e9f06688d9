"""Bad models give one clear exception that names what is wrong and where (node name and op
type, input or initializer); nothing crashes or recurses with the size of the model."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import graph_model, run_graph
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.runtime.errors import (
    FrontendError,
    OpAttributeInvalid,
    OpAttributeRequired,
    OpAttributeUnImplemented,
    OpNotImplemented,
    TypeInferenceError,
)


_model = graph_model


def _relu_model():
    return _model([helper.make_node("Relu", ["x"], ["y"], name="r")])


def test_unsupported_ops_are_listed_once_with_their_nodes():
    sub = helper.make_graph([helper.make_node("StringNormalizer", ["x"], ["u"],
                                              name="in_branch")],
                            "b", [], [helper.make_tensor_value_info("u", TP.FLOAT, None)])
    nodes = [helper.make_node("StringNormalizer", ["x"], ["a"], name="sl1"),
             helper.make_node("StringNormalizer", ["x"], ["b"], name="sl2"),
             helper.make_node("BiasSoftmax", ["x", "x"], ["c"], name="bs", domain="com.microsoft"),
             helper.make_node("Foo", ["x"], ["f"], name="foo", domain="com.example"),
             helper.make_node("GroupNormalization", ["x", "x", "x"], ["d"], name="gn"),
             helper.make_node("If", ["cond"], ["e"], name="if", then_branch=sub, else_branch=sub),
             helper.make_node("Relu", ["x"], ["y"], name="fine")]
    model = _model(nodes, domains=["com.microsoft", "com.example"], inits=[
        numpy_helper.from_array(np.array(True), "cond")])
    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_onnx(model)
    msg = str(info.value)
    assert isinstance(info.value, NotImplementedError)
    assert msg.startswith("6 node(s) use operators that ember cannot import (model opset 13;")
    assert "StringNormalizer-10 (not supported): nodes 'sl1', 'sl2', 'in_branch'" in msg
    assert "com.microsoft.BiasSoftmax (not supported): node 'bs'" in msg
    assert "com.example.Foo (custom domain 'com.example': ember imports the default ONNX " \
        "domain and com.microsoft): node 'foo'" in msg
    assert "GroupNormalization (not defined at opset 13 (ONNX defines it from opset 18)): " \
        "node 'gn'" in msg
    assert "Relu" not in msg


def test_operators_missing_at_the_models_opset_make_a_malformed_model():
    """Operators that do not exist at the declared opset (not yet, deprecated, or no ONNX
    operator at all) are the model's fault: FrontendError, every node listed."""
    nodes = [helper.make_node("Gelu", ["x"], ["a"], name="g"),
             helper.make_node("Upsample", ["x"], ["b"], name="up", scales=[1.0, 2.0]),
             helper.make_node("Rleu", ["x"], ["y"], name="typo")]
    with pytest.raises(FrontendError) as info:
        relay.frontend.from_onnx(_model(nodes, opset=10))
    msg = str(info.value)
    assert "3 node(s)" in msg
    assert "Gelu (not defined at opset 10 (ONNX defines it from opset 20)): node 'g'" in msg
    assert "Upsample (deprecated since opset 10, so not defined at opset 10): node 'up'" in msg
    assert "Rleu (not an operator of the default ONNX domain): node 'typo'" in msg


@pytest.mark.parametrize("opset", [1, 9, 22, 28])
def test_every_opset_imports_operators_unchanged_since(opset):
    if opset > relay.frontend.onnx.newest_opset():
        pytest.skip(f"the installed onnx package defines opsets up to "
                    f"{relay.frontend.onnx.newest_opset()}")
    model = _model([helper.make_node("Relu", ["x"], ["y"])], opset=opset)
    mod, _ = relay.frontend.from_onnx(model)
    assert "nn.relu" in relay.analysis.list_op_freqs(mod)


def test_opset_beyond_the_installed_onnx_and_below_1():
    newest = relay.frontend.onnx.newest_opset()
    model = _model([helper.make_node("Relu", ["x"], ["y"])], opset=newest + 1)
    with pytest.raises(OpNotImplemented, match=f"ONNX opset {newest + 1} .* newer than the "
                                               f"installed onnx package .* defines \\({newest}\\): "
                                               f"upgrade onnx, or pass opset={newest}"):
        relay.frontend.from_onnx(model)
    mod, _ = relay.frontend.from_onnx(model, opset=newest)  # override
    assert "nn.relu" in relay.analysis.list_op_freqs(mod)
    with pytest.raises(FrontendError, match="opset 0 .* is not an ONNX opset"):
        relay.frontend.from_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], opset=0))
    with pytest.raises(TypeError, match="opset must be an int, got '13'"):
        relay.frontend.from_onnx(model, opset="13")


def test_a_model_without_a_default_opset_is_named():
    model = _relu_model()
    del model.opset_import[:]
    with pytest.raises(FrontendError, match="declares no opset for the default ONNX domain"):
        relay.frontend.from_onnx(model)
    mod, _ = relay.frontend.from_onnx(model, opset=13)
    assert "nn.relu" in relay.analysis.list_op_freqs(mod)


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


def test_attributes_of_the_wrong_type_are_named():
    """The type each attribute has in the node's operator version (onnx.defs) is checked; an
    int where a float is defined reads as that float."""
    bad = helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha="0.1")
    with pytest.raises(OpAttributeInvalid, match="LeakyRelu node 'lr': attribute alpha must be "
                                                 "of type FLOAT, got STRING"):
        relay.frontend.from_onnx(_model([bad]))
    widened = helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=1)
    x = np.array([[1, -2, 3], [-4, 5, -6]], "float32")
    np.testing.assert_array_equal(run_graph(_model([widened]), {"x": x})[0], x)


def test_type_errors_and_unsupported_values_name_the_node():
    model = _model([helper.make_node("Add", ["x", "w"], ["y"], name="plus")],
                   inits=[numpy_helper.from_array(np.zeros(4, "float32"), "w")])
    with pytest.raises(TypeInferenceError, match="Add node 'plus': add: cannot broadcast"):
        relay.frontend.from_onnx(model)
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                   inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("s", TP.INT64, ["n"])])
    with pytest.raises(TypeInferenceError, match=r"Reshape node 'rs': dyn.reshape: newshape "
                                                 "must have a static length"):
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
