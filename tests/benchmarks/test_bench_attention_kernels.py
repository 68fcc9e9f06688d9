"""benchmarks/bench_attention_kernels.py: a smoke run against this checkout as its own
baseline, its JSON and table, and the refusals. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
bench = importlib.import_module("bench_attention_kernels")


def test_smoke_run_against_a_baseline(tmp_path, capsys):
    from ember.contrib import cc

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    out = tmp_path / "attn.json"
    assert bench.main(["--rounds", "1", "--reps", "1", "--baseline", str(ROOT),
                       "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["clock"] == "thread_time" and data["baseline"] == str(ROOT)
    cases = set(data["best_us"]["ember"])
    assert {"gemm_197x192x768_gelu_erf", "softmax_3x197x197"} <= cases
    assert set(data["best_us"]["baseline"]) == cases
    assert all(us > 0 for us in data["best_us"]["ember"].values())
    assert "ember/baseline" in capsys.readouterr().out


def test_bad_arguments_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--baseline", str(tmp_path)])
    assert f"--baseline {tmp_path}: no ember/include/ember/kernels/gemm.h there" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    assert "--rounds and --reps must be >= 1, got 0, 40" in capsys.readouterr().err
