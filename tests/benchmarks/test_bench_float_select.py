"""benchmarks/bench_float_select.py: a smoke run on one kernel, its JSON and table, and the
arguments it refuses. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from ember.contrib import cc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_float_select")


@pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
def test_smoke_run_checks_the_kernel_against_numpy(tmp_path, capsys):
    out = tmp_path / "fs.json"
    bench.main(["--kernels", "leaky_relu_1x64x112x112", "--repeat", "1", "--json", str(out)])
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["kernel"] == "leaky_relu_1x64x112x112" and data["repeat"] == 1
    assert row["thread_us"] >= 0 and row["max_abs_diff"] == 0
    assert "leaky_relu_1x64x112x112" in capsys.readouterr().out


def test_unknown_kernel_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown kernel 'relu_typo'"):
        bench.main(["--kernels", "relu_typo", "--json", str(tmp_path / "x.json")])


def test_repeat_below_one_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--repeat", "0", "--json", str(tmp_path / "x.json")])
    assert "--repeat must be at least 1, got 0" in capsys.readouterr().err
