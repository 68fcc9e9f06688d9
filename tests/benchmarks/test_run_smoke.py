"""benchmarks/run.py: a smoke run on the MLP, its JSON, the output check, the FLOP counter and
the interleaving order. Nothing here asserts on a measured time."""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import relay

pytest.importorskip("onnxruntime")
pytest.importorskip("threadpoolctl")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
run = importlib.import_module("run")
_flops = importlib.import_module("_flops")
_report = importlib.import_module("_report")
_systems = importlib.import_module("_systems")
_timing = importlib.import_module("_timing")


def test_quick_run_on_mlp_writes_checked_results(tmp_path, capsys):
    out = tmp_path / "out.json"
    cache_before = os.environ.get("EMBER_CACHE_DIR")
    code = run.main(["--models", "mlp", "--threads", "1", "--executors", "graph,vm",
                     "--min-time", "0.02", "--rounds", "2", "--peak-size", "64",
                     "--json", str(out)])
    assert code == 0
    assert os.environ.get("EMBER_CACHE_DIR") == cache_before  # the cold build's cache undone
    data = json.loads(out.read_text())
    assert data["config"]["source"] == "onnx"
    assert data["tolerance"] == {"rtol": 1e-3, "atol": 1e-4}
    assert set(data["environment"]) >= {"cpu", "simd", "versions", "peak"}
    assert data["environment"]["simd"]["features"]
    (model,) = data["models"]
    assert model["name"] == "mlp" and model["flops"] == model["flops_by_op"]["nn.dense"] > 0
    assert model["errors"] == {}
    rows = {(r["system"], r["threads"]): r for r in model["results"]}
    assert set(rows) == {("onnxruntime", 1), ("graph", 1), ("vm", 1)}
    for key in ("graph", "vm"):
        row = rows[key, 1]
        assert row["agree"] is True and row["max_abs_diff"] < 1e-4
        assert len(row["round_medians_ms"]) == 2 and row["samples"] >= 2
        assert {"median_ms", "p10_ms", "p90_ms", "ratio_vs_ort", "gflops",
                "peak_share"} <= set(row)
    assert rows["onnxruntime", 1]["ratio_vs_ort"] == 1.0
    assert set(model["build"]) == {"graph", "vm", "onnxruntime"}
    assert model["build"]["graph"]["cache"] == "cold"
    printed = capsys.readouterr().out
    assert f"ember source: {data['config']['source']}" in printed
    assert "MISMATCH" not in printed and "ok" in printed


def test_agreement_flags_values_shapes_and_counts():
    ref = [np.ones((2, 3), np.float32)]
    assert run.agreement(ref, [ref[0] + 5e-5])["agree"] is True
    bad = run.agreement(ref, [ref[0] * 1.01])
    assert bad["agree"] is False and bad["max_abs_diff"] == pytest.approx(0.01, rel=1e-3)
    assert "shape (3, 2)" in run.agreement(ref, [np.ones((3, 2), np.float32)])["why"]
    assert run.agreement(ref, [])["agree"] is False


def test_latency_table_shows_mismatch_and_build_failure():
    row = {"system": "aot", "threads": 1, "median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1,
           "ratio_vs_ort": 2.0, "gflops": 1.0, "peak_share": 0.1, "max_abs_diff": 0.5,
           "agree": False}
    model = {"name": "m", "results": [row], "errors": {"vm": "TVMError: no"}}
    text = _report.latency_table([model])
    assert "MISMATCH" in text and "BUILD FAILED: TVMError: no" in text


def test_flops_count_grouped_conv_transpose_and_matmuls():
    x = relay.var("x", shape=(1, 8, 10, 10))
    dw = relay.nn.conv2d(x, relay.var("w", shape=(8, 1, 3, 3)), padding=(1, 1), groups=8)
    up = relay.nn.conv2d_transpose(dw, relay.var("u", shape=(8, 4, 2, 2)), strides=(2, 2))
    flat = relay.reshape(up, (1, 4 * 20 * 20))
    dense = relay.nn.dense(flat, relay.var("d", shape=(5, 1600)))
    a, b = relay.var("a", shape=(2, 3, 4)), relay.var("b", shape=(2, 6, 4))
    bmm = relay.nn.batch_matmul(a, b)
    mod = ember.IRModule.from_expr(relay.Function(
        relay.analysis.free_vars(relay.Tuple([dense, bmm])), relay.Tuple([dense, bmm])))
    total, by_op = _flops.count_flops(mod)
    assert by_op == {"nn.conv2d": 2 * 100 * 8 * 9,  # depthwise: one 3x3 per channel
                     "nn.conv2d_transpose": 2 * 100 * 8 * 4 * 4,
                     "nn.dense": 2 * 5 * 1600, "nn.batch_matmul": 2 * 2 * 3 * 6 * 4}
    assert total == sum(by_op.values())


def test_interleave_shuffles_the_order_so_no_runner_always_follows_another():
    order: list[str] = []

    def runner(name: str) -> _systems.Runner:
        return _systems.Runner(name, 1, lambda: order.append(name), list,
                               contextlib.nullcontext)

    names = "abcd"
    rounds = 12
    timings = _timing.interleave([runner(n) for n in names], min_time=1e-9, rounds=rounds)
    assert [t.block for t in timings] == [1] * len(names)  # at least one call per round
    timed = order[-2 * rounds * len(names):][1::2]  # each block: a warm-up call, a timed one
    per_round = [timed[k:k + len(names)] for k in range(0, len(timed), len(names))]
    assert all(sorted(r) == list(names) for r in per_round)  # every runner once a round
    # a rotation put "b" after "a" in every round but one; shuffled, each runner has
    # several different predecessors
    before = {n: {r[i - 1] for r in per_round for i in range(1, len(r)) if r[i] == n}
              for n in names}
    assert all(len(p) >= 2 for p in before.values()), before


@pytest.mark.parametrize("args, message", [
    (["--models", "alexnet"], "unknown model"),
    (["--executors", "jit"], "--executors"),
    (["--threads", "0"], "--threads"),
])
def test_bad_arguments_are_named(args, message, capsys):
    with pytest.raises(SystemExit):
        run.parse_args(args)
    assert message in capsys.readouterr().err


def test_source_defaults_to_onnx_and_needs_the_importer(capsys, monkeypatch):
    assert run.parse_args([]).source == "onnx"
    assert run.parse_args(["--source", "relay"]).source == "relay"
    monkeypatch.setattr(run, "frontend_available", lambda: False)
    with pytest.raises(SystemExit):
        run.parse_args([])
    assert "no ONNX importer" in capsys.readouterr().err
    assert run.parse_args(["--source", "relay"]).source == "relay"


def test_peak_at_more_threads_is_at_least_the_peak_at_fewer():
    peaks = [{1: 80.0, 2: 7.5}, {1: 70.0, 2: 100.0}, {1: 85.0, 2: 90.0}]
    assert run.best_peaks(peaks) == {1: 85.0, 2: 100.0}
    assert run.best_peaks([{1: 80.0, 2: 7.5}]) == {1: 80.0, 2: 80.0}


def test_dynamic_mode_runs_the_twins_of_the_chosen_models(tmp_path, capsys, monkeypatch):
    """--dynamic hands the twins of the chosen models (those that have one) and this run's
    options to bench_dynamic.main."""
    bench_dynamic = importlib.import_module("bench_dynamic")
    seen = []
    monkeypatch.setattr(bench_dynamic, "main", lambda argv: seen.append(argv) or 0)
    out = str(tmp_path / "d.json")
    assert run.main(["--dynamic", "--models", "mlp,resnet18,transformer", "--threads", "1,2",
                     "--min-time", "0.1", "--rounds", "2", "--json", out]) == 0
    assert seen == [["--models", "mlp,resnet18,resnet18/hw,transformer", "--threads", "1,2",
                     "--min-time", "0.1", "--rounds", "2", "--json", out]]
    assert run.parse_args(["--dynamic"]).json == str(run.DYNAMIC_JSON)
    assert run.parse_args([]).json == str(run.DEFAULT_JSON)
    # a model without a twin is named, with those that have one
    assert run.main(["--dynamic", "--models", "resnet50"]) == 2
    assert "none of resnet50 has a dynamic twin" in capsys.readouterr().err


def test_openvino_needs_openvino_and_says_how_to_install(capsys, monkeypatch):
    monkeypatch.setattr(run, "openvino_available", lambda: False)
    with pytest.raises(SystemExit):
        run.parse_args(["--openvino"])
    assert "pip install openvino" in capsys.readouterr().err
    assert run.parse_args([]).openvino is False
    monkeypatch.setattr(run, "openvino_available", lambda: True)
    with pytest.raises(SystemExit):
        run.parse_args(["--openvino", "--dynamic"])
    assert "onnxruntime only" in capsys.readouterr().err


def test_best_reference_ratio_goes_to_ember_rows_only():
    """With OpenVINO in a run, ember's rows get their ratio to the faster reference system
    at the same thread count; the table shows it, and the geometric mean covers ember only."""
    timing = _timing.Timing(samples=[2e-3] * 3, round_medians=[2e-3], block=1)
    ember_row = run._result(_systems.Runner("aot", 1, list, list, contextlib.nullcontext),
                            timing, ort_median=4e-3, best_median=2.5e-3, flops=10**6, check=None)
    ov_row = run._result(_systems.Runner("openvino", 1, list, list, contextlib.nullcontext),
                         timing, ort_median=4e-3, best_median=2.5e-3, flops=10**6, check=None)
    assert ember_row["ratio_vs_ort"] == pytest.approx(0.5)
    assert ember_row["ratio_vs_best"] == pytest.approx(0.8)
    assert "ratio_vs_best" not in ov_row
    models = [{"name": "m", "errors": {}, "results": [
        {**row, "peak_share": 0.1, "agree": True, "max_abs_diff": 0.0}
        for row in (ember_row, ov_row)]}]
    assert run.geomean_ratios(models, "ratio_vs_best") == {"aot@1": pytest.approx(0.8)}
    assert set(run.geomean_ratios(models)) == {"aot@1", "openvino@1"}
    head, *lines = _report.latency_table(models).splitlines()
    assert "x best" in head and any("openvino" in line for line in lines)


def test_best_reference_is_the_faster_reference_at_each_thread_count():
    def runner(system: str, threads: int) -> _systems.Runner:
        return _systems.Runner(system, threads, list, list, contextlib.nullcontext)

    medians = [(runner("onnxruntime", 1), 4.0), (runner("openvino", 1), 5.0),
               (runner("aot", 1), 1.0),  # ember is never a reference, however fast
               (runner("onnxruntime", 2), 3.0), (runner("openvino", 2), 2.0),
               (runner("aot", 2), 0.5)]
    assert run.best_reference_medians(medians) == {1: 4.0, 2: 2.0}
    # onnxruntime alone: no second reference, no x best
    assert run.best_reference_medians([m for m in medians if m[0].system != "openvino"]) == {}


def test_openvino_compile_failure_is_reported_and_the_run_goes_on(monkeypatch):
    def broken(*_: object) -> None:
        raise RuntimeError("unsupported op Foo\nmore detail")

    monkeypatch.setattr(run, "openvino_runner", broken)
    build: dict = {}
    errors: dict = {}
    assert run._openvino_runners("m.onnx", [1, 2], {}, build, errors) == []
    assert errors == {"openvino": "RuntimeError: unsupported op Foo"} and build == {}


def test_quick_run_with_openvino(tmp_path):
    pytest.importorskip("openvino")
    out = tmp_path / "out.json"
    assert run.main(["--models", "mlp", "--threads", "1", "--executors", "aot", "--openvino",
                     "--min-time", "0.02", "--rounds", "2", "--peak-size", "64",
                     "--build", "shared", "--json", str(out)]) == 0
    (model,) = json.loads(out.read_text())["models"]
    rows = {r["system"]: r for r in model["results"]}
    assert rows["openvino"]["agree"] is True and "ratio_vs_best" in rows["aot"]
    assert set(model["build"]["openvino"]) == {"compile_s@1"}
