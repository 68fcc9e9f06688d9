"""Model files as users bring them: empty, text, other formats, truncated, bit-flipped, a
directory, a missing path, external data (missing, short, escaping its folder), and the
dimensions exporters write (-1, other negatives, 0, none, no shape at all, 2**40). Each gives
a correct import or one error whose first line starts with the file's path and says what is
wrong; never protobuf's DecodeError, never a crash."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from _onnx_util import graph_model, run_graph, run_ort, run_vm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.runtime.errors import (
    FrontendError,
    InternalError,
    OpNotImplemented,
    TensorTooLargeError,
)


def _weighted_model() -> Any:
    """x[2, 3] @ w[3, 4] + b -> leaky relu -> reshape to (4, 2) -> transpose -> cast -> + a
    Constant node: weights, a shape, and attributes of every common kind (int, float, ints,
    tensor)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.random((3, 4)).astype("float32"), "w"),
             numpy_helper.from_array(rng.random(4).astype("float32"), "b"),
             numpy_helper.from_array(np.array([4, 2], "int64"), "shape")]
    one = numpy_helper.from_array(np.array([[0.5], [2.0]], "float32"), "one")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("LeakyRelu", ["a"], ["r"], name="relu", alpha=0.1),
             helper.make_node("Reshape", ["r", "shape"], ["rs"], name="rs"),
             helper.make_node("Transpose", ["rs"], ["t"], name="tr", perm=[1, 0]),
             helper.make_node("Cast", ["t"], ["c"], name="cast", to=TP.FLOAT),
             helper.make_node("Constant", [], ["k"], name="k", value=one),
             helper.make_node("Mul", ["c", "k"], ["y"], name="scale")]
    return graph_model(nodes, inits=inits)


def _relu(dims: Any) -> Any:
    return graph_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                       inputs=[helper.make_tensor_value_info("x", TP.FLOAT, dims)])


def _first_line_names(err: BaseException, path: Path | str) -> str:
    """The first line of ``err``'s message, which must start with ``path``."""
    msg = str(err)
    first = msg.splitlines()[0]
    assert first.startswith(str(path)), msg
    assert "DecodeError" not in msg and "Wire format" not in msg, msg
    return first


# ---------------------------------------------------------------- unreadable files
BAD_FILES = {
    "empty.onnx": (b"", "empty (0 bytes), not an ONNX model"),
    "notes.onnx": (b"# my model\nlayers: 3\n", "a text file (starts with '# my model"),
    "proto.onnx": (b'ir_version: 8\ngraph {\n  node { op_type: "Relu" }\n}\n',
                   "protobuf text format: convert it with onnx.save(onnx.load(path, "
                   "format='textproto')"),
    "lib.onnx": (b"\x7fELF\x02\x01\x01" + bytes(64), "an ELF binary"),
    "weights.onnx": (b"PK\x03\x04" + bytes(40), "a ZIP archive"),
    "random.onnx": (np.random.default_rng(1).bytes(300), "not a readable ONNX model"),
    "junk.onnx": (b"\x00\xffnot a model at all\x13\x37" * 5, "not a readable ONNX model"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_files_that_are_no_onnx_model_say_what_they_are(tmp_path: Path, name: str) -> None:
    data, expected = BAD_FILES[name]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(FrontendError) as info:
        relay.frontend.from_onnx(str(path))
    assert isinstance(info.value, ValueError)
    assert expected in _first_line_names(info.value, path)
    assert "\n" not in str(info.value)


def test_truncated_files_say_where_they_end(tmp_path: Path) -> None:
    data = _weighted_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    for cut in (1, 2, 10, len(data) // 3, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(FrontendError) as info:
            relay.frontend.from_onnx(path)
        first = _first_line_names(info.value, path)
        assert "truncated" in first, first


def test_every_truncation_imports_or_gives_one_named_error(tmp_path: Path) -> None:
    """A cut on a field boundary may still parse into a smaller model; any other cut is
    refused, naming the file."""
    data = _weighted_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    for cut in range(0, len(data)):
        path.write_bytes(data[:cut])
        try:
            relay.frontend.from_onnx(str(path))
        except ember.TVMError as err:
            _first_line_names(err, path)


def _import_flipped(path: Path, data: bytes, bit: int) -> None:
    flipped = bytearray(data)
    flipped[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(flipped))
    try:
        relay.frontend.from_onnx(str(path))
    except ember.TVMError as err:  # FrontendError, OpNotImplemented, TypeInferenceError...
        assert not isinstance(err, InternalError), err
        _first_line_names(err, path)


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bit=st.integers(0, 8 * len(_weighted_model().SerializeToString()) - 1))
def test_bit_flips_import_or_give_one_named_error(tmp_path: Path, bit: int) -> None:
    _import_flipped(tmp_path / "flipped.onnx", _weighted_model().SerializeToString(), bit)


@pytest.mark.slow
def test_every_bit_flip_imports_or_gives_one_named_error(tmp_path: Path) -> None:
    data = _weighted_model().SerializeToString()
    for bit in range(8 * len(data)):
        _import_flipped(tmp_path / "flipped.onnx", data, bit)


def test_paths_that_are_not_model_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing.onnx: no such file$"):
        relay.frontend.from_onnx(str(tmp_path / "missing.onnx"))
    folder = tmp_path / "model.onnx"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match=r"model.onnx: a directory, not an ONNX model "
                                                "file$"):
        relay.frontend.from_onnx(folder)
    with pytest.raises(TypeError, match="expected an onnx.ModelProto, a path to a .onnx file "
                                        "or its bytes, got int"):
        relay.frontend.from_onnx(42)


def test_model_bytes_are_read_like_a_file() -> None:
    data = _weighted_model().SerializeToString()
    mod, _ = relay.frontend.from_onnx(data)
    assert "nn.leaky_relu" in relay.analysis.list_op_freqs(mod)
    with pytest.raises(FrontendError, match="^the model bytes: truncated"):
        relay.frontend.from_onnx(data[:len(data) // 2])


def test_import_errors_of_a_file_start_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_relu([2, 3]), path)
    with pytest.raises(FrontendError, match=f"^{path}: shape= names 'img'"):
        relay.frontend.from_onnx(str(path), shape={"img": (2, 3)})
    onnx.save(graph_model([helper.make_node("StringNormalizer", ["x"], ["y"], name="sn")]), path)
    with pytest.raises(OpNotImplemented, match=rf"^{path}: 1 node\(s\) use operators"):
        relay.frontend.from_onnx(str(path))


# ---------------------------------------------------------------- external data
def _save_external(model: Any, folder: Path) -> Path:
    folder.mkdir()
    onnx.save_model(model, str(folder / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    return folder / "m.onnx"


def test_external_data_loads_from_the_models_folder(tmp_path: Path) -> None:
    path = _save_external(_weighted_model(), tmp_path / "ext")  # (moves its data out)
    x = np.random.default_rng(2).random((2, 3)).astype("float32")
    want = run_ort(_weighted_model(), {"x": x})[0]
    np.testing.assert_allclose(run_graph(str(path), {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def test_missing_short_or_escaping_external_data_is_named(tmp_path: Path) -> None:
    path = _save_external(_weighted_model(), tmp_path / "ext")
    weights = path.parent / "weights.bin"
    full = weights.read_bytes()
    weights.unlink()
    with pytest.raises(FrontendError, match=rf"^{path}: initializer 'w': its external data "
                                            rf"file 'weights.bin' \({weights}\) is missing"):
        relay.frontend.from_onnx(str(path))
    weights.write_bytes(full[:20])
    with pytest.raises(FrontendError, match=rf"^{path}: initializer '\w+': cannot read its "
                                            "external data from 'weights.bin'"):
        relay.frontend.from_onnx(str(path))
    proto = onnx.load(str(path), load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../../../etc/passwd"
    onnx.save(proto, str(path))
    with pytest.raises(FrontendError, match=rf"^{path}: initializer 'w': "):
        relay.frontend.from_onnx(str(path))


def test_a_proto_whose_external_data_was_not_loaded_names_the_initializer(
        tmp_path: Path) -> None:
    path = _save_external(_weighted_model(), tmp_path / "ext")
    proto = onnx.load(str(path), load_external_data=False)
    with pytest.raises(FrontendError, match=r"initializer 'w': the data is stored in an "
                                            r"external file \(weights.bin\)"):
        relay.frontend.from_onnx(proto)


# ---------------------------------------------------------------- declared dimensions
@pytest.mark.parametrize("dim", [-1, -5, 0, None, "batch"])
def test_unknown_input_dims_are_symbolic_and_shape_binds_them(dim: Any) -> None:
    """dim_value -1 (Paddle), other negatives, 0, no value and a dim_param are symbolic
    (onnxruntime treats negative sizes as unknown too); shape= binds them by input name."""
    model = _relu([dim, 3])
    mod, _ = relay.frontend.from_onnx(model)
    assert str(mod["main"].params[0].type_annotation) == "Tensor[(?, 3), float32]"
    mod, _ = relay.frontend.from_onnx(model, shape={"x": (5, 3)})
    assert mod["main"].params[0].type_annotation.shape == (5, 3)
    declared = "batch" if dim == "batch" else r"\?"
    with pytest.raises(FrontendError, match=rf"shape= gives 'x' the shape \(5, 4\), but the "
                                            rf"model declares \({declared}, 3\): dimension 1 "
                                            "is 3, not 4"):
        relay.frontend.from_onnx(model, shape={"x": (5, 4)})


def test_paddle_style_dims_match_onnxruntime() -> None:
    """(-1, 3, -1, -1), as Paddle exports it: bound with shape= (graph executor) and left
    symbolic (VM)."""
    model = _relu([-1, 3, -1, -1])
    x = np.random.default_rng(3).standard_normal((1, 3, 48, 192)).astype("float32")
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_array_equal(run_graph(model, {"x": x}, shape={"x": x.shape})[0], want)
    np.testing.assert_array_equal(run_vm(model, [x])[0], want)


def test_an_input_without_a_shape_is_named_and_shape_gives_it() -> None:
    model = _relu(None)
    with pytest.raises(FrontendError, match=r"graph input 'x' has no shape in the model \(not "
                                            r"even a rank\); give it with shape=\{'x': "):
        relay.frontend.from_onnx(model)
    mod, _ = relay.frontend.from_onnx(model, shape={"x": (2, None)})
    assert str(mod["main"].params[0].type_annotation) == "Tensor[(2, ?), float32]"


def test_a_huge_declared_dim_imports_and_the_build_refuses_it(tmp_path: Path) -> None:
    """2**40 rows import (the IR holds any size); the build refuses them before generating
    any code, naming the input, its shape and the bytes it would need."""
    path = tmp_path / "huge.onnx"
    onnx.save(_relu([2**40, 3]), path)
    mod, params = relay.frontend.from_onnx(str(path))
    with pytest.raises(TensorTooLargeError, match=r"input 'x' has shape \(1099511627776, 3\) "
                                                  r"of float32: 12.0 TiB \(13194139533312 "
                                                  r"bytes\), more than the"):
        relay.build(mod, "llvm", params=params)
