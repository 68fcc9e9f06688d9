"""``ember compile``: every executor and output kind, the summary, the saved build record, the
flags that change the build (opt level, pass config, threads), progress, and the errors."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _cli_util import call, needs_cc, one_line_error, reference

import ember

pytestmark = needs_cc
X = np.random.default_rng(1).random((1, 1, 4, 4)).astype("float32")


def test_summary_and_record(built: dict[str, Path], models: dict[str, Any]) -> None:
    model = ember.load(built["aot"])
    info = model.info
    assert model.executor == "aot" and model.threads == 1
    assert info["source"] == "small.relay" and info["ops"] == 10 and info["calls"] == 5
    plan = info["memory"]
    meta = model.factory.get_model_metadata().memory
    assert (plan["planned_bytes"], plan["lower_bound"]) == (meta["planned_bytes"],
                                                            meta["lower_bound"])
    # Intermediates are written by the GEMMs (bias and ReLU in their epilogues).
    assert {b[0] for b in plan["buffers"]} <= {"fused_nn_contrib_gemm"}
    np.testing.assert_allclose(model(X), reference(models["small_workload"], X),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("executor", ["graph", "vm"])
def test_every_executor_matches_the_interpreter(built: dict[str, Path], models: dict[str, Any],
                                                executor: str) -> None:
    model = ember.load(built[executor])
    assert model.executor == executor
    np.testing.assert_allclose(model(X), reference(models["small_workload"], X),
                               rtol=1e-5, atol=1e-6)


def test_summary_lines(capsys: Any, models: dict[str, Any], tmp_path: Path) -> None:
    out_path = tmp_path / "net.so"
    code, out, err = call(capsys, "compile", models["small"], "-o", out_path, "--executor",
                          "graph", "--opt-level", "0")
    assert code == 0 and err == ""  # not a terminal: no progress line
    lines = out.splitlines()
    assert lines[0] == f"ember compile: small.relay -> {out_path}"
    assert "graph (requested)" in lines[1]
    assert "10 operators -> 10 fused calls" in out  # opt level 0 fuses nothing
    assert "for intermediates" in out and "lower bound" in out or "at the lower bound" in out
    assert f"{out_path} (" in out and "KiB)" in out
    c_line = next(line for line in lines if line.startswith("  C "))  # the C compiler's report
    assert "library cached" in c_line or ("compiled" in c_line and "link" in c_line)


def test_pass_config_changes_the_build(capsys: Any, models: dict[str, Any],
                                       tmp_path: Path) -> None:
    code, out, _ = call(capsys, "compile", models["small"], "-o", tmp_path / "d.so",
                        "--pass-config", "relay.FuseOps.max_depth=1")
    assert code == 0 and "10 operators -> 10 fused calls" in out  # nothing fused
    assert ember.load(tmp_path / "d.so").info["pass_config"] == {
        "relay.FuseOps.max_depth": 1}


def test_progress_line_on_a_terminal(capsys: Any, models: dict[str, Any], tmp_path: Path,
                                     monkeypatch: Any) -> None:
    monkeypatch.setenv("EMBER_PROGRESS", "1")
    code, _, err = call(capsys, "compile", models["small"], "-o", tmp_path / "p.so")
    assert code == 0
    stages = [s.split("]")[0] + "]" for s in err.split("\r\x1b[K") if s.startswith("[")]
    assert stages[0] == "[1/6]" and "[5/6]" in stages and "[6/6]" in stages
    assert "importing small.relay" in err and "compiling C" in err and "(FuseOps)" in err
    assert err.endswith("\r\x1b[K")  # the line is cleared before the summary


def test_model_library_format(capsys: Any, models: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "fw.tar"
    code, text, _ = call(capsys, "compile", models["small"], "--executor", "aot", "--runtime",
                         "crt", "--interface-api", "c", "-o", out)
    assert code == 0, text
    with tarfile.open(out) as tar:
        names = tar.getnames()
        meta = json.load(tar.extractfile("metadata.json"))  # type: ignore[arg-type]
    assert "codegen/host/include/tvmgen_default.h" in names
    assert meta["modules"]["default"]["executors"] == ["aot"]


def test_c_source_and_header(capsys: Any, models: dict[str, Any], tmp_path: Path) -> None:
    code, text, _ = call(capsys, "compile", models["small"], "--executor", "aot",
                         "--link-params", "-o", tmp_path / "m.c")
    assert code == 0, text
    source = (tmp_path / "m.c").read_text()
    assert "tvmgen_default_run_model" in source and "tvmgen_default_fused_nn_softmax" in source
    assert "TVMGEN_DEFAULT_WORKSPACE_SIZE" in (tmp_path / "tvmgen_default.h").read_text()
    assert not (tmp_path / "m.params").exists()  # linked into the code


def test_graph_object_with_system_lib(capsys: Any, models: dict[str, Any],
                                      tmp_path: Path) -> None:
    code, text, _ = call(capsys, "compile", models["small"], "--executor", "graph",
                         "--system-lib", "-o", tmp_path / "g.o")
    assert code == 0, text
    assert (tmp_path / "g.o").read_bytes()[:4] == b"\x7fELF"
    graph = json.loads((tmp_path / "g.json").read_text())
    assert graph["heads"] and (tmp_path / "g.params").stat().st_size > 0
    assert "g.json" in text and "g.params" in text


@pytest.mark.parametrize("argv, code, message", [
    (["missing.relay"], 1, "missing.relay: no such file"),
    (["model.pb"], 2, "not a model file"),
    (["{small}", "--input-shapes", "data:1xax4"], 2, "'1xax4' is not a shape"),
    (["{small}", "--input-shapes", "1x2"], 2, "has no NAME:"),
    (["{small}", "--pass-config", "relay.Nope=1"], 2, "unknown key 'relay.Nope'"),
    (["{small}", "--pass-config", "relay.FuseOps.max_depth=deep"], 2, "expected an integer"),
    (["{small}", "--executor", "aot", "--interface-api", "c"], 2, "needs --runtime crt"),
    (["{small}", "--executor", "vm", "--link-params"], 2, "--link-params"),
    (["{small}", "--executor", "graph", "--interface-api", "c"], 2, "applies to the AOT"),
    (["{small}", "-o", "out.exe"], 2, "unknown output type '.exe'"),
    (["{small}", "--executor", "vm", "-o", "{tmp}/v.tar"], 1, "the VM's bytecode"),
    (["{small}", "--threads", "0"], 2, "--threads: must be at least 1"),
    (["{small}", "--input-shapes", "data:1x16"], 2, "--input-shapes applies to ONNX"),
    (["{bad}"], 1, "bad.relay:1:49: expected ')'"),
])
def test_errors(capsys: Any, models: dict[str, Any], tmp_path: Path, argv: list[str],
                code: int, message: str) -> None:
    bad = tmp_path / "bad.relay"
    bad.write_text("def @main(%x: Tensor[(2), float32]) { nn.relu(%x; }")
    argv = [a.format(small=models["small"], tmp=tmp_path, bad=bad) for a in argv]
    got, _, err = call(capsys, "compile", *argv)
    assert got == code
    one_line_error(err, contains=message)


def test_unknown_option_is_a_usage_error(capsys: Any, models: dict[str, Any]) -> None:
    code, _, err = call(capsys, "compile", models["small"], "--frobnicate")
    assert code == 2
    one_line_error(err, contains="unrecognized arguments: --frobnicate")


def test_verbose_prints_the_traceback(capsys: Any) -> None:
    code, _, err = call(capsys, "compile", "missing.relay", "--verbose")
    assert code == 1 and "Traceback" in err and "missing.relay: no such file" in err


def test_help_shows_examples(capsys: Any) -> None:
    code, out, _ = call(capsys, "compile", "--help")
    assert code == 0 and "examples:" in out and "--input-shapes" in out and ".tar" in out


def test_desired_layout(capsys: Any, tmp_path: Path) -> None:
    """--desired-layout NCHW keeps plain convs; NCHW4c plans 4-lane blocks; same results."""
    from ember import relay

    rng = np.random.default_rng(3)
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.const(rng.uniform(-1, 1, (8, 3, 3, 3)).astype("float32"))
    mod = ember.IRModule.from_expr(relay.Function([x], relay.nn.relu(
        relay.nn.conv2d(x, w, padding=(1, 1)))))
    (tmp_path / "conv.relay").write_text(mod.astext(show_meta_data=True))
    image = rng.random((1, 3, 8, 8)).astype("float32")
    want = reference((mod, {}), image)
    kernels = {}
    for layout in ("NCHW", "NCHW4c"):
        out = tmp_path / f"{layout}.so"
        code, _, _ = call(capsys, "compile", tmp_path / "conv.relay", "-o", out,
                          "--desired-layout", layout)
        assert code == 0
        model = ember.load(out)
        kernels[layout] = " ".join(model.info["kernels"])
        np.testing.assert_allclose(model(image), want, rtol=1e-5, atol=1e-5)
    assert "NCHWc" not in kernels["NCHW"] and "NCHWc" in kernels["NCHW4c"]
    code, _, err = call(capsys, "compile", tmp_path / "conv.relay", "--desired-layout", "NHWC")
    assert code == 2 and "invalid choice" in err


def _lstm_onnx(path: Path) -> Path:
    """A one-node ONNX LSTM (3 steps, batch 1, input 2, hidden 4)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(s).astype("float32"), n)
               for n, s in (("W", (1, 16, 2)), ("R", (1, 16, 4)))]
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=4)], "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1, 1, 4])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    (path / "lstm.onnx").write_bytes(model.SerializeToString())
    return path / "lstm.onnx"


def test_pass_config_reaches_the_importer(capsys: Any, tmp_path: Path) -> None:
    """relay.frontend.* keys are read while the ONNX file is imported: with the recurrent
    kernel off, the LSTM imports step by step (many operators instead of one)."""
    pytest.importorskip("onnx")
    model = _lstm_onnx(tmp_path)
    counts = []
    for extra in ([], ["--pass-config", "relay.frontend.rnn_kernel=false"]):
        code, out, _ = call(capsys, "compile", model, "-o", tmp_path / "l.so",
                            "--executor", "graph", *extra)
        assert code == 0, out
        counts.append(int(out.split(" operators ->")[0].split()[-1]))
    assert counts[0] < 5 < counts[1], counts
