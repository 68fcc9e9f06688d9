"""benchmarks/bench_thread_time.py: a smoke run on a small zoo model, its JSON and table.
Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_thread_time")


def test_smoke_run_writes_each_model(tmp_path, capsys):
    out = tmp_path / "tt.json"
    bench.main(["mlp", "--small", "--rounds", "2", "--repeat", "1", "--warmup", "0",
                "--json", str(out)])
    data = json.loads(out.read_text())
    assert data["clock"] == "thread_time" and data["threads"] == 1
    (row,) = data["models"]
    assert row["model"] == "mlp" and row["calls"] == 2
    assert row["ember_ms"] >= 0 and row["ort_ms"] >= 0 and row["max_abs_diff"] < 1e-4
    assert "mlp" in capsys.readouterr().out


def test_unknown_model_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown model 'no_such_net'"):
        bench.main(["no_such_net", "--json", str(tmp_path / "x.json")])
