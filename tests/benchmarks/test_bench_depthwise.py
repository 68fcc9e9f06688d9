"""benchmarks/bench_depthwise.py: a quick run's table and JSON (each kernel timed, against a
baseline checkout: this one), and a refused baseline. Nothing here asserts on a measured
time."""
from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
bench = importlib.import_module("bench_depthwise")
pytestmark = pytest.mark.skipif(not any(map(shutil.which, ("cc", "gcc", "clang"))),
                                reason="needs a C compiler")


def test_quick_run_times_each_kernel_and_writes_json(tmp_path, capsys):
    out = tmp_path / "dw.json"
    assert bench.main(["--quick", "--baseline", str(ROOT), "--json", str(out)]) == 0
    cases = json.loads(out.read_text())["cases"]
    assert [c["case"].split()[0] for c in cases] == ["dw", "layout"]
    assert all(c["us"] > 0 and c["baseline_us"] > 0 for c in cases)
    assert cases[0]["gmacs"] > 0 and "GMAC/s" in capsys.readouterr().out


def test_a_baseline_that_is_no_checkout_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--baseline", str(tmp_path), "--json", str(tmp_path / "x")])
    assert "not an ember checkout" in capsys.readouterr().err
