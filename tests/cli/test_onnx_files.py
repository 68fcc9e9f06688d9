"""The commands that take a model file, given a bad ONNX file: one error line that names the
file and what is wrong with it, a hint, exit status 1, no traceback; and a model declaring
sizes no machine has is refused before any C is compiled."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _cli_util import call, one_line_error

onnx = pytest.importorskip("onnx")

COMMANDS = ["compile", "inspect", "tune"]


def _relu(path: Path, dims: list[Any]) -> Path:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return path


def _truncated(path: Path) -> Path:
    data = _relu(path, [2, 3]).read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return path


def _bytes(data: bytes) -> Any:
    def write(path: Path) -> Path:
        path.write_bytes(data)
        return path

    return write


BAD = {
    "empty": (_bytes(b""), "empty (0 bytes), not an ONNX model"),
    "text": (_bytes(b"hello\n"), "a text file (starts with 'hello')"),
    "truncated": (_truncated, "truncated: the file ends at byte"),
    "random": (_bytes(bytes(range(255, 0, -1))), "not a readable ONNX model: corrupt at byte"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_file_is_one_line_naming_it(capsys: Any, tmp_path: Path, command: str,
                                          kind: str) -> None:
    make, expected = BAD[kind]
    path = make(tmp_path / "model.onnx")
    code, _, err = call(capsys, command, path)
    assert code == 1
    one_line_error(err, contains=f"FrontendError: {path}: {expected}")
    assert "docs/onnx.md" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_directory_or_a_missing_file(capsys: Any, tmp_path: Path, command: str) -> None:
    (tmp_path / "dir.onnx").mkdir()
    code, _, err = call(capsys, command, tmp_path / "dir.onnx")
    assert code == 1
    one_line_error(err, contains=f"{tmp_path / 'dir.onnx'}: a directory, not a model file")
    code, _, err = call(capsys, command, tmp_path / "gone.onnx")
    assert code == 1
    one_line_error(err, contains=f"{tmp_path / 'gone.onnx'}: no such file")


def test_a_huge_declared_dim_is_refused_before_any_c(capsys: Any, tmp_path: Path) -> None:
    path = _relu(tmp_path / "huge.onnx", [2**40, 3])
    code, out, err = call(capsys, "compile", path, "-o", tmp_path / "huge.so")
    assert code == 1 and not (tmp_path / "huge.so").exists()
    one_line_error(err, contains="TensorTooLargeError: relay.build: input 'x' has shape "
                                 "(1099511627776, 3) of float32: 12.0 TiB")
    assert "--pass-config relay.build.max_tensor_bytes=N" in err


def test_minus_one_dims_are_bound_by_input_shapes(capsys: Any, tmp_path: Path) -> None:
    """A Paddle-style (-1, 3) input: symbolic, and static with --input-shapes (inspect: no C
    compiler needed)."""
    import json

    path = _relu(tmp_path / "paddle.onnx", [-1, 3])
    code, out, err = call(capsys, "inspect", path, "--input-shapes", "x:4x3", "--json")
    assert code == 0, err
    assert json.loads(out)["inputs"][0]["shape"] == [4, 3]
    code, out, err = call(capsys, "inspect", path, "--input-shapes", "x:4x5")
    assert code == 1
    one_line_error(err, contains="shape= gives 'x' the shape (4, 5), but the model declares "
                                 "(?, 3): dimension 1 is 3, not 5")
