"""``ember.compile`` on real ONNX files through the real importer, checked against onnxruntime:
a zoo twin (static: AOT chosen), the same twin with a symbolic batch axis (VM chosen, then made
static with ``input_shapes``), and save/load of the compiled ONNX model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ember
from ember.testing import find_c_compiler

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")


def _twin(name: str, **kwargs):
    from ember.relay.testing import onnx_twin

    return onnx_twin(name, **kwargs)[0]


def _reference(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _symbolic_batch(model):
    """The same model with the first axis of every graph input and output named ``batch``."""
    dynamic = onnx.ModelProto()
    dynamic.CopyFrom(model)
    for value in list(dynamic.graph.input) + list(dynamic.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    return dynamic


def test_static_twin_builds_aot_and_matches_onnxruntime(tmp_path: Path) -> None:
    model = _twin("resnet8")
    name = model.graph.input[0].name
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 32, 32)).astype("float32")
    path = tmp_path / "resnet8.onnx"
    onnx.save(model, str(path))
    compiled = ember.compile(str(path))
    assert compiled.executor == "aot"
    assert [i.name for i in compiled.inputs] == [name]
    want = _reference(model, {name: x})[0]
    np.testing.assert_allclose(compiled(x), want, rtol=1e-4, atol=1e-5)
    compiled.save(tmp_path / "resnet8.so")
    np.testing.assert_allclose(ember.load(tmp_path / "resnet8.so")(x), want, rtol=1e-4,
                               atol=1e-5)


def test_symbolic_batch_picks_the_vm_and_input_shapes_make_it_static() -> None:
    model = _symbolic_batch(_twin("mlp", num_classes=4, image_shape=(1, 4, 4)))
    name = model.graph.input[0].name
    rng = np.random.default_rng(1)
    dynamic = ember.compile(model)
    assert dynamic.executor == "vm"
    for batch in (1, 3):
        x = rng.uniform(-1, 1, (batch, 1, 4, 4)).astype("float32")
        np.testing.assert_allclose(dynamic(x), _reference(model, {name: x})[0], rtol=1e-4,
                                   atol=1e-5)
    static = ember.compile(model, input_shapes={name: (2, 1, 4, 4)})
    assert static.executor == "aot"
    x = rng.uniform(-1, 1, (2, 1, 4, 4)).astype("float32")
    np.testing.assert_allclose(static(x), _reference(model, {name: x})[0], rtol=1e-4, atol=1e-5)


def test_unsupported_onnx_op_is_named() -> None:
    from onnx import TensorProto, helper

    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["sel"], name="nms0")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
                      helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4])],
        [helper.make_tensor_value_info("sel", TensorProto.INT64, [None, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ember.error.OpNotImplemented, match="NonMaxSuppression.*nms0"):
        ember.compile(model)
