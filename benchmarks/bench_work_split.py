"""How evenly each zoo model's kernels split over the thread pool, per thread count.

    python benchmarks/bench_work_split.py                        # the default models, 2 4 8 16
    python benchmarks/bench_work_split.py --models dbnet --threads 2 16 --top 5

For each model and thread count, one profiled call of every kernel per repeat
(``op_compare --split-only``; ``ember.runtime.work_split``): the CPU work of the whole model,
the imbalance of its parallel launches (longest task over mean task, weighted by work), the
serial share of its work, and the split efficiency (work / threads over the critical path the
split implies). These are CPU-time measures: they hold on a loaded machine. Thread counts
above the cores (``--real-up-to``: 4, 8, 16 on 2) are simulated: each launch runs as a job of
that many tasks one after another on one thread, which shows the split those threads would
get, not their speed. The kernels that lose most at the highest thread count follow.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table
from op_compare import profile_ember, split_rows

DEFAULT_MODELS = ("efficientnet_lite0", "mobilenet_v2", "crnn", "dbnet")
DEFAULT_JSON = results_path("work_split.json")
SMALL_US = 5.0  # CPU work below which a kernel should run on one thread (launch cost ~1 us)


def model_split(name: str, threads: Sequence[int], repeat: int, small: bool,
                real_up_to: int) -> dict:
    """Per thread count: the model's totals and its kernels' rows (``split_rows``); counts
    above ``real_up_to`` simulated (``op_compare --simulate``)."""
    from _models import zoo_models

    case = next(zoo_models([name], small=small))
    out = {}
    for t in threads:
        calls = profile_ember(case.onnx_model, case.inputs, t, warmup=1, repeat=repeat,
                              split_only=True, simulate=t > real_up_to)
        out[t] = split_rows(calls, t)
        rows = out[t]["rows"]
        work = sum(r["cpu_us"] for r in rows) or 1.0
        parallel = [r for r in rows if r["serial"] < 1.0]
        pwork = sum(r["cpu_us"] * (1 - r["serial"]) for r in parallel)
        out[t]["totals"]["imbalance"] = sum(r["cpu_us"] * (1 - r["serial"]) * r["imbalance"]
                                            for r in parallel) / pwork if pwork else 1.0
        out[t]["totals"]["serial"] = sum(r["cpu_us"] * r["serial"] for r in rows) / work
        out[t]["totals"]["simulated"] = t > real_up_to
        # kernels that launch threads for less work than a launch costs to hand out
        out[t]["totals"]["small_launched"] = sum(r["tasks"] > 1 and r["cpu_us"] < SMALL_US
                                                 for r in rows)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    p.add_argument("--threads", nargs="+", type=int, default=[2, 4, 8, 16])
    p.add_argument("--repeat", type=int, default=3, help="profiled calls per kernel")
    p.add_argument("--top", type=int, default=3, help="worst kernels listed per model")
    p.add_argument("--small", action="store_true", help="the reduced zoo configurations")
    p.add_argument("--real-up-to", type=int, default=len(os.sched_getaffinity(0)),
                   help="thread counts above this are simulated on one thread (default: the "
                        "CPUs this process may use)")
    p.add_argument("--json", default=str(DEFAULT_JSON))
    opts = p.parse_args(argv)
    if any(t < 1 for t in opts.threads) or opts.repeat < 1 or opts.top < 0:
        p.error("--threads and --repeat must be >= 1, --top >= 0")
    results, rows, worst = {}, [], []
    for name in opts.models:
        results[name] = model_split(name, opts.threads, opts.repeat, opts.small,
                                    opts.real_up_to)
        for t in opts.threads:
            tot = results[name][t]["totals"]
            rows.append([name, f"{t}{' (sim)' if tot['simulated'] else ''}", tot["cpu_us"],
                         tot["imbalance"], tot["serial"], tot["efficiency"],
                         tot["small_launched"]])
        last = results[name][opts.threads[-1]]["rows"][:opts.top]
        worst += [[name, r["kernel"][:50], r["cpu_us"], r["tasks"], r["imbalance"], r["serial"],
                   r["loss_us"]] for r in last]
        print(f"{name}: done", file=sys.stderr, flush=True)
    print("work split (CPU time per task; efficiency = work / threads over the critical path)")
    print(f"(small split: kernels of under {SMALL_US:g} us of work that launch threads)")
    print(table(rows, ["model", "threads", "work us", "imbalance", "serial", "efficiency",
                       "small split"]))
    if worst:
        print(f"\nkernels losing most at {opts.threads[-1]} threads")
        print(table(worst, ["model", "kernel", "cpu us", "tasks", "imb", "serial", "loss us"]))
    with open_results(opts.json) as f:
        json.dump({"threads": opts.threads, "repeat": opts.repeat, "models": results}, f,
                  indent=1)
    print(f"wrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
