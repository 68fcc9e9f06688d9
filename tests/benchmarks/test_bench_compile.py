"""benchmarks/bench_compile.py: its table from a build report, and (slow) a smoke run on a
tiny model with its JSON. Nothing here asserts on a measured time."""
from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

from ember.contrib import cc

pytest.importorskip("onnx")  # benchmarks/_models.py builds ONNX twins

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench_compile = importlib.import_module("bench_compile")


def _build() -> dict:
    steps = (cc.CompileStep("kernel_ember_sgemm.c", 2.5, False),
             cc.CompileStep("lib0_lib_0.c", 0.4, False), cc.CompileStep("backend.c", 0.0, True))
    report = cc.BuildReport("x.so", steps, 2.6, 0.05)
    return {"wall_s": 3.0, "cpu_s": 3.5, "py_cpu_s": 1.0, "cc_cpu_s": 2.5, "stages": {"optimize": 0.3, "lower": 0.2},
            "cc": bench_compile._cc_summary([report])}


def test_rows_count_units_kernels_and_cached_objects():
    summary = _build()["cc"]
    assert (summary["units_compiled"], summary["kernels_compiled"], summary["cached"]) == (1, 1, 1)
    assert summary["slowest"] == "kernel_ember_sgemm.c 2.50s" and summary["link_s"] == 0.05
    rows = bench_compile.rows({"m": {k: _build() for k in ("empty", "cold", "warm")}})
    assert [r[0] for r in rows] == ["m empty", "m cold", "m warm"]
    assert rows[0][3:5] == [1.0, 2.5]  # python and C compiler CPU seconds
    assert len(rows[0]) == len(bench_compile.HEADS)


def test_object_cpu_compiles_each_prefetched_object_alone(tmp_path):
    from ember.contrib import cc
    from ember.tir.kernel_objects import object_source

    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    folder = tmp_path / "prefetch" / "0123"
    folder.mkdir(parents=True)
    (folder / "kernel_ember_softmax.c").write_text(
        object_source("ember/kernels/softmax.h", "ember_softmax"))
    (folder / "lib0_lib_0.c").write_text("int not_a_kernel_object;\n")
    seconds = bench_compile.object_cpu(str(tmp_path))
    assert list(seconds) == ["kernel_ember_softmax.c"] and seconds["kernel_ember_softmax.c"] > 0


@pytest.mark.slow
def test_smoke_run_writes_json_and_table(tmp_path, capsys):
    out = tmp_path / "compile.json"
    cache_before = os.environ.get("EMBER_CACHE_DIR")
    assert bench_compile.main(["--models", "mlp", "--small", "--executor", "aot", "--json",
                               str(out), "--objects"]) == 0
    assert os.environ.get("EMBER_CACHE_DIR") == cache_before
    data = json.loads(out.read_text())
    builds = data["models"]["mlp"]
    assert data["executor"] == "aot" and builds["empty"]["cc_cpu_s"] > 0
    assert set(builds) == {"empty", "cold", "warm", "objects_cpu_s"}
    assert builds["objects_cpu_s"] and all(s > 0 for s in builds["objects_cpu_s"].values())
    assert builds["empty"]["cc"]["kernels_compiled"] >= 1  # an empty cache: kernels compile
    assert builds["cold"]["cc"]["kernels_compiled"] == 0  # a new model: kernels are cached
    assert builds["cold"]["cc"]["units_compiled"] >= 1
    assert builds["warm"]["cc"]["units_compiled"] == 0
    assert "mlp cold" in capsys.readouterr().out
