"""Build times: cold build, cached rebuild (same process and a fresh one), export.

    python benchmarks/bench_build.py                          # resnet18, graph/aot/vm
    python benchmarks/bench_build.py --models mlp,resnet18 --executors graph

Every build runs in an empty temporary ``EMBER_CACHE_DIR`` first (cold: lowering and the C
compiler), then again in the same process and in a fresh process (cached: lowered kernels and
compiled objects are found by content), then ``export_library`` twice (cold, unchanged).
Each figure is wall-clock seconds and CPU seconds (this process plus the C compiler's), since
the machine may be shared: CPU seconds are what the build costs on an idle machine.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import ember
from ember import relay
from ember.relay.backend import Executor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _models


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """``fn()`` and its wall and CPU seconds."""
    wall, cpu = time.perf_counter(), _cpu()
    out = fn()
    return out, {"wall_s": round(time.perf_counter() - wall, 3),
                 "cpu_s": round(_cpu() - cpu, 3)}


def workload(name: str) -> tuple[ember.IRModule, dict[str, Any]]:
    """The zoo model ``name`` (benchmarks/_models.py names: resnet18, mlp, ...)."""
    from _models import workload as zoo_workload

    kind, kwargs = zoo_workload(name)
    return importlib.import_module(f"ember.relay.testing.{kind}").get_workload(**kwargs)


def build(name: str, executor: str) -> Any:
    mod, params = workload(name)
    with ember.transform.PassContext(opt_level=3):
        if executor == "vm":
            return relay.vm.compile(mod, target="llvm", params=params).mod
        return relay.build(mod, "llvm", params=params, executor=Executor(executor))


def measure(name: str, executor: str) -> dict[str, Any]:
    """Cold, cached (same process and fresh process) builds and exports of one model."""
    workload(name)  # imports and the zoo's weights, outside the timings
    out: dict[str, Any] = {}
    tmp = tempfile.mkdtemp(prefix="ember-bench-build-")
    old = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = tmp
    try:
        factory, out["cold"] = timed(lambda: build(name, executor))
        _, out["cached"] = timed(lambda: build(name, executor))
        child = subprocess.run([sys.executable, __file__, "--child", name, executor],
                               capture_output=True, text=True, check=True)
        out["cached_new_process"] = json.loads(child.stdout.splitlines()[-1])
        path = os.path.join(tmp, "export.so")
        _, out["export_cold"] = timed(lambda: factory.export_library(path))
        _, out["export_cached"] = timed(lambda: factory.export_library(path))
    finally:
        if old is None:
            os.environ.pop("EMBER_CACHE_DIR", None)
        else:
            os.environ["EMBER_CACHE_DIR"] = old
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18")
    parser.add_argument("--executors", default="graph,aot,vm")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:  # one cached build in a fresh process (the parent's cache)
        workload(opts.child[0])
        print(json.dumps(timed(lambda: build(*opts.child))[1]))
        return 0
    results = {}
    for name in opts.models.split(","):
        for executor in opts.executors.split(","):
            r = measure(name, executor)
            results[f"{name}/{executor}"] = r
            print(f"{name:12s} {executor:5s} " + "  ".join(
                f"{k} {v['wall_s']:.2f}s (cpu {v['cpu_s']:.2f}s)" for k, v in r.items()),
                flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
