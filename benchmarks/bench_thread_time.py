"""Whole-model latency by the calling thread's CPU time: ember next to onnxruntime, one thread.

    python benchmarks/bench_thread_time.py wav2vec2 crnn            # full-size zoo twins
    python benchmarks/bench_thread_time.py wav2vec2 --small --repeat 20

Each model's ONNX twin (``relay.testing.onnx_twin``, the same weights) is compiled with
``ember.compile(path, threads=1)`` and opened in onnxruntime with one intra-op thread; the two
are then called in turn (``--rounds`` rounds of ``--repeat`` calls each, interleaved so that a
change in the machine's load hits both alike), each call timed by ``time.thread_time()``: on a
machine that other jobs load, wall time measures them, the calling thread's CPU time measures
the model (both run their kernels on the calling thread at one thread). Prints one row per
model (medians in ms, ratio ember / onnxruntime, the largest difference of their outputs) and
writes JSON (``--json``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# this checkout's ember (not another installed one), and the helpers beside this file
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table
from _systems import ort_session

DEFAULT_JSON = results_path("thread_time.json")


def _cpu_ms(fn: Any, repeat: int) -> list[float]:
    """``repeat`` calls of ``fn``, each timed by the calling thread's CPU time (ms)."""
    out = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        out.append((time.thread_time() - t0) * 1e3)
    return out


def measure(case: Any, rounds: int, repeat: int, warmup: int) -> dict[str, Any]:
    """The interleaved thread-time medians of ember and onnxruntime on one ``ZooCase``."""
    import ember

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / f"{case.name}.onnx")
        Path(path).write_bytes(case.onnx_model.SerializeToString())
        compiled = ember.compile(path, threads=1)
        sess = ort_session(path, 1)
        feeds = dict(case.inputs)
        run_ember = lambda: compiled(**feeds)  # noqa: E731
        run_ort = lambda: sess.run(None, feeds)  # noqa: E731
        got, want = run_ember(), run_ort()
        got = got if isinstance(got, list) else [got]
        diff = max(float(abs(g - w).max()) for g, w in zip(got, want))
        for _ in range(warmup):
            run_ember()
            run_ort()
        em: list[float] = []
        ort: list[float] = []
        for _ in range(rounds):
            em += _cpu_ms(run_ember, repeat)
            ort += _cpu_ms(run_ort, repeat)
    e, o = statistics.median(em), statistics.median(ort)
    ratio = e / o if o > 0 else float("inf")
    return {"model": case.name, "ember_ms": e, "ort_ms": o, "ratio": ratio, "calls": len(em),
            "max_abs_diff": diff}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="zoo names or benchmark aliases")
    ap.add_argument("--small", action="store_true", help="the reduced configurations")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10, help="calls per round and system")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", default=str(DEFAULT_JSON))
    opts = ap.parse_args(argv)
    from _models import zoo_models

    rows = [measure(case, opts.rounds, opts.repeat, opts.warmup)
            for case in zoo_models(opts.models, small=opts.small)]
    print(table([[r["model"], r["ember_ms"], r["ort_ms"], r["ratio"], r["max_abs_diff"]]
                 for r in rows],
                ["model", "ember ms (thread)", "ort ms (thread)", "ratio", "max |diff|"]))
    with open_results(opts.json) as f:
        json.dump({"clock": "thread_time", "threads": 1, "models": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
