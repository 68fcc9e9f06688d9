"""benchmarks/bench_fused_attention.py: a smoke run (a tiny case, one round: two small builds)
and the refusals. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
bench = importlib.import_module("bench_fused_attention")


def test_smoke_run(capsys):
    from ember.contrib import cc

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    result = bench.main(["--only", "tiny", "--rounds", "1", "--min-time", "0.0001"])
    assert set(result) == {"tiny"} and all(t > 0 for t in result["tiny"])
    assert "2x2x9x8" in capsys.readouterr().out


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--only", "nope"])
    assert "unknown cases ['nope']" in capsys.readouterr().err
