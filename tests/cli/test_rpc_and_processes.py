"""The command as a user runs it, in fresh processes: ``ember rpc-server`` serving ``ember run
--rpc``, the whole compile -> run -> inspect flow on the bundled model, exit codes and
one-line errors; and the RPC front ends' options and help."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _cli_util import call, needs_cc, one_line_error, reference, spawn

import ember


@pytest.fixture
def rpc_server() -> Iterator[int]:
    """``ember rpc-server --port 0`` in its own process group; yields the port it took."""
    proc = subprocess.Popen([sys.executable, "-m", "ember", "rpc-server", "--port", "0",
                             "--silent"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert " listening on 127.0.0.1:" in line, line
        yield int(line.rsplit(":", 1)[1])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@needs_cc
def test_run_through_rpc_server(rpc_server: int, built: dict[str, Path], tmp_path: Path,
                                models: dict[str, Any]) -> None:
    x = np.random.default_rng(5).random((1, 1, 4, 4)).astype("float32")
    np.savez(tmp_path / "in.npz", data=x)
    proc = spawn("run", built["graph"], "--rpc", f"127.0.0.1:{rpc_server}", "--inputs",
                 tmp_path / "in.npz", "--outputs", tmp_path / "out.npz", "--repeat", "3",
                 "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["remote"] == f"127.0.0.1:{rpc_server}" and result["timing"]["repeat"] == 3
    got = np.load(tmp_path / "out.npz")["output0"]
    np.testing.assert_array_equal(got, ember.load(built["graph"])(x))
    np.testing.assert_allclose(got, reference(models["small_workload"], x), rtol=1e-5,
                               atol=1e-6)


@needs_cc
def test_bundled_model_compile_run_inspect(models: dict[str, Any], tmp_path: Path) -> None:
    """The demo's MLP through the three commands, each a fresh interpreter."""
    compiled = spawn("compile", models["mlp"], "-o", "mlp.so", cwd=tmp_path)
    assert compiled.returncode == 0 and compiled.stderr == "", compiled.stderr
    assert "10 operators -> 5 fused calls, 4 distinct kernels" in compiled.stdout
    x = np.random.default_rng(6).random((1, 1, 28, 28)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    ran = spawn("run", "mlp.so", "--inputs", "x.npy", "--outputs", "y.npz", "--print-top", "3",
                cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    want = reference(models["mlp_workload"], x)
    np.testing.assert_allclose(np.load(tmp_path / "y.npz")["output0"], want, rtol=1e-5,
                               atol=1e-6)
    best = int(np.argmax(want))
    assert f"   1  {best:>5}" in ran.stdout
    inspected = spawn("inspect", "mlp.so", "--json", cwd=tmp_path)
    assert json.loads(inspected.stdout)["inputs"][0]["shape"] == [1, 1, 28, 28]


@needs_cc
def test_running_a_library_loads_no_compiler(built: dict[str, Path]) -> None:
    probe = (f"import sys; from ember.cli import main; main(['run', {str(built['aot'])!r}]); "
             "print(sorted(m for m in sys.modules if m.startswith(('ember.relay', 'ember.ir', "
             "'ember.te', 'ember.tir', 'ember.topi'))))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"


def test_errors_in_a_fresh_process(tmp_path: Path) -> None:
    missing = spawn("compile", "missing.onnx", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stdout == ""
    one_line_error(missing.stderr, contains="missing.onnx: no such file")
    unknown = spawn("frobnicate")
    assert unknown.returncode == 2 and "invalid choice: 'frobnicate'" in unknown.stderr
    assert spawn("--help").returncode == 0


def test_output_into_a_closed_pipe(models: dict[str, Any]) -> None:
    """`ember inspect ... --ir | head`: a reader that stops early ends ember quietly (here
    `true`, which reads nothing and is gone long before ember writes)."""
    command = f"{sys.executable} -m ember inspect {models['small']} --ir | true"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_rpc_front_ends_have_the_same_options_and_examples(capsys: Any) -> None:
    code, out, _ = call(capsys, "rpc-server", "--help")
    assert code == 0 and out.startswith("usage: ember rpc-server")
    for option in ("--host", "--port", "--key", "--tracker", "--secret-file", "--stdio"):
        assert option in out
    assert "examples:" in out and "ember run model.so --rpc HOST:9091" in out
    code, out, _ = call(capsys, "rpc-tracker", "--help")
    assert code == 0 and out.startswith("usage: ember rpc-tracker") and "examples:" in out


def test_rpc_server_option_errors(capsys: Any) -> None:
    code, out, err = call(capsys, "rpc-server", "--max-sessions", "0")
    assert code == 1 and "--max-sessions 0: at least 1" in out + err
    code, _, err = call(capsys, "rpc-tracker", "--bogus")
    assert code == 2 and "unrecognized arguments: --bogus" in err


@pytest.mark.parametrize("command", ["demo", "compile", "run", "inspect", "rpc-server",
                                     "rpc-tracker", "version"])
def test_every_command_has_help_with_examples(capsys: Any, command: str) -> None:
    code, out, _ = call(capsys, command, "--help")
    assert code == 0 and f"ember {command}" in out and "example" in out


def test_version_and_no_command(capsys: Any) -> None:
    assert call(capsys, "version")[1] == f"ember {ember.__version__}\n"
    code, out, _ = call(capsys)
    assert code == 2 and "examples:" in out
