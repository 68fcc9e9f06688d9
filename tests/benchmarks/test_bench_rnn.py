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


def test_smoke_run_writes_both_forms(tmp_path, capsys):
    out = tmp_path / "rnn.json"
    cache_before = os.environ.get("EMBER_CACHE_DIR")
    bench_rnn.main(["--seq", "3", "--hidden", "4", "--input", "3", "--batch", "2",
                    "--op", "GRU", "--json", str(out)])
    assert os.environ.get("EMBER_CACHE_DIR") == cache_before  # the cold build's cache undone
    data = json.loads(out.read_text())
    assert (data["hidden"], data["input"], data["batch"]) == (4, 3, 2)
    rows = {r["form"]: r for r in data["results"]}
    assert set(rows) == {"unrolled", "loop"}
    for row in rows.values():
        assert row["op"] == "GRU" and row["seq"] == 3
        assert row["max_abs_diff"] < 1e-5
        assert {"import", "optimize", "lower", "compile", "total", "cpu"} <= set(row["seconds"])
        assert row["ember_ms"] > 0 and row["ort_ms"] > 0
    printed = capsys.readouterr().out
    assert "GRU seq 3" in printed and "unrolled" in printed and "loop" in printed
