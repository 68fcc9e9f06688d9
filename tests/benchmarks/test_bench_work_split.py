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


@pytest.mark.parametrize("argv", [["--threads", "0"], ["--repeat", "0"], ["--top", "-1"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert "must be >= 1" in capsys.readouterr().err
