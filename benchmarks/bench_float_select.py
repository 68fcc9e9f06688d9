"""Standalone kernels whose C is a float select (``tir.Select``): where, leaky_relu, prelu,
sign, clip (min/max, for reference), timed by the calling thread's CPU time.

    python benchmarks/bench_float_select.py [--repeat 200] [--json PATH]

Each kernel is built with ``tir.build(topi.auto_schedule(...))`` and called ``--repeat``
times after a warm-up; the figure is the minimum of ``time.thread_time()`` per call (us),
which other jobs on a shared machine do not inflate (one thread: thread time sees only the
calling thread's work). Run it on two checkouts (before and after
a codegen change) to compare: a select written as C's ``?:`` leaves its loop scalar under
-fno-tree-loop-if-convert (see docs/lowering.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["EMBER_NUM_THREADS"] = "1"  # thread time counts the calling thread only
# this checkout's ember (not another installed one), and the helpers beside this file
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table

DEFAULT_JSON = results_path("float_select.json")
SHAPE = (1, 64, 112, 112)


def _cases() -> dict[str, tuple[Any, list[Any]]]:
    """name -> (output tensor, argument tensors)."""
    from ember import te, topi

    x = te.placeholder(SHAPE, name="x")
    y = te.placeholder(SHAPE, name="y")
    slope = te.placeholder((SHAPE[1],), name="slope")
    mask = te.placeholder((1, 128, 128), dtype="bool", name="mask")
    scores = te.placeholder((12, 128, 128), name="scores")
    return {
        "where_causal_12x128x128": (topi.where(mask, scores, -3.4028235e38), [mask, scores]),
        "where_1x64x112x112": (topi.where(topi.greater(x, y), x, y), [x, y]),
        "leaky_relu_1x64x112x112": (topi.nn.leaky_relu(x, 0.1), [x]),
        "prelu_1x64x112x112": (topi.nn.prelu(x, slope), [x, slope]),
        "sign_1x64x112x112": (topi.sign(x), [x]),
        "clip_1x64x112x112": (topi.clip(x, -1.0, 1.0), [x]),
    }


def _cpu_us(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best * 1e6


def measure(repeat: int) -> list[dict[str, Any]]:
    import numpy as np

    import ember
    from ember import tir, topi

    rng = np.random.default_rng(0)
    rows = []
    for name, (out, args) in _cases().items():
        f = tir.build(topi.auto_schedule(out), [*args, out], name="bench")["bench"]
        arrays = [ember.nd.array(rng.uniform(-1, 1, [int(d) for d in a.shape]) > 0
                                 if a.dtype == "bool" else
                                 rng.uniform(-1, 1, [int(d) for d in a.shape]).astype(a.dtype))
                  for a in args]
        result = ember.nd.empty([int(d) for d in out.shape])
        rows.append({"kernel": name, "thread_us": _cpu_us(lambda: f(*arrays, result), repeat)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--json", default=str(DEFAULT_JSON))
    opts = p.parse_args(argv)
    rows = measure(opts.repeat)
    print(table([(r["kernel"], r["thread_us"]) for r in rows], ["kernel", "thread us (min)"]))
    with open_results(opts.json) as f:
        json.dump({"repeat": opts.repeat, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
