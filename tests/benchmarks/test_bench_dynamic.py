"""benchmarks/bench_dynamic.py: the twins it makes (symbolic input, reshapes that follow it),
a smoke run and its JSON. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
bench = importlib.import_module("bench_dynamic")


@pytest.mark.parametrize("src, dst, want", [
    ((1, 16, 32), (1, 16, 2, 16), [0, 0, 2, -1]),
    ((1, 2, 16, 16), (2, 16, 16), [-3, -2]),
    ((2, 16, 16), (1, 2, 16, 16), [-4, -1, 2, -2]),
    ((1, 16, 2, 16), (1, 16, 32), [0, 0, -1]),
])
def test_reshapes_follow_the_leading_dimensions(src, dst, want):
    assert bench._newshape(src, dst) == want


def test_a_reshape_with_no_symbolic_form_is_named():
    with pytest.raises(ValueError, match=r"no symbolic form for reshape \(4, 6\) -> \(3, 8\)"):
        bench._newshape((4, 6), (3, 8))


def test_smoke_run_checks_every_twin_against_its_static_build(tmp_path, capsys):
    out = tmp_path / "dynamic.json"
    code = bench.main(["--models", "mlp,transformer", "--threads", "1", "--min-time", "0.01",
                       "--rounds", "1", "--unseen", "2", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["model"] for r in rows} == {"mlp", "transformer"}
    assert len(rows) == 6 and all(r["correct"] for r in rows)
    assert all(r["static_ms"] > 0 and r["dynamic_ms"] > 0 and r["unseen_ms"] > 0 for r in rows)
    printed = capsys.readouterr().out
    assert "WRONG" not in printed and "u.ratio" in printed


@pytest.mark.parametrize("args, message", [
    (["--models", "alexnet"], "unknown twins"),
    (["--threads", "0"], "--threads"),
    (["--threads", "one"], "--threads"),
])
def test_bad_arguments_are_named(args, message, capsys):
    with pytest.raises(SystemExit):
        bench.main(args)
    assert message in capsys.readouterr().err
