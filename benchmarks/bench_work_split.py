"""How evenly each zoo model's kernels split over the thread pool, per thread count.

    python benchmarks/bench_work_split.py                        # the default models, 2 4 8 16
    python benchmarks/bench_work_split.py --models dbnet --threads 2 16 --top 5

For each model and thread count, one profiled call of every kernel per repeat
(``op_compare --split-only``; ``ember.runtime.work_split``): the CPU work of the whole model,
the imbalance of its parallel launches (longest task over mean task, weighted by work), the
serial share of its work, and the split efficiency (work / threads over the critical path the
split implies). These are CPU-time measures: they hold on a loaded machine. With 1 among the
thread counts, ``x 1t`` is the model's kernel CPU at each count over that at one thread (what
the threads cost each other: shared caches, memory bandwidth, a data that another core wrote),
and the kernels whose CPU grows most are listed. ``stolen`` is the share of the real launches'
tasks that ran on another thread than their own (thread_pool.h: the caller runs task 0, worker
k task k), i.e. how often a worker was not there in time: near 0 on a quiet machine, near
1 - 1/threads when other processes hold the cores (2-thread wall times then mean little). Thread counts
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
    out, per_kernel = {}, {}
    for t in threads:
        before = pool_stats()
        calls = profile_ember(case.onnx_model, case.inputs, t, warmup=1, repeat=repeat,
                              split_only=True, simulate=t > real_up_to)
        after = pool_stats()
        per_kernel[t] = [(c["kernel"], c["cpu_us"]) for c in calls if c["imbalance"] is not None]
        out[t] = split_rows(calls, t)
        tasks, stolen = after[STAT_TASKS] - before[STAT_TASKS], after[STAT_STOLEN] - before[STAT_STOLEN]
        out[t]["totals"]["stolen"] = stolen / tasks if tasks and t <= real_up_to else None
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
    for t in threads:
        out[t]["totals"]["vs_one"], out[t]["growth"] = versus_one(per_kernel.get(1),
                                                                  per_kernel[t])
    return out


def versus_one(one: Sequence[tuple[str, float]] | None, many: Sequence[tuple[str, float]]
               ) -> tuple[float | None, list[dict]]:
    """The kernel CPU of a run over that of the one-thread run of the same graph (None
    without one), and per kernel (graph order matches) the CPU it gained, most first."""
    if not one or len(one) != len(many):
        return None, []
    work1 = sum(us for _, us in one)
    growth = [{"kernel": k, "cpu_us_1t": us1, "cpu_us": us, "added_us": us - us1}
              for (k, us1), (_, us) in zip(one, many)]
    growth.sort(key=lambda g: -g["added_us"])
    return (sum(us for _, us in many) / work1 if work1 else None), growth


STAT_TASKS, STAT_STOLEN = 1, 2  # thread_pool.h's EMBER_POOL_STAT_*


def pool_stats() -> list[int]:
    """The process pool's counters (EmberPoolStats); zeros before a pool exists or for a
    library that predates the counters."""
    import ctypes

    from ember.runtime.dso import pool_owner

    fn = getattr(pool_owner(), "EmberPoolStats", None)
    if fn is None:
        return [0] * 5
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
    out = (ctypes.c_int64 * 8)()
    return list(out[:fn(out, 8)])


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
    results, rows, worst, grown = {}, [], [], []
    for name in opts.models:
        results[name] = model_split(name, opts.threads, opts.repeat, opts.small,
                                    opts.real_up_to)
        for t in opts.threads:
            tot = results[name][t]["totals"]
            rows.append([name, f"{t}{' (sim)' if tot['simulated'] else ''}", tot["cpu_us"],
                         _or_dash(tot["vs_one"]), tot["imbalance"], tot["serial"],
                         tot["efficiency"], tot["small_launched"], _or_dash(tot["stolen"])])
        last = results[name][opts.threads[-1]]["rows"][:opts.top]
        worst += [[name, r["kernel"][:50], r["cpu_us"], r["tasks"], r["imbalance"], r["serial"],
                   r["loss_us"]] for r in last]
        real = [t for t in opts.threads if 1 < t <= opts.real_up_to]
        if real:
            grown += [[name, real[-1], g["kernel"][:50], g["cpu_us_1t"], g["cpu_us"],
                       g["added_us"]] for g in results[name][real[-1]]["growth"][:opts.top]]
        print(f"{name}: done", file=sys.stderr, flush=True)
    print("work split (CPU time per task; efficiency = work / threads over the critical path)")
    print(f"(small split: kernels of under {SMALL_US:g} us of work that launch threads)")
    print(table(rows, ["model", "threads", "work us", "x 1t", "imbalance", "serial",
                       "efficiency", "small split", "stolen"]))
    if worst:
        print(f"\nkernels losing most at {opts.threads[-1]} threads")
        print(table(worst, ["model", "kernel", "cpu us", "tasks", "imb", "serial", "loss us"]))
    if grown:
        print("\nkernels whose CPU grows most from 1 thread (the same graph, by CPU time)")
        print(table(grown, ["model", "threads", "kernel", "cpu us 1t", "cpu us", "added us"]))
    with open_results(opts.json) as f:
        json.dump({"threads": opts.threads, "repeat": opts.repeat, "models": results}, f,
                  indent=1)
    print(f"wrote {opts.json}")
    return 0


def _or_dash(value: float | None) -> float | str:
    return "-" if value is None else value


if __name__ == "__main__":
    sys.exit(main())
