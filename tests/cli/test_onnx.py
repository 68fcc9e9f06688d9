"""The commands on ONNX models: a zoo twin checked against onnxruntime (in fresh processes),
symbolic input shapes fixed with --input-shapes or left to the VM, unsupported operators."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _cli_util import call, needs_cc, one_line_error, spawn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytestmark = needs_cc


def _relu_model(path: Path, op: str = "Relu", batch: Any = "N") -> Path:
    """y = op(x) with x of shape (batch, 4)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                               helper.make_node(op, ["r"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_zoo_twin_against_onnxruntime(tmp_path: Path) -> None:
    from ember.relay.testing import onnx_twin

    model, _, _ = onnx_twin("mlp", batch_size=1)
    onnx.save(model, tmp_path / "mlp.onnx")
    x = np.random.default_rng(7).random((1, 1, 28, 28), dtype="float32")
    np.savez(tmp_path / "in.npz", data=x)
    compiled = spawn("compile", "mlp.onnx", "-o", "mlp.so", cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    assert "ember compile: mlp.onnx -> mlp.so" in compiled.stdout
    ran = spawn("run", "mlp.so", "--inputs", "in.npz", "--outputs", "out.npz", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"data": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], want, rtol=1e-5,
                               atol=1e-6)
    inspected = spawn("inspect", "mlp.onnx", "--json", cwd=tmp_path)
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["inputs"][0] == {"name": "data",
                                                        "shape": [1, 1, 28, 28],
                                                        "dtype": "float32"}


def test_tune_on_a_conv_zoo_twin_then_compile_matches_onnxruntime(tmp_path: Path) -> None:
    """ember tune on the ONNX twin of dscnn writes records for its convs; a compile that reads
    them still agrees with onnxruntime."""
    from ember.relay.testing import onnx_twin

    model, _, _ = onnx_twin("dscnn", batch_size=1)
    onnx.save(model, tmp_path / "dscnn.onnx")
    env = {"EMBER_TUNING_RECORDS": str(tmp_path / "tiles.json")}
    tuned = spawn("tune", "dscnn.onnx", "--budget", "2", "--threads", "1", "--json",
                  cwd=tmp_path, env=env)
    assert tuned.returncode == 0, tuned.stderr
    kernels = {row["kernel"] for row in json.loads(tuned.stdout)["kernels"]}
    assert {"conv2d_nchwc", "depthwise_nchwc"} <= kernels
    x = np.random.default_rng(3).random((1, 1, 49, 10), dtype="float32")
    np.savez(tmp_path / "in.npz", data=x)
    compiled = spawn("compile", "dscnn.onnx", "--threads", "1", "-o", "dscnn.so", cwd=tmp_path,
                     env=env)
    assert compiled.returncode == 0, compiled.stderr
    ran = spawn("run", "dscnn.so", "--inputs", "in.npz", "--outputs", "out.npz", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"data": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], want, rtol=1e-4,
                               atol=1e-5)


def test_symbolic_batch(capsys: Any, tmp_path: Path) -> None:
    model = _relu_model(tmp_path / "relu.onnx", op="Sigmoid")
    x = np.linspace(-2, 2, 12, dtype="float32").reshape(3, 4)
    np.savez(tmp_path / "x.npz", x=x)
    want = 1 / (1 + np.exp(-np.maximum(x, 0)))
    # fixed by --input-shapes: AOT
    code, out, err = call(capsys, "compile", model, "--input-shapes", "x:3x4", "-o",
                          tmp_path / "fixed.so")
    assert code == 0 and "executor  aot" in out, err
    # left symbolic: the VM, which needs the inputs given
    code, out, err = call(capsys, "compile", model, "-o", tmp_path / "dyn.so")
    assert code == 0, err
    assert "executor  vm (input %x has type Tensor[(?, 4), float32])" in out
    assert "memory    not a static graph: allocated at run time" in out
    assert "1 distinct kernels (+1 shape functions)" in out
    for name in ("fixed.so", "dyn.so"):
        code, out, err = call(capsys, "run", tmp_path / name, "--inputs", tmp_path / "x.npz",
                              "--outputs", tmp_path / "y.npz")
        assert code == 0, err
        np.testing.assert_allclose(np.load(tmp_path / "y.npz")["output0"], want, rtol=1e-5)
    code, _, err = call(capsys, "run", tmp_path / "dyn.so")
    assert code == 1
    one_line_error(err, contains="input 'x' has no static shape")


@pytest.mark.parametrize("command", ["compile", "inspect"])
def test_unsupported_operator(capsys: Any, tmp_path: Path, command: str) -> None:
    model = _relu_model(tmp_path / "sn.onnx", op="StringNormalizer", batch=1)
    code, _, err = call(capsys, command, model)
    assert code == 1 and "docs/onnx_support.md" in err
    one_line_error(err, contains=f"OpNotImplemented: {model}: 1 node(s) use operators")
    assert "StringNormalizer-10 (not supported)" in err


def test_input_shapes_naming_no_input(capsys: Any, tmp_path: Path) -> None:
    model = _relu_model(tmp_path / "relu.onnx")
    code, _, err = call(capsys, "compile", model, "--input-shapes", "img:1x4")
    assert code == 1
    one_line_error(err, contains="'img', which is not an input of the model")
