"""NCHW[L]c -> NCHW with a padded last block (channels not a multiple of L: a conv whose
channels AlterOpLayout padded to whole blocks, its padded lanes sliced off), per call on one
thread: the blocked-copy kernel dropping those lanes itself (``ember/kernels/layout_nchwc.h``)
next to what the pair took before (the copy of every lane into a workspace, then a loop that
slices the channels).

    python benchmarks/bench_layout_padded.py            # every case
    python benchmarks/bench_layout_padded.py --quick    # one case

Each variant is built as a model holding ``strided_slice(layout_transform(x))`` (one fused
kernel) and run through the graph executor; time is the calling thread's CPU time
(``time.thread_time``: on a shared machine wall time mostly measures the scheduler), best of 5
rounds. Prints a table and writes JSON (``--json``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import ember
from ember import relay
from _report import open_results, results_path, table

DEFAULT_JSON = results_path("bench_layout_padded.json")
# (n, channels, h, w, block): padded heads (21 VOC classes, 150 ADE20k classes, 255 YOLO
# outputs, one score map), a 3-lane last block
CASES = [(1, 21, 64, 64, 8), (1, 150, 128, 128, 8), (1, 255, 40, 40, 8), (1, 1, 160, 160, 8),
         (1, 19, 56, 56, 8), (1, 150, 128, 128, 16)]


def per_call_us(fn: Callable[[], object]) -> float:
    """Best-of-5 thread CPU microseconds per call of ``fn``."""
    fn()
    t0 = time.thread_time()
    fn()
    reps = max(3, int(0.05 / max(time.thread_time() - t0, 1e-6)))
    best = float("inf")
    for _ in range(5):
        t0 = time.thread_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.thread_time() - t0) / reps)
    return best * 1e6


def transform_runner(shape: tuple[int, ...], block: int, before: bool) -> tuple:
    """(run, output) of a graph-executor model holding the transform of blocked ``shape``'s
    NCHW[block]c form back to NCHW, sliced to ``shape``'s channels."""
    n, c, h, w = shape
    x = relay.var("x", shape=(n, -(-c // block), h, w, block), dtype="float32")
    y = relay.strided_slice(relay.layout_transform(x, f"NCHW{block}c", "NCHW"), [0], [c],
                            axes=[1])
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    # before: the slice read the whole copy (a workspace) in a loop of its own
    patch = mock.patch("ember.relay.op.indexing.channel_prefix", lambda *a: None) if before else (
        mock.patch.dict({}))
    with patch, ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    gm = ember.contrib.graph_executor.GraphModule(lib["default"](ember.cpu(0)))
    value = np.random.default_rng(0).uniform(-1, 1, [int(d) for d in x.type_annotation.shape])
    gm.set_input("x", value.astype("float32"))
    return gm.run, lambda: gm.get_output(0).numpy()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one case")
    p.add_argument("--json", default=str(DEFAULT_JSON))
    opts = p.parse_args(argv)
    rows, records = [], []
    for n, c, h, w, block in CASES[:1] if opts.quick else CASES:
        shape = (n, c, h, w)
        run_k, out_k = transform_runner(shape, block, before=False)
        run_g, out_g = transform_runner(shape, block, before=True)
        run_k(), run_g()
        np.testing.assert_array_equal(out_k(), out_g())
        kernel, generic = per_call_us(run_k), per_call_us(run_g)
        name = f"NCHW{block}c to {n}x{c}x{h}x{w}"
        rows.append([name, generic, kernel, generic / kernel])
        records.append({"case": name, "before_us": generic, "kernel_us": kernel})
    print(table(rows, ["case", "before us", "kernel us", "speedup"]))
    with open_results(opts.json) as f:
        json.dump({"clock": "thread", "cases": records}, f, indent=1)
    print(f"wrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
