"""benchmarks/bench_work_split.py: a smoke run on the zoo's smallest model (its table, JSON,
a simulated thread count) and its argument checks. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_work_split")


def test_smoke_run_on_mlp(tmp_path, capsys):
    from ember.contrib import cc

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    out = tmp_path / "split.json"
    assert bench.main(["--models", "mlp", "--threads", "1", "3", "--real-up-to", "2",
                       "--repeat", "1", "--top", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "3 (sim)" in printed and "small split" in printed
    data = json.loads(out.read_text())
    one, three = data["models"]["mlp"]["1"]["totals"], data["models"]["mlp"]["3"]["totals"]
    assert not one["simulated"] and three["simulated"]
    assert one["serial"] == 1.0 and one["imbalance"] == 1.0  # one thread: all of it serial
    assert 0 < three["efficiency"] <= 1.0 and three["small_launched"] >= 0
    # the CPU against the one-thread run of the same graph, per model and per kernel
    assert one["vs_one"] == 1.0 and three["vs_one"] > 0 and "x 1t" in printed
    growth = data["models"]["mlp"]["3"]["growth"]
    assert growth and all(g["added_us"] == g["cpu_us"] - g["cpu_us_1t"] for g in growth)
    # stolen tasks are counted for real launches only (none at 1 thread, 3 is simulated)
    assert one["stolen"] is None or one["stolen"] == 0.0
    assert three["stolen"] is None and "stolen" in printed


def test_versus_one_needs_the_same_graph():
    assert bench.versus_one(None, [("k", 1.0)]) == (None, [])
    assert bench.versus_one([("k", 1.0)], [("k", 1.0), ("j", 2.0)]) == (None, [])
    ratio, growth = bench.versus_one([("a", 2.0), ("b", 2.0)], [("a", 2.5), ("b", 3.5)])
    assert ratio == 1.5 and [g["kernel"] for g in growth] == ["b", "a"]


def test_pool_counters_are_five_numbers():
    stats = bench.pool_stats()
    assert len(stats) == 5 and all(v >= 0 for v in stats)


@pytest.mark.parametrize("argv", [["--threads", "0"], ["--repeat", "0"], ["--top", "-1"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert "must be >= 1" in capsys.readouterr().err
