"""benchmarks/bench_infer_type.py: its counter (fast) and (slow) a smoke run on a tiny model
with its JSON. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from ember import relay
from ember.ir import IRModule
from ember.relay.transform import InferType, type_infer

pytest.importorskip("onnx")  # benchmarks/_models.py builds ONNX twins

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_infer_type")


def _twice() -> None:
    x = relay.var("x", shape=(2,))
    InferType()(InferType()(IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))))


@pytest.mark.parametrize("reuse, checks", [(True, 1), (False, 2)])
def test_counter_counts_runs_and_checks_then_restores(reuse, checks):
    before = (type_infer.InferType.transform_module, type_infer._records)
    with bench._Counter(reuse) as counter:
        _twice()
    assert (counter.runs, counter.checks) == (2, checks)
    assert (type_infer.InferType.transform_module, type_infer._records) == before


@pytest.mark.slow
def test_smoke_run_writes_json_and_table(tmp_path, capsys):
    out = tmp_path / "infer.json"
    assert bench.main(["--models", "mlp", "--repeat", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["mode"] for r in rows] == ["re-check", "reuse"]
    assert rows[0]["checks"] == rows[0]["runs"] > rows[1]["checks"]
    assert "same" in capsys.readouterr().out
