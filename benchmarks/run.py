"""ember vs onnxruntime on the model zoo: latency, GFLOP/s, share of peak, build times.

    python benchmarks/run.py                       # the eight default models, 1 and 2 threads
    python benchmarks/run.py --quick               # mlp, dscnn, resnet8; about a minute
    python benchmarks/run.py --models resnet18,mobilenet_v2 --executors aot --threads 1
    python benchmarks/run.py --dynamic             # the zoo's dynamic twins (bench_dynamic.py)

Each model is the zoo's network and its ONNX twin with the same weights (``_models.py``).
onnxruntime runs the ONNX file; ember builds the same file through its ONNX importer
(``--source onnx``) or the twin's own Relay module (``--source relay``), with the graph
executor, AOT and the VM, at batch 1 and each thread count. Outputs are checked against
onnxruntime's before anything is timed; timing is interleaved round by round
(``_timing.py``). See docs/benchmarks.md for how to read the table.

``--dynamic`` runs the dynamic twins of the chosen models instead (``bench_dynamic.py``: a
symbolic batch for every model, height and width for mobilenet_v2, batch and sequence for the
transformer): per model, the dynamic build's latency at three shapes next to the static
build's at the same shapes, and the cost of a call at a shape other than the last one.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# this checkout's ember (not another installed one), and the helpers beside this file
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import _machine
import _report
from _flops import NOT_COUNTED_NOTE, count_flops
from _models import known_models, workload, zoo_models
from _report import REFERENCE_SYSTEMS
from _systems import (
    EXECUTORS,
    Runner,
    build_ember,
    ember_runner,
    frontend_available,
    openvino_available,
    openvino_runner,
    ort_runner,
    ort_session,
    to_relay,
)
from _timing import interleave

SOURCES = {"onnx": "the ONNX file onnxruntime runs, imported by ember.relay.frontend.from_onnx",
           "relay": "the twin's own Relay module, same weights as the ONNX file"}
ISSUE_MODELS = ("mlp", "autoencoder", "dscnn", "kws", "resnet8", "mobilenet_v2", "resnet18",
                "transformer")
QUICK_MODELS = ("mlp", "dscnn", "resnet8")
RTOL, ATOL = 1e-3, 1e-4
DEFAULT_JSON = _report.results_path("run.json")
DYNAMIC_JSON = _report.results_path("dynamic.json")
PEAK_METHOD = "numpy float32 matmul (BLAS sgemm) n x n x n, BLAS threads set by threadpoolctl"


def agreement(ref: Sequence[np.ndarray], outs: Sequence[np.ndarray]) -> dict[str, Any]:
    """Max abs difference of ``outs`` from ``ref`` and whether every output is within
    rtol 1e-3 / atol 1e-4 (a count or shape mismatch disagrees, with the reason)."""
    if len(ref) != len(outs):
        return {"max_abs_diff": None, "agree": False,
                "why": f"{len(outs)} outputs, onnxruntime has {len(ref)}"}
    diff = 0.0
    for i, (r, o) in enumerate(zip(ref, outs)):
        if r.shape != o.shape:
            return {"max_abs_diff": None, "agree": False,
                    "why": f"output {i}: shape {o.shape}, onnxruntime {r.shape}"}
        diff = max(diff, float(np.max(np.abs(o.astype(np.float64) - r))) if r.size else 0.0)
    ok = all(np.allclose(o, r, rtol=RTOL, atol=ATOL) for r, o in zip(ref, outs))
    return {"max_abs_diff": diff, "agree": bool(ok), "why": "" if ok else "out of tolerance"}


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"


def _ort_runners(onnx_path: str, threads: Sequence[int], inputs: dict[str, np.ndarray],
                 build: dict[str, Any]) -> dict[int, Runner]:
    runners = {}
    for n in threads:
        start = time.perf_counter()
        session = ort_session(onnx_path, n)
        build.setdefault("onnxruntime", {})[f"session_s@{n}"] = time.perf_counter() - start
        runners[n] = ort_runner(session, n, inputs)
    return runners


def _openvino_runners(onnx_path: str, threads: Sequence[int], inputs: dict[str, np.ndarray],
                      build: dict[str, Any], errors: dict[str, str]) -> list[Runner]:
    runners = []
    for n in threads:
        try:
            runner, compile_s = openvino_runner(onnx_path, n, inputs)
        except Exception as err:  # noqa: BLE001 (reported; ember and onnxruntime still run)
            errors["openvino"] = _error(err)
            print(f"  openvino: COMPILE FAILED: {errors['openvino']}", flush=True)
            return []
        build.setdefault("openvino", {})[f"compile_s@{n}"] = compile_s
        runners.append(runner)
    return runners


def _ember_runners(case: Any, opts: argparse.Namespace, onnx_path: str,
                   build: dict[str, Any], errors: dict[str, str]) -> list[Runner]:
    runners = []
    for executor in opts.executors:
        try:
            factory, module, times = build_ember(executor, opts.source, onnx_path, case.mod,
                                                 case.params, cold=opts.build == "cold")
        except Exception as err:  # noqa: BLE001 (a failed build is reported; the rest run)
            errors[executor] = _error(err)
            print(f"  {executor}: BUILD FAILED: {errors[executor]}", flush=True)
            continue
        build[executor] = times.to_json(opts.source)
        print(f"  {executor}: built in {times.build_s:.2f} s ({times.cache} cache; C compiler "
              f"{times.cc_s:.2f} s), rebuilt in {times.rebuild_s:.2f} s", flush=True)
        runners += [ember_runner(executor, factory, module, n, case.inputs)
                    for n in opts.threads]
    return runners


def _check(runners: Sequence[Runner], refs: dict[int, list[np.ndarray]]) -> dict[str, Any]:
    """Run each runner (ember's, OpenVINO's) once and compare with onnxruntime at its thread
    count."""
    checks = {}
    for r in runners:
        with r.use_threads():
            r.run()
        checks[r.key] = agreement(refs[r.threads], r.outputs())
        if not checks[r.key]["agree"]:
            print(f"  !!! {r.key}: OUTPUT MISMATCH vs onnxruntime: {checks[r.key]['why']} "
                  f"(max abs diff {checks[r.key]['max_abs_diff']})", flush=True)
    return checks


def best_reference_medians(medians: Sequence[tuple[Runner, float]]) -> dict[int, float]:
    """Per thread count, the faster reference system's median (empty with onnxruntime alone:
    ember's rows then get no ``ratio_vs_best``)."""
    refs = [(r.threads, m) for r, m in medians if r.system in REFERENCE_SYSTEMS]
    if len({r.system for r, _ in medians if r.system in REFERENCE_SYSTEMS}) < 2:
        return {}
    return {n: min(m for t, m in refs if t == n) for n in {t for t, _ in refs}}


def _result(r: Runner, timing: Any, ort_median: float, best_median: float | None, flops: int,
            check: dict[str, Any] | None) -> dict[str, Any]:
    """One runner's JSON row; ``best_median``: the faster reference system's median at this
    thread count where OpenVINO ran too (ember's rows then get ``ratio_vs_best``)."""
    median = timing.median
    gflops = flops / median / 1e9
    row = {"system": r.system, "threads": r.threads, "median_ms": median * 1e3,
           "p10_ms": timing.percentile(10) * 1e3, "p90_ms": timing.percentile(90) * 1e3,
           "samples": len(timing.samples), "block": timing.block,
           "round_medians_ms": [m * 1e3 for m in timing.round_medians],
           "ratio_vs_ort": median / ort_median, "gflops": gflops}
    if best_median is not None and r.system not in REFERENCE_SYSTEMS:
        row["ratio_vs_best"] = median / best_median
    if check is not None:
        row.update(check)
    return row


def bench_model(name: str, opts: argparse.Namespace) -> dict[str, Any]:
    """Build, check and time one model on every system; its JSON record."""
    import onnx

    case = next(zoo_models([name]))
    zoo, kwargs = workload(name)
    record: dict[str, Any] = {"name": name, "zoo": zoo, "kwargs": kwargs, "source": opts.source,
                              "inputs": {k: [list(v.shape), str(v.dtype)]
                                         for k, v in case.inputs.items()},
                              "onnx_nodes": len(case.onnx_model.graph.node),
                              "build": {}, "errors": {}, "results": []}
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        onnx_path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(case.onnx_model, onnx_path)
        flops, by_op = count_flops(to_relay(opts.source, onnx_path, case.mod, case.params)[0])
        record.update(flops=flops, flops_by_op=by_op)
        amount = f"{flops / 1e9:.2f} GFLOP" if flops >= 1e8 else f"{flops / 1e6:.2f} MFLOP"
        print(f"{name}: {amount}, inputs {record['inputs']}, ember source {opts.source}",
              flush=True)
        ort = _ort_runners(onnx_path, opts.threads, case.inputs, record["build"])
        ov = (_openvino_runners(onnx_path, opts.threads, case.inputs, record["build"],
                                record["errors"]) if opts.openvino else [])
        ember = _ember_runners(case, opts, onnx_path, record["build"], record["errors"])
        refs = {}
        for n, r in ort.items():
            with r.use_threads():
                r.run()
            refs[n] = r.outputs()
        checks = _check([*ov, *ember], refs)
        runners = [*ort.values(), *ov, *ember]
        timings = interleave(runners, opts.min_time, opts.rounds)
    medians = [(r, t.median) for r, t in zip(runners, timings)]
    ort_median = {r.threads: m for r, m in medians if r.system == "onnxruntime"}
    best = best_reference_medians(medians)
    record["results"] = [_result(r, t, ort_median[r.threads], best.get(r.threads), flops,
                                 checks.get(r.key))
                         for r, t in zip(runners, timings)]
    return record


def geomean_ratios(models: Sequence[dict[str, Any]], field: str = "ratio_vs_ort"
                   ) -> dict[str, float]:
    """Per ``system@threads``: the geometric mean over models of its ``field`` (its ratio to
    onnxruntime, or with ``ratio_vs_best`` to the faster of onnxruntime and OpenVINO)."""
    logs: dict[str, list[float]] = {}
    for m in models:
        for row in m["results"]:
            if row["system"] != "onnxruntime" and field in row:
                key = f"{row['system']}@{row['threads']}"
                logs.setdefault(key, []).append(math.log(row[field]))
    return {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=_csv, default=None,
                        help=f"comma-separated (default: {','.join(ISSUE_MODELS)}); any of "
                             f"{', '.join(known_models())}")
    parser.add_argument("--threads", type=_csv, default=["1", "2"], help="default 1,2")
    parser.add_argument("--executors", type=_csv, default=list(EXECUTORS),
                        help="ember executors, default graph,aot,vm")
    parser.add_argument("--source", choices=tuple(SOURCES), default="onnx",
                        help="what ember builds: onnx (default), the ONNX file onnxruntime "
                             "runs, through ember's importer; relay, the twin's Relay module "
                             "(same weights)")
    parser.add_argument("--min-time", type=float, default=None,
                        help="seconds of timed calls per system and thread count "
                             "(default 1.5; --quick 0.3)")
    parser.add_argument("--rounds", type=int, default=None, help="default 5; --quick 3")
    parser.add_argument("--quick", action="store_true",
                        help=f"{','.join(QUICK_MODELS)} with shorter measurements")
    parser.add_argument("--build", choices=("cold", "shared"), default=None,
                        help="cold: build in an empty temporary EMBER_CACHE_DIR, then rebuild "
                             "(cached); shared: build once in the usual cache (fast reruns, "
                             "build times not cold). Default cold; --quick shared")
    parser.add_argument("--openvino", action="store_true",
                        help="also time OpenVINO's CPU plugin on the same ONNX file (pip "
                             "install openvino); ember's rows then also get x best, their "
                             "ratio to the faster of onnxruntime and OpenVINO")
    parser.add_argument("--peak-size", type=int, default=512, help="sgemm n (default 512)")
    parser.add_argument("--json", default=None, help=f"default {DEFAULT_JSON} ({DYNAMIC_JSON} "
                        "with --dynamic)")
    parser.add_argument("--dynamic", action="store_true",
                        help="the dynamic twins against static builds (bench_dynamic.py)")
    opts = parser.parse_args(argv)
    _resolve(parser, opts)
    return opts


def _resolve(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> None:
    """Fill defaults that depend on --quick and check the lists."""
    opts.models = opts.models or list(QUICK_MODELS if opts.quick else ISSUE_MODELS)
    opts.min_time = opts.min_time if opts.min_time is not None else (0.3 if opts.quick else 1.5)
    opts.rounds = opts.rounds if opts.rounds is not None else (3 if opts.quick else 5)
    opts.build = opts.build or ("shared" if opts.quick else "cold")
    opts.json = opts.json or str(DYNAMIC_JSON if opts.dynamic else DEFAULT_JSON)
    unknown = [m for m in opts.models if m not in known_models()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from "
                     f"{', '.join(known_models())}")
    bad = [e for e in opts.executors if e not in EXECUTORS]
    if bad or not opts.executors:
        parser.error(f"--executors: choose from {', '.join(EXECUTORS)}, got {opts.executors}")
    try:
        opts.threads = [int(t) for t in opts.threads]
    except ValueError:
        parser.error(f"--threads: comma-separated positive ints, got {opts.threads}")
    if not opts.threads or min(opts.threads) < 1 or opts.rounds < 1 or opts.min_time <= 0:
        parser.error("--threads must be positive ints, --rounds >= 1, --min-time > 0")
    if opts.openvino and opts.dynamic:
        parser.error("--openvino times the static zoo; --dynamic runs bench_dynamic.py, which "
                     "compares with onnxruntime only")
    if opts.openvino and not openvino_available():
        parser.error("--openvino: OpenVINO is not installed here; pip install openvino "
                     "(or pip install -e '.[openvino]')")
    if opts.source == "onnx" and not frontend_available():
        parser.error("--source onnx: this ember has no ONNX importer "
                     "(ember.relay.frontend.from_onnx); use --source relay")


def measure_peak(opts: argparse.Namespace, min_time: float) -> dict[int, float]:
    """sgemm GFLOP/s at each thread count of the run."""
    return {n: _machine.sgemm_peak(n, opts.peak_size, min_time) for n in opts.threads}


def best_peaks(peaks: Sequence[dict[int, float]]) -> dict[int, float]:
    """The peak at each thread count: the best measured at that count or fewer (N threads
    can always do what fewer do; on a loaded machine a 2-thread sgemm can measure below the
    1-thread one, which would make shares of it meaningless)."""
    best: dict[int, float] = {}
    for n in sorted({n for p in peaks for n in p}):
        best[n] = max([p[n] for p in peaks if n in p] + [best[m] for m in best if m < n])
    return best


def environment(opts: argparse.Namespace, peak: dict[int, float]) -> dict[str, Any]:
    return {"source": SOURCES[opts.source],
            "cpu": _machine.cpu_model(), "logical_cpus": os.cpu_count(),
            "simd": _machine.simd_level(), "versions": _machine.versions(),
            "load_avg_start": list(os.getloadavg()),
            "peak": {"method": PEAK_METHOD, "blas": _machine.blas_name(), "n": opts.peak_size,
                     "gflops": {str(k): v for k, v in peak.items()}}}


def run_dynamic(opts: argparse.Namespace) -> int:
    """``--dynamic``: bench_dynamic.py on the twins of the chosen models (those that have one),
    with this run's thread counts, timing and JSON path."""
    import bench_dynamic

    twins = [t for t, (zoo, *_) in bench_dynamic.TWINS.items() if zoo in opts.models]
    if not twins:
        print(f"--dynamic: none of {', '.join(opts.models)} has a dynamic twin; those that do: "
              f"{', '.join(sorted({z for z, *_ in bench_dynamic.TWINS.values()}))}",
              file=sys.stderr)
        return 2
    return bench_dynamic.main(["--models", ",".join(twins),
                               "--threads", ",".join(map(str, opts.threads)),
                               "--min-time", str(opts.min_time), "--rounds", str(opts.rounds),
                               "--json", opts.json])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 1 if an output disagreed or a build failed, else 0."""
    opts = parse_args(argv)
    if opts.dynamic:
        return run_dynamic(opts)
    start = time.perf_counter()
    peaks = [measure_peak(opts, 0.2 if opts.quick else 0.5)]
    env = environment(opts, peaks[0])
    _report.header(env, opts)
    models = []
    for name in opts.models:
        models.append(bench_model(name, opts))
        peaks.append(measure_peak(opts, 0.1))  # the machine's load changes; keep the best
    best = best_peaks(peaks)
    env["peak"]["gflops_measured"] = [{str(k): v for k, v in p.items()} for p in peaks]
    env["peak"]["gflops"] = {str(k): v for k, v in best.items()}
    env["load_avg_end"] = list(os.getloadavg())
    for row in (r for m in models for r in m["results"]):
        row["peak_share"] = row["gflops"] / best[row["threads"]]
    config = {k: v for k, v in vars(opts).items() if k != "json"}
    out = {"benchmark": "ember-vs-onnxruntime", "schema": 1, "environment": env,
           "config": config, "tolerance": {"rtol": RTOL, "atol": ATOL},
           "flops_note": NOT_COUNTED_NOTE, "models": models,
           "geomean_ratio_vs_ort": geomean_ratios(models),
           "wall_s": time.perf_counter() - start}
    if opts.openvino:
        out["geomean_ratio_vs_best"] = geomean_ratios(models, "ratio_vs_best")
    _report.tables(out)
    path = Path(opts.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path} ({out['wall_s']:.0f} s)")
    failed = [m["name"] for m in models if m["errors"] or any(
        r.get("agree") is False for r in m["results"])]
    if failed:
        print(f"!!! FAILURES (build error or output mismatch): {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
