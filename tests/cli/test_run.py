"""``ember run``: outputs against Python's and the reference interpreter, inputs from files and
random ones (seeded), top classes, timing, profiles, JSON, and the errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _cli_util import call, needs_cc, one_line_error, reference

import ember

pytestmark = needs_cc
X = np.random.default_rng(2).random((1, 1, 4, 4)).astype("float32")


@pytest.mark.parametrize("executor", ["aot", "graph", "vm"])
def test_outputs_match_python_and_the_interpreter(capsys: Any, built: dict[str, Path],
                                                  models: dict[str, Any], tmp_path: Path,
                                                  executor: str) -> None:
    np.savez(tmp_path / "in.npz", data=X)
    code, out, err = call(capsys, "run", built[executor], "--inputs", tmp_path / "in.npz",
                          "--outputs", tmp_path / "out.npz")
    assert code == 0 and err == "", err
    got = np.load(tmp_path / "out.npz")["output0"]
    np.testing.assert_array_equal(got, ember.load(built[executor])(X))
    np.testing.assert_allclose(got, reference(models["small_workload"], X), rtol=1e-5, atol=1e-6)
    assert f"outputs saved to {tmp_path / 'out.npz'}" in out and "output0  float32" in out


def test_random_inputs_are_seeded(capsys: Any, built: dict[str, Path]) -> None:
    runs = [json.loads(call(capsys, "run", built["aot"], "--json", "--seed", seed)[1])
            for seed in ("3", "3", "4")]
    assert runs[0]["inputs"] == "random inputs (seed 3)"
    assert runs[0]["outputs"] == runs[1]["outputs"] != runs[2]["outputs"]
    x = np.random.default_rng(3).random((1, 1, 4, 4)).astype("float32")
    want = ember.load(built["aot"])(x)
    assert runs[0]["outputs"][0]["max"] == pytest.approx(float(want.max()))


def test_print_top_and_timing_json(capsys: Any, built: dict[str, Path], tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", X)  # .npy: the one input
    code, out, _ = call(capsys, "run", built["graph"], "--inputs", tmp_path / "x.npy",
                        "--print-top", "3", "--repeat", "4", "--number", "2", "--json")
    assert code == 0
    result = json.loads(out)
    scores = ember.load(built["graph"])(X)[0]
    assert [i for i, _ in result["top"][0]] == list(np.argsort(-scores)[:3])
    t = result["timing"]
    assert (t["repeat"], t["number"]) == (4, 2)
    assert 0 < t["min_s"] <= t["median_s"] <= t["p90_s"]
    assert t["throughput_per_s"] == pytest.approx(1 / t["median_s"])


def test_text_output(capsys: Any, built: dict[str, Path]) -> None:
    code, out, _ = call(capsys, "run", built["aot"], "--print-top", "2", "--repeat", "3",
                        "--threads", "1")
    assert code == 0
    assert out.startswith(f"ember run: {built['aot']} (aot, 1 thread(s)), random inputs")
    assert "top 2 of output0" in out and "timing (3 x 1 runs): median" in out


@pytest.mark.parametrize("executor", ["graph", "vm"])
def test_profile(capsys: Any, built: dict[str, Path], executor: str) -> None:
    code, out, _ = call(capsys, "run", built[executor], "--profile", "--json")
    assert code == 0
    rows = json.loads(out)["profile"]
    kernels = ember.load(built[executor]).info["kernels"]
    assert {r["name"] for r in rows} >= set(kernels)
    assert sum(r["share"] for r in rows) == pytest.approx(100.0)
    assert [r["time_us"] for r in rows] == sorted((r["time_us"] for r in rows), reverse=True)


def test_profile_shows_the_work_split_of_a_graph_model(capsys: Any,
                                                       built: dict[str, Path]) -> None:
    code, out, _ = call(capsys, "run", built["graph"], "--profile", "--threads", "2", "--json")
    assert code == 0
    rows = json.loads(out)["profile"]
    assert all(r["imbalance"] >= 1.0 and 0.0 <= r["serial"] <= 1.0 for r in rows)
    code, out, _ = call(capsys, "run", built["graph"], "--profile", "--threads", "2")
    assert code == 0 and "imbalance  serial" in out


def test_profile_of_aot_says_what_to_do(capsys: Any, built: dict[str, Path]) -> None:
    code, _, err = call(capsys, "run", built["aot"], "--profile")
    assert code == 1 and "--executor graph" in err
    one_line_error(err, contains="AOT model's calls are compiled into one C function")


def test_plain_exported_factory(capsys: Any, models: dict[str, Any], tmp_path: Path) -> None:
    """A library from relay.build + export_library (no ember record) runs too."""
    from ember import relay

    mod, params = models["small_workload"]
    relay.build(mod, "llvm", params=params).export_library(tmp_path / "plain.so")
    np.savez(tmp_path / "in.npz", data=X)
    code, out, _ = call(capsys, "run", tmp_path / "plain.so", "--inputs", tmp_path / "in.npz",
                        "--json")
    assert code == 0
    result = json.loads(out)
    assert result["executor"] == "graph"
    want = reference(models["small_workload"], X)
    assert result["outputs"][0]["max"] == pytest.approx(float(want.max()), rel=1e-5)


@pytest.mark.parametrize("argv, code, message", [
    (["{aot}", "--inputs", "{tmp}/none.npz"], 1, "none.npz: no such file"),
    (["{aot}", "--inputs", "{tmp}/two.npz"], 1, "unknown 'other'"),
    (["{aot}", "--inputs", "{tmp}/f64.npz"], 1, "input 'data': expected float32[1, 1, 4, 4]"),
    (["{aot}", "--rpc", "localhost"], 2, "expected HOST:PORT"),
    (["{aot}", "--rpc", "localhost:1", "--profile"], 2, "apply to local runs"),
    (["{relay}"], 2, "not a compiled model"),
    (["{tmp}/gone.so"], 1, "gone.so: no such file"),
    (["{aot}", "--number", "0"], 2, "--number: must be at least 1"),
    (["{aot}", "--outputs", "{tmp}/out.bin"], 2, "the outputs are saved as .npz"),
])
def test_errors(capsys: Any, built: dict[str, Path], models: dict[str, Any], tmp_path: Path,
                argv: list[str], code: int, message: str) -> None:
    np.savez(tmp_path / "two.npz", data=X, other=X)
    np.savez(tmp_path / "f64.npz", data=X.astype("float64"))
    argv = [a.format(aot=built["aot"], tmp=tmp_path, relay=models["small"]) for a in argv]
    got, _, err = call(capsys, "run", *argv)
    assert got == code, err
    one_line_error(err, contains=message)


def test_error_with_json_prints_a_json_error(capsys: Any, tmp_path: Path) -> None:
    code, out, _ = call(capsys, "run", tmp_path / "gone.so", "--json")
    assert code == 1 and json.loads(out)["error"].endswith("gone.so: no such file")


def test_corrupt_library(capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "junk.so").write_bytes(b"not a library at all")
    code, _, err = call(capsys, "run", tmp_path / "junk.so")
    assert code == 1
    one_line_error(err, contains="ArtifactError")
