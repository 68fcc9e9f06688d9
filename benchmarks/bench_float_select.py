"""Standalone kernels whose C is a float select (``tir.Select``): where, leaky_relu, prelu,
sign, clip (min/max), argmax and a row max (selects carried from trip to trip), timed by the
calling thread's CPU time.

    python benchmarks/bench_float_select.py [--kernels leaky_relu_1x64x112x112,...]
                                            [--repeat 200] [--json PATH]

Each kernel is built with ``tir.build(topi.auto_schedule(...))``, checked against numpy and
called ``--repeat`` times at one thread after a warm-up; the figure is the minimum of
``time.thread_time()`` per call (us), which other jobs on a shared machine do not inflate.
Run it on two checkouts (before and after a codegen change) to compare: a select written as
C's ``?:`` leaves its loop scalar under -fno-tree-loop-if-convert (see docs/lowering.md).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# this checkout's ember (not another installed one), and the helpers beside this file
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table
from _timing import best_of

DEFAULT_JSON = results_path("float_select.json")
SHAPE = (1, 64, 112, 112)


def _cases() -> dict[str, tuple[Any, list[Any], Callable[..., Any]]]:
    """name -> (output tensor, argument tensors, numpy reference)."""
    import numpy as np

    from ember import te, topi

    x = te.placeholder(SHAPE, name="x")
    y = te.placeholder(SHAPE, name="y")
    slope = te.placeholder((SHAPE[1],), name="slope")
    mask = te.placeholder((1, 128, 128), dtype="bool", name="mask")
    scores = te.placeholder((12, 128, 128), name="scores")
    rows = te.placeholder((256, 4096), name="rows")
    return {
        "where_causal_12x128x128": (topi.where(mask, scores, -3.4028235e38), [mask, scores],
                                    lambda m, s: np.where(m, s, np.float32(-3.4028235e38))),
        "where_1x64x112x112": (topi.where(topi.greater(x, y), x, y), [x, y], np.maximum),
        "leaky_relu_1x64x112x112": (topi.nn.leaky_relu(x, 0.1), [x],
                                    lambda v: np.where(v > 0, v, v * np.float32(0.1))),
        "prelu_1x64x112x112": (topi.nn.prelu(x, slope), [x, slope],
                               lambda v, a: np.where(v > 0, v, v * a[:, None, None])),
        "sign_1x64x112x112": (topi.sign(x), [x], np.sign),
        "clip_1x64x112x112": (topi.clip(x, -1.0, 1.0), [x], lambda v: np.clip(v, -1, 1)),
        # selects carried from trip to trip (a reduction's running best): these keep a branch
        "argmax_256x4096": (topi.argmax(rows, axis=1), [rows], lambda v: np.argmax(v, axis=1)),
        "max_256x4096": (topi.max(rows, axis=1), [rows], lambda v: np.max(v, axis=1)),
    }


def measure(repeat: int, kernels: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per kernel: its thread time at one thread, and its largest difference from
    numpy (a select is exact: 0)."""
    import numpy as np

    import ember
    from ember import tir, topi
    from ember.runtime.threads import ThreadControl

    cases = _cases()
    unknown = [k for k in kernels or [] if k not in cases]
    if unknown:
        raise ValueError(f"unknown kernel {unknown[0]!r}; choose from {', '.join(cases)}")
    rng = np.random.default_rng(0)
    rows = []
    for name in kernels or list(cases):
        out, args, ref = cases[name]
        mod = tir.build(topi.auto_schedule(out), [*args, out], name="bench")
        f = mod["bench"]
        values = [rng.uniform(-1, 1, [int(d) for d in a.shape]) for a in args]
        values = [v > 0 if a.dtype == "bool" else v.astype(a.dtype) for a, v in zip(args, values)]
        arrays = [ember.nd.array(v) for v in values]
        result = ember.nd.empty([int(d) for d in out.shape], out.dtype)
        with ThreadControl(mod).use(1):  # thread time sees only the calling thread's work
            us = best_of(lambda f=f, a=arrays, r=result: f(*a, r), repeat, time.thread_time) * 1e6
        diff = float(np.max(np.abs(result.numpy() - ref(*values))))
        rows.append({"kernel": name, "thread_us": us, "max_abs_diff": diff})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", type=lambda v: v.split(","), default=None,
                   help="comma-separated kernel names (default: all)")
    p.add_argument("--repeat", type=int, default=200, help="timed calls per kernel (>= 1)")
    p.add_argument("--json", default=str(DEFAULT_JSON))
    opts = p.parse_args(argv)
    if opts.repeat < 1:
        p.error(f"--repeat must be at least 1, got {opts.repeat}")
    rows = measure(opts.repeat, opts.kernels)
    print(table([(r["kernel"], r["thread_us"], r["max_abs_diff"]) for r in rows],
                ["kernel", "thread us (min)", "max |diff|"]))
    with open_results(opts.json) as f:
        json.dump({"repeat": opts.repeat, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
