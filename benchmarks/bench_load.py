"""Loading models again and again: time per load, and a process that loads for ever.

    python benchmarks/bench_load.py [--models mlp,mobilenet_v2] [--cycles N] [--json PATH]
    python benchmarks/bench_load.py --models mlp --cycles 100000     # the issue's target

Per model (built with ``ember.compile(...).save``; the first run compiles, later runs find the
libraries in ember's cache), milliseconds per load, best of ``--repeat`` blocks:

- ``ember.load``: ``ember.load(path)``, the model dropped again (a CompiledModel, executor made);
- ``load_module``: ``ember.runtime.load_module(path)``, dropped again (the module tree only);
- ``copy``: ``ember.load(path)`` while another model of the same file is alive (the library is
  then a private copy: its globals must not be shared).

``library`` is a library without a model (two C functions): the floor of a load.

Then ``--cycles`` load/run/drop cycles of the first model (``ember.load(path)(x)``) after
``--warmup`` ones: growth of RSS (``/proc/self/statm``, at the end and the largest seen), of
open descriptors (``/proc/self/fd``) and of mappings (``/proc/self/maps``), and how many loads
had to copy the file (0: each load opened the file itself). Target (issue 22): 100,000 cycles
with RSS growth under 5 MB. ember once died of RecursionError after 4,000 to 6,000 loads.

The first library a process loads lends its thread pool to every other one and stays loaded
(its workers run its code), so its file would load as a copy every time: this script loads a
throwaway copy first. Results are printed and written as JSON (default ``bench_results/load.json``
in ember's cache directory).
"""
from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path, table  # noqa: E402
import ember  # noqa: E402
from ember.runtime import dso  # noqa: E402
from ember.runtime.module import CSourceModule  # noqa: E402

LIBRARY_SOURCE = r"""
#include "ember/c_runtime_api.h"
TVM_DLL int nop(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  return 0;
}
"""
TARGET_RSS_MB = 5.0


def build(name: str, directory: str) -> tuple[str, dict[str, np.ndarray]]:
    """The zoo model ``name`` saved with ``ember.compile``; its path and an input."""
    from ember.relay import testing

    workload = getattr(testing, name).get_workload
    batch = {"batch_size": 1} if "batch_size" in inspect.signature(workload).parameters else {}
    mod, params = workload(**batch)
    model = ember.compile(mod, params=params)
    path = os.path.join(directory, f"{name}.so")
    model.save(path)
    rng = np.random.default_rng(0)
    inputs = {s.name: rng.random(s.shape).astype(s.dtype) for s in model.inputs}
    return path, inputs


def best_ms(step: Callable[[], Any], number: int, repeat: int) -> float:
    """Milliseconds per call, the best of ``repeat`` blocks of ``number`` calls."""
    step()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            step()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e3


def load_times(path: str, number: int, repeat: int) -> dict[str, float]:
    keep: list[Any] = []
    times = {"ember.load": best_ms(lambda: ember.load(path), number, repeat),
             "load_module": best_ms(lambda: ember.runtime.load_module(path), number, repeat)}
    keep.append(ember.load(path))
    times["copy"] = best_ms(lambda: ember.load(path), number, repeat)
    return times


def process_state() -> dict[str, int]:
    gc.collect()
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/maps") as f:
        maps = sum(1 for _ in f)
    return {"rss": rss, "fds": len(os.listdir("/proc/self/fd")), "maps": maps}


def cycles(path: str, inputs: dict[str, np.ndarray], count: int, warmup: int) -> dict[str, Any]:
    """``count`` load/run/drop cycles after ``warmup``: growth of RSS, descriptors, maps."""
    def cycle() -> None:
        ember.load(path)(**inputs)

    for _ in range(warmup):
        cycle()
    before, copies = process_state(), dso.library_stats()["copies"]
    peak, every = 0, max(1, count // 10)
    start = time.perf_counter()
    for i in range(1, count + 1):
        cycle()
        if i % every == 0:
            peak = max(peak, process_state()["rss"] - before["rss"])
            print(f"  {i:>7} cycles: RSS {peak / 2**20:+.2f} MiB at most", flush=True)
    seconds = time.perf_counter() - start
    after = process_state()
    return {"cycles": count, "warmup": warmup, "seconds": seconds,
            "ms_per_cycle": seconds / count * 1e3,
            "rss_growth_mib": (after["rss"] - before["rss"]) / 2**20,
            "rss_peak_growth_mib": max(peak, after["rss"] - before["rss"]) / 2**20,
            "fds_growth": after["fds"] - before["fds"],
            "maps_growth": after["maps"] - before["maps"],
            "copies": dso.library_stats()["copies"] - copies}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,mobilenet_v2",
                        help="zoo models (ember.relay.testing), comma-separated; the first "
                             "runs the cycles")
    parser.add_argument("--number", type=int, default=100, help="loads per timed block (a "
                        "model over 4 MB gets a tenth)")
    parser.add_argument("--repeat", type=int, default=5, help="timed blocks (the best is kept)")
    parser.add_argument("--cycles", type=int, default=2_000, help="load/run/drop cycles")
    parser.add_argument("--warmup", type=int, default=500, help="cycles before measuring")
    parser.add_argument("--json", default=str(results_path("load.json")),
                        help="where to write results")
    opts = parser.parse_args()
    if not os.path.exists("/proc/self/statm"):
        sys.exit("bench_load: needs /proc (Linux)")

    with tempfile.TemporaryDirectory(prefix="ember_bench_load_") as tmp:
        library = os.path.join(tmp, "library.so")
        shutil.copyfile(CSourceModule(LIBRARY_SOURCE).compile(), library)
        owner = os.path.join(tmp, "pool_owner.so")
        shutil.copyfile(library, owner)
        ember.runtime.load_module(owner)  # lends its pool and stays: see the module doc

        rows, results = [], {}
        lib_ms = best_ms(lambda: ember.runtime.load_module(library), opts.number, opts.repeat)
        results["library"] = {"bytes": os.path.getsize(library), "load_module_ms": lib_ms}
        rows.append(["library", os.path.getsize(library) / 2**20, None, lib_ms, None,
                     1e3 / lib_ms])
        models = {}
        for name in opts.models.split(","):
            print(f"building {name} ...", flush=True)
            models[name] = path, _ = build(name, tmp)
            size = os.path.getsize(path)
            number = opts.number if size < 4 << 20 else max(1, opts.number // 10)
            ms = load_times(path, number, opts.repeat)
            results[name] = {"bytes": size, **{f"{k}_ms": v for k, v in ms.items()}}
            rows.append([name, size / 2**20, ms["ember.load"], ms["load_module"], ms["copy"],
                         1e3 / ms["ember.load"]])
        print("\nms per load (best of the blocks; loads/s of ember.load)")
        print(table(rows, ["model", "file MiB", "ember.load", "load_module", "copy",
                           "loads/s"]))

        first = opts.models.split(",")[0]
        print(f"\n{opts.cycles} cycles of ember.load({first}.so)(x), after {opts.warmup}:")
        run = cycles(*models[first], opts.cycles, opts.warmup)
    met = "met" if run["rss_growth_mib"] < TARGET_RSS_MB else "MISSED"
    print(f"RSS {run['rss_growth_mib']:+.2f} MiB at the end ({run['rss_peak_growth_mib']:+.2f} "
          f"at most), descriptors {run['fds_growth']:+d}, mappings {run['maps_growth']:+d}, "
          f"copies {run['copies']}, {run['ms_per_cycle']:.2f} ms per cycle")
    if opts.cycles >= 100_000:
        print(f"target: 100,000 cycles with RSS growth under {TARGET_RSS_MB:g} MB: {met}")
    out = {"benchmark": "load", "unit": "ms_per_load", "number": opts.number,
           "repeat": opts.repeat, "load_average": os.getloadavg(), "results": results,
           "cycles": {"model": first, **run}}
    with open_results(opts.json) as f:
        json.dump(out, f, indent=2)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
