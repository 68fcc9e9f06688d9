"""RPC round trips over loopback: an empty remote call, and NDArray copies each way.

    python benchmarks/bench_rpc.py [--repeat R] [--json PATH] [--transports tcp,pipe,local]

Starts an ``ember.rpc.Server`` on 127.0.0.1 (a free port) and, for each transport (``tcp``:
``rpc.connect``; ``pipe``: ``PopenSession``; ``local``: ``LocalSession``, no transport at all),
times:

- ``call``: a remote call of ``testing.nop`` (request and reply frames, no payload);
- ``to_1MB`` / ``to_16MB``: ``remote_array.copyfrom(numpy_array)`` of float32 data;
- ``from_1MB`` / ``from_16MB``: ``remote_array.numpy()``.

Prints the median and best of R repeats (microseconds for calls, milliseconds and MB/s for
copies) and writes the figures as JSON (default bench_results/rpc.json in the cache directory).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path  # noqa: E402
import ember  # noqa: E402
from ember import rpc  # noqa: E402

SIZES = {"1MB": 1 << 20, "16MB": 16 << 20}


def timings(run: Callable[[], Any], repeat: int) -> list[float]:
    """Seconds of each of ``repeat`` runs (after one warm-up run)."""
    run()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        out.append(time.perf_counter() - start)
    return out


def cases(sess: rpc.RPCSession) -> dict[str, tuple[Callable[[], Any], int]]:
    """name -> (run, bytes moved per run)."""
    nop = sess.get_function("testing.nop")
    out: dict[str, tuple[Callable[[], Any], int]] = {"call": (nop, 0)}
    for label, nbytes in SIZES.items():
        data = np.random.default_rng(0).standard_normal(nbytes // 4).astype("float32")
        remote = ember.nd.empty(data.shape, "float32", sess.cpu(0))
        out[f"to_{label}"] = (lambda r=remote, d=data: r.copyfrom(d), nbytes)
        out[f"from_{label}"] = (remote.numpy, nbytes)
    return out


def measure(sess: rpc.RPCSession, repeat: int) -> dict[str, dict[str, float]]:
    results = {}
    for name, (run, nbytes) in cases(sess).items():
        secs = timings(run, repeat if nbytes < 8 << 20 else max(repeat // 4, 3))
        med, best = statistics.median(secs), min(secs)
        entry = {"median_s": med, "best_s": best, "bytes": nbytes}
        if nbytes:
            entry["median_MBps"] = nbytes / med / 1e6
        results[name] = entry
    return results


def sessions(names: list[str], server: rpc.Server) -> dict[str, rpc.RPCSession]:
    make = {"tcp": lambda: rpc.connect(server.host, server.port, timeout=120),
            "pipe": lambda: rpc.PopenSession(timeout=120),
            "local": rpc.LocalSession}
    return {name: make[name]() for name in names}


def print_table(results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(f"{'transport':<9} {'case':<10} {'median':>12} {'best':>12} {'MB/s':>9}")
    for transport, rows in results.items():
        for name, r in rows.items():
            if r["bytes"]:
                med, best = f"{r['median_s'] * 1e3:.2f} ms", f"{r['best_s'] * 1e3:.2f} ms"
                rate = f"{r['median_MBps']:.0f}"
            else:
                med, best = f"{r['median_s'] * 1e6:.1f} us", f"{r['best_s'] * 1e6:.1f} us"
                rate = ""
            print(f"{transport:<9} {name:<10} {med:>12} {best:>12} {rate:>9}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="runs per case (copies of "
                        "16 MB use a quarter of them)")
    parser.add_argument("--transports", default="tcp,pipe,local",
                        help="comma-separated: tcp, pipe, local")
    default_json = results_path("rpc.json")
    parser.add_argument("--json", default=str(default_json), help="where to write results")
    opts = parser.parse_args()

    with rpc.Server(port=0, silent=True) as server:
        opened = sessions(opts.transports.split(","), server)
        try:
            results = {name: measure(sess, opts.repeat) for name, sess in opened.items()}
        finally:
            for sess in opened.values():
                sess.close()
    print_table(results)
    os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
    with open_results(opts.json) as f:
        json.dump({"benchmark": "rpc", "repeat": opts.repeat, "python": platform.python_version(),
                   "machine": platform.machine(), "results": results}, f, indent=2)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
