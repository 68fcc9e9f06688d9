"""FastMath: how much faster the fast_exp / fast_tanh / fast_erf kernels run, and their error.

    python benchmarks/bench_fast_math.py                 # 1M float32 elements, 1 thread
    python benchmarks/bench_fast_math.py --size 262144 --repeat 50 --json fast.json

For each op, one model ``op(x)`` is built twice with ``relay.build`` (target ``c``), as is and
after ``relay.transform.FastMath()``, and both run on the graph executor, alternating call by
call (so that drift on a shared machine hits both alike). The table gives the median
milliseconds per call, the speedup, and the largest error of each against numpy in float64
(relative for exp, absolute for tanh and erf). The JSON (default
``bench_results/fast_math.json`` in the cache directory) has every figure.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import open_results, results_path, table  # noqa: E402
import ember  # noqa: E402
from ember import relay  # noqa: E402
from ember.contrib import graph_executor  # noqa: E402

EXACT = {"exp": np.exp, "tanh": np.tanh,
         "erf": np.vectorize(math.erf, otypes=[np.float64])}


def _module(op: str, size: int) -> ember.IRModule:
    x = relay.var("x", shape=(size,))
    return ember.IRModule.from_expr(relay.Function([x], getattr(relay, op)(x)))


def _runner(mod: ember.IRModule, data: np.ndarray) -> Any:
    lib = relay.build(mod, target="c")
    gm = graph_executor.GraphModule(lib["default"](ember.cpu()))
    gm.set_input("x", data)
    return gm


def _error(op: str, got: np.ndarray, data: np.ndarray) -> float:
    want = EXACT[op](data.astype(np.float64))
    if op == "exp":
        return float(np.max(np.abs(got - want) / want))
    return float(np.max(np.abs(got - want)))


def measure(op: str, size: int, repeat: int) -> dict[str, Any]:
    lo = -80.0 if op == "exp" else -5.0
    data = np.random.default_rng(0).uniform(lo, -lo, size).astype("float32")
    mod = _module(op, size)
    runners = {"exact": _runner(mod, data), "fast": _runner(relay.transform.FastMath()(mod), data)}
    times: dict[str, list[float]] = {k: [] for k in runners}
    for r in runners.values():
        r.run()  # warm up
    for _ in range(repeat):
        for name, r in runners.items():
            start = time.perf_counter()
            r.run()
            times[name].append(time.perf_counter() - start)
    out: dict[str, Any] = {"op": op, "size": size, "repeat": repeat}
    for name, r in runners.items():
        out[f"{name}_ms"] = statistics.median(times[name]) * 1e3
        out[f"{name}_error"] = _error(op, r.get_output(0).numpy(), data)
    out["speedup"] = out["exact_ms"] / out["fast_ms"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--ops", default="exp,tanh,erf")
    ap.add_argument("--json", default=str(results_path("fast_math.json")))
    opts = ap.parse_args()
    rows = [measure(op, opts.size, opts.repeat) for op in opts.ops.split(",")]
    print(table([[r["op"], r["exact_ms"], r["fast_ms"], r["speedup"], r["exact_error"],
                  r["fast_error"]] for r in rows],
                ["op", "exact ms", "fast ms", "speedup", "exact err", "fast err"]))
    with open_results(opts.json) as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
