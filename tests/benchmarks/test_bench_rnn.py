"""benchmarks/bench_rnn.py: a smoke run on a tiny LSTM of each form, its JSON and table.
Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench_rnn = importlib.import_module("bench_rnn")


def test_smoke_run_writes_each_form(tmp_path, capsys):
    out = tmp_path / "rnn.json"
    cache_before = os.environ.get("EMBER_CACHE_DIR")
    bench_rnn.main(["--seq", "3", "--hidden", "4", "--input", "3", "--batch", "2",
                    "--op", "GRU", "--forms", "kernel,loop", "--json", str(out)])
    assert os.environ.get("EMBER_CACHE_DIR") == cache_before  # the cold build's cache undone
    data = json.loads(out.read_text())
    assert (data["hidden"], data["input"], data["batch"]) == (4, 3, 2)
    rows = {r["form"]: r for r in data["results"]}
    assert set(rows) == {"kernel", "loop"}
    for row in rows.values():
        assert row["op"] == "GRU" and row["seq"] == 3
        assert row["max_abs_diff"] < 1e-5
        assert {"import", "optimize", "lower", "compile", "total", "cpu"} <= set(row["seconds"])
        assert row["ember_ms"] > 0 and row["ort_ms"] > 0
        assert row["ratio"] == row["ember_ms"] / row["ort_ms"]
    printed = capsys.readouterr().out
    assert "GRU seq 3" in printed and "kernel" in printed and "loop" in printed


def test_unknown_forms_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench_rnn.main(["--forms", "kernel,fast"])
    assert "unknown form(s) fast; choose from kernel, kernel_vm, unrolled, loop" in \
        capsys.readouterr().err
