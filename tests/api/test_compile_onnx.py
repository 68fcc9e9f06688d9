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

    # ImageDecoder (opset 20) decodes encoded image bytes: outside what a model compiler runs.
    node = helper.make_node("ImageDecoder", ["data"], ["image"], name="decode0")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("data", TensorProto.UINT8, [64])],
        [helper.make_tensor_value_info("image", TensorProto.UINT8, [None, None, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(ember.error.OpNotImplemented, match="ImageDecoder.*decode0"):
        ember.compile(model)


# ---------------------------------------------------------------- model files users bring
def _relu_file(path: Path, dims: list, opset: int = 13) -> Path:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("data, expected", [
    (b"", "empty (0 bytes), not an ONNX model"),
    (b"name: my model\n", "a text file (starts with 'name: my model'), not a binary ONNX model"),
    (b"\x08\x07\x3a\x40\x0a", "truncated: the file ends at byte 5 inside graph, which needs 63 "
                               "more byte(s)"),
])
def test_bad_files_are_named_with_what_is_wrong(tmp_path: Path, data: bytes,
                                                expected: str) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(data)
    with pytest.raises(ember.error.FrontendError) as info:
        ember.compile(path)
    assert str(info.value) == f"{path}: {expected}"


def test_paths_that_are_no_model_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"^missing.onnx: no such file$"):
        ember.compile("missing.onnx")
    (tmp_path / "dir.onnx").mkdir()
    with pytest.raises(IsADirectoryError, match=r"dir.onnx: a directory, not an ONNX model"):
        ember.compile(tmp_path / "dir.onnx")


def test_paddle_dims_are_bound_by_input_shapes(tmp_path: Path) -> None:
    """An input declared (-1, 3, -1, -1): symbolic (the VM), or static with input_shapes."""
    path = _relu_file(tmp_path / "paddle.onnx", [-1, 3, -1, -1])
    x = np.random.default_rng(4).standard_normal((1, 3, 6, 8)).astype("float32")
    assert ember.compile(path).executor == "vm"
    static = ember.compile(path, input_shapes={"x": x.shape})
    assert static.executor == "aot"
    np.testing.assert_array_equal(static(x), np.maximum(x, 0))


def test_a_huge_declared_dim_is_refused_before_the_c_compiler_runs(tmp_path: Path) -> None:
    from ember.relay.backend.pipeline import stage_listener

    path = _relu_file(tmp_path / "huge.onnx", [2**40, 3])
    stages: list[str] = []
    with pytest.raises(ember.error.TensorTooLargeError, match=r"input 'x' has shape "
                                                               r"\(1099511627776, 3\) of "
                                                               r"float32: 12.0 TiB"), \
            stage_listener(lambda name, s: stages.append(name) if s is None else None):
        ember.compile(path)
    assert stages == ["optimize"]


def test_an_opset9_model_with_external_data_compiles(tmp_path: Path) -> None:
    """The one loader reads the weights next to the model; Relu-6 and MatMul-9 import."""
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(5).standard_normal((3, 4)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    want_model = onnx.ModelProto()
    want_model.CopyFrom(model)
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    location="m.weights", size_threshold=0)
    x = np.random.default_rng(6).standard_normal((2, 3)).astype("float32")
    got = ember.compile(tmp_path / "m.onnx")(x)
    np.testing.assert_allclose(got, _reference(want_model, {"x": x})[0], rtol=1e-5, atol=1e-6)
    (tmp_path / "m.weights").unlink()
    with pytest.raises(ember.error.FrontendError, match="initializer 'w': its external data "
                                                        "file 'm.weights'"):
        ember.compile(tmp_path / "m.onnx")


def test_named_symbolic_dims_must_agree_across_inputs(tmp_path) -> None:
    """Axes one dim_param names (``batch``, ``seq``) get one size in a call: a call that gives
    them two is refused before anything runs, naming both inputs, the dimension and the axes;
    the names survive save/load."""
    import onnx
    from onnx import TensorProto, helper

    from ember.api.model import ModelInputError

    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq"]) for n in "abc"]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g", vi[:2], vi[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "add.onnx")
    compiled = ember.compile(tmp_path / "add.onnx")
    assert str(compiled.inputs[0]) == "a: float32[batch, seq]"
    ones = lambda *shape: np.ones(shape, "float32")  # noqa: E731
    np.testing.assert_array_equal(compiled(ones(2, 3), ones(2, 3)), 2 * ones(2, 3))
    compiled.save(tmp_path / "add.so")
    for m in (compiled, ember.load(tmp_path / "add.so")):
        with pytest.raises(ModelInputError, match=r"inputs 'a' and 'b' share dimension 'seq': "
                                                  r"'a' has 3 at axis 1, 'b' has 4 at axis 1"):
            m(ones(2, 3), ones(2, 4))
        with pytest.raises(ModelInputError, match="share dimension 'batch'"):
            m(a=ones(2, 3), b=ones(5, 3))
