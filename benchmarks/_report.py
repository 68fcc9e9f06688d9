"""The printed side of ``run.py``: the header, the latency table, the build table.

Every figure printed is also in the JSON; this module only formats.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ember.runtime.cache import cache_dir

REFERENCE_SYSTEMS = ("onnxruntime", "openvino")  # what ember is measured against, in this order

def results_path(name: str) -> Path:
    """Where a benchmark writes its JSON by default: ``bench_results/<name>`` in ember's cache
    directory (``$EMBER_CACHE_DIR``), not in the source tree."""
    return cache_dir("bench_results", create=False) / name


def open_results(path: str | Path) -> IO[str]:
    """``path`` opened for writing, its directory created."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "w")


# The build targets (resnet18): cold build and cached rebuild, seconds.
BUILD_TARGETS = {"resnet18": {"cold build": ("build_s", 10.0),
                             "cached rebuild": ("rebuild_s", 0.5)}}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:.0f}"
        return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}"
    return str(v)


def table(rows: Sequence[Sequence[Any]], heads: Sequence[str]) -> str:
    """Right-aligned columns (the first left-aligned), one header line."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(heads)]

    def line(values: Sequence[str]) -> str:
        first, *rest = values
        return "  ".join([first.ljust(widths[0]), *(v.rjust(w) for v, w in
                                                      zip(rest, widths[1:]))]).rstrip()

    return "\n".join([line(heads), *(line(r) for r in cells)])


def header(env: dict[str, Any], opts: argparse.Namespace) -> None:
    v, simd, peak = env["versions"], env["simd"], env["peak"]
    load = " ".join(f"{x:.1f}" for x in env["load_avg_start"])
    peaks = ", ".join(f"{k} thr {g:.1f}" for k, g in peak["gflops"].items())
    print(f"ember vs onnxruntime, batch 1, threads {','.join(map(str, opts.threads))}")
    print(f"CPU: {env['cpu']} ({env['logical_cpus']} logical CPUs), load average {load}")
    openvino = f", OpenVINO {v['openvino']}" if "openvino" in v else ""
    print(f"ember {v['ember']} ({v['ember_commit']}), kernels compiled for {simd['features']} "
          f"(-march={simd['march']}, {simd['compiler']}); onnxruntime {v['onnxruntime']}"
          f"{openvino}, onnx {v['onnx']}, numpy {v['numpy']}, Python {v['python']}")
    print(f"ember source: {opts.source} ({env['source']})")
    print(f"peak: {peak['method']} ({peak['blas']}, n={peak['n']}): {peaks} GFLOP/s "
          "(measured again after each model; % peak uses the best)")
    print(f"timing: interleaved, {opts.rounds} rounds, about {opts.min_time:g} s of calls per "
          f"system and thread count; per-call median, p10, p90\n", flush=True)


def _check_cell(row: dict[str, Any]) -> str:
    if row["system"] == "onnxruntime":
        return "ref"
    return "ok" if row.get("agree") else "MISMATCH"


def latency_table(models: Sequence[dict[str, Any]]) -> str:
    """One row per system and thread count (onnxruntime first); with OpenVINO in the run, an
    ``x best`` column: ember's median over the faster of onnxruntime's and OpenVINO's."""
    best = any("ratio_vs_best" in r for m in models for r in m["results"])
    order = {system: k for k, system in enumerate(REFERENCE_SYSTEMS)}
    rows = []
    for m in models:
        for r in sorted(m["results"], key=lambda r: (r["threads"], order.get(r["system"], 2))):
            rows.append([m["name"], r["system"], r["threads"], r["median_ms"], r["p10_ms"],
                         r["p90_ms"], r["ratio_vs_ort"],
                         *([r.get("ratio_vs_best")] if best else []), r["gflops"],
                         100 * r["peak_share"], r.get("max_abs_diff"), _check_cell(r)])
        for executor, err in m["errors"].items():
            rows.append([m["name"], executor, "-", None, None, None, None,
                         *([None] if best else []), None, None, None,
                         f"BUILD FAILED: {err[:60]}"])
    return table(rows, ["model", "system", "thr", "median ms", "p10 ms", "p90 ms", "x ort",
                        *(["x best"] if best else []), "GFLOP/s", "% peak", "max|diff|",
                        "check"])


def build_table(models: Sequence[dict[str, Any]]) -> str:
    rows = []
    for m in models:
        for executor, b in m["build"].items():
            if executor not in REFERENCE_SYSTEMS:
                rows.append([m["name"], executor, b["import_s"], b["build_s"], b["cc_s"],
                             b["rebuild_s"], b["cache"]])
        for system, what in (("onnxruntime", "session init"), ("openvino", "compile")):
            if system in m["build"]:
                times = ", ".join(f"{s:.2f}" for s in m["build"][system].values())
                rows.append([m["name"], system, None, None, None, None, f"({what} {times} s)"])
    return table(rows, ["model", "system", "import s", "1st build s", "of which cc s",
                        "rebuild s", "cache"])


def target_lines(models: Sequence[dict[str, Any]]) -> list[str]:
    """The issue's build targets, met or MISSed per executor (cold builds only)."""
    lines = []
    for m in models:
        builds = {ex: b for ex, b in m["build"].items() if b.get("cache") == "cold"}
        for what, (key, limit) in BUILD_TARGETS.get(m["name"], {}).items():
            got = [f"{ex} {b[key]:.2f}{'' if b[key] < limit else ' MISS'}"
                   for ex, b in builds.items()]
            if got:
                lines.append(f"{m['name']} target: {what} < {limit:g} s: {', '.join(got)}")
    return lines


def tables(out: dict[str, Any]) -> None:
    models = out["models"]
    peaks = ", ".join(f"{k} thr {g:.1f}" for k, g in out["environment"]["peak"]["gflops"].items())
    print(f"\nsgemm peak (best of the run at that many threads or fewer): {peaks} GFLOP/s")
    best = ("; x best: over the faster of onnxruntime and OpenVINO"
            if out.get("geomean_ratio_vs_best") else "")
    print("latency (x ort: ember median / onnxruntime median at the same thread count"
          f"{best}; % peak: of the sgemm peak at that thread count)\n{out['flops_note']}")
    print(latency_table(models))
    for field, what in (("geomean_ratio_vs_ort", "x ort"), ("geomean_ratio_vs_best", "x best")):
        ratios = out.get(field)
        if ratios:
            print(f"geometric mean of {what} over models: " +
                  ", ".join(f"{k} {v:.2f}" for k, v in sorted(ratios.items())))
    print("\nbuild (seconds to a runnable executor; cache cold: the 1st build ran in an empty "
          "temporary EMBER_CACHE_DIR, shared: in the usual one; the rebuild finds the compiled "
          "library cached)")
    print(build_table(models))
    for line in target_lines(models):
        print(line)
