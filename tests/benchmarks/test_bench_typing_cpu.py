"""benchmarks/bench_typing_cpu.py: its InferType timer (fast), a bad case name, and (slow) a
smoke run with its JSON. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from ember import relay
from ember.ir import IRModule
from ember.relay.transform import InferType, type_infer

pytest.importorskip("onnx")  # the ONNX cases build ONNX twins

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_typing_cpu")


def test_timer_counts_runs_then_restores():
    before = type_infer.InferType.transform_module
    x = relay.var("x", shape=(2,))
    with bench._InferTimer() as timer:
        InferType()(InferType()(IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))))
    assert timer.runs == 2 and timer.seconds >= 0
    assert type_infer.InferType.transform_module is before


def test_an_unknown_case_is_named(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--models", "lstm_vm,resnet1000"])
    assert "resnet1000" in capsys.readouterr().err


@pytest.mark.slow
def test_smoke_run_writes_json_and_table(tmp_path, capsys):
    out = tmp_path / "typing.json"
    assert bench.main(["--models", "lstm_vm", "--json", str(out)]) == 0
    row = json.loads(out.read_text())["lstm_vm"]
    assert row["infer_type_runs"] > 0 and row["build_cpu_s"] >= row["infer_type_cpu_s"] >= 0
    assert "lstm_vm" in capsys.readouterr().out
