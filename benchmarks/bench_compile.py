"""Compile times: where a model's build spends its time, cold and warm.

    python benchmarks/bench_compile.py                              # the four models below
    python benchmarks/bench_compile.py --models resnet18 --json out.json
    python benchmarks/bench_compile.py --models mlp --small          # a smoke run
    python benchmarks/bench_compile.py --executor aot                 # as benchmarks/run.py builds

Per model (graph executor unless ``--executor``, target llvm), in a fresh ``EMBER_CACHE_DIR``:

- ``empty``: the first build into an empty cache: lowering, ember's kernel objects, the
  model's C units, ember's backend, the link;
- ``cold``: a model never built before, on a machine that has built models before: the same
  model under another ``mod_name`` (so every function name, hence every unit, is new) with the
  lowered-kernel cache off; kernel objects and the backend come from the cache. This is what
  the compile-time targets are about;
- ``warm``: the same build again (the library comes from the cache).

Each row gives wall seconds and CPU seconds: this process's (Python: passes, lowering, C
generation) and the C compiler's (its processes' user + system time). On a shared machine CPU
seconds are what the build would cost alone; on an idle one with two cores, wall is about the
Python seconds plus half the compiler's (kernel objects start compiling in the background
while the model is lowered). Then the relay.build stages (optimise, lower, compile) and what
the C compiler did (units and kernel objects compiled, the slowest, the link).

``--objects`` then compiles each kernel object of the empty build again, one at a time, and
prints the C compiler's CPU seconds per object (``-O3`` with the build's flags): what each
costs alone, the figure that stays meaningful when other processes load the machine (wall
time there measures the scheduler). Results also go to JSON (``$EMBER_CACHE_DIR/bench_results/bench_compile.json``
unless ``--json``).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember
from ember import relay
from ember.contrib import cc
from ember.relay._build import stage_listener
from ember.relay.backend import Executor

from _report import open_results, results_path, table

MODELS = ("resnet18", "mobilenet_v2", "dbnet", "yolov8")
# The cold-compile targets on the 2-core reference machine, seconds.
TARGETS = {"resnet18": 2.0, "dbnet": 6.0}


def _cpu() -> tuple[float, float]:
    """CPU seconds so far of this process and of its ended children (the C compiler)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def workload(name: str, small: bool = False) -> tuple[ember.IRModule, dict[str, Any]]:
    from _models import workload as zoo_workload

    kind, kwargs = zoo_workload(name, small)
    return importlib.import_module(f"ember.relay.testing.{kind}").get_workload(**kwargs)


@contextmanager
def _env(**values: str | None) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _cc_summary(reports: list[cc.BuildReport]) -> dict[str, Any]:
    steps = [s for r in reports for s in r.steps if not s.cached]
    slowest = max(steps, key=lambda s: s.seconds, default=None)
    return {"units_compiled": sum(not s.source.startswith("kernel_") for s in steps),
            "kernels_compiled": sum(s.source.startswith("kernel_") for s in steps),
            "cached": sum(s.cached for r in reports for s in r.steps),
            "cc_s": round(sum(r.compile_seconds for r in reports), 3),
            "link_s": round(sum(r.link_seconds for r in reports), 3),
            "slowest": f"{slowest.source} {slowest.seconds:.2f}s" if slowest else "-",
            "steps": {s.source: round(s.seconds, 3) for s in steps}}


def timed_build(build: Callable[[], Any]) -> dict[str, Any]:
    """One build: wall and CPU seconds, relay.build's stages, the C compiler's report."""
    stages: dict[str, float] = {}

    def on_stage(name: str, seconds: float | None) -> None:
        if seconds is not None:
            stages[name] = round(stages.get(name, 0.0) + seconds, 3)

    wall, (py, kids) = time.perf_counter(), _cpu()
    with stage_listener(on_stage), cc.build_reports() as reports:
        build()
    py_end, kids_end = _cpu()
    return {"wall_s": round(time.perf_counter() - wall, 3),
            "cpu_s": round(py_end - py + kids_end - kids, 3), "py_cpu_s": round(py_end - py, 3),
            "cc_cpu_s": round(kids_end - kids, 3), "stages": stages, "cc": _cc_summary(reports)}


def object_cpu(cache: str) -> dict[str, float]:
    """The C compiler's CPU seconds (user + system) for each kernel object the builds into
    ``cache`` prefetched (``$EMBER_CACHE_DIR/prefetch``), each compiled again alone."""
    from ember.relay.backend.te_compiler import arch_options

    argv = cc.compiler_argv()
    arch = arch_options(ember.target.Target("llvm"))
    flags = [f for f in cc.default_flags(shlex.join(argv), True, arch)
             if f != "-shared" and not f.startswith("-Wl,")] + arch
    out = {}
    for src in sorted(pathlib.Path(cache, "prefetch").glob("*/kernel_*.c")):
        before = _cpu()[1]
        subprocess.run([*argv, *flags, "-c", str(src), "-o", os.devnull], check=True)
        out[src.name] = round(_cpu()[1] - before, 2)
    return out


def measure(name: str, small: bool = False, executor: str = "graph",
            objects: bool = False) -> dict[str, Any]:
    """The empty, cold and warm builds of one model (see the module docstring); with
    ``objects``, ``object_cpu`` of its kernel objects too."""
    mod, params = workload(name, small)

    def build(mod_name: str) -> Callable[[], Any]:
        def run() -> Any:
            with ember.transform.PassContext(opt_level=3):
                return relay.build(mod, "llvm", params=params, mod_name=mod_name,
                                   executor=Executor(executor))
        return run

    tmp = tempfile.mkdtemp(prefix="ember-bench-compile-")
    try:
        with _env(EMBER_CACHE_DIR=tmp):
            out = {"empty": timed_build(build("default"))}
            with _env(EMBER_KERNEL_CACHE="0"):
                out["cold"] = timed_build(build("cold"))
            out["warm"] = timed_build(build("default"))
            if objects:
                out["objects_cpu_s"] = object_cpu(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _warm_up() -> None:
    """Import and first-use costs (numpy, the op registry, compiler probes) outside timings."""
    x = relay.var("x", shape=(1, 4), dtype="float32")
    mod = ember.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    tmp = tempfile.mkdtemp(prefix="ember-bench-compile-")
    try:
        with _env(EMBER_CACHE_DIR=tmp):
            relay.build(mod, "llvm")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def rows(results: dict[str, dict[str, Any]]) -> list[list[Any]]:
    out = []
    for name, r in results.items():
        for kind in ("empty", "cold", "warm"):
            b = r[kind]
            st, c = b["stages"], b["cc"]
            out.append([f"{name} {kind}", b["wall_s"], b["cpu_s"], b["py_cpu_s"],
                        b["cc_cpu_s"], st.get("optimize"),
                        st.get("lower"), st.get("compile"), c["units_compiled"],
                        c["kernels_compiled"], c["cached"], c["link_s"], c["slowest"]])
    return out


HEADS = ["model build", "wall s", "cpu s", "py cpu", "cc cpu", "optimise", "lower", "compile",
         "units",
         "kernels", "cached", "link", "slowest C compile"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--small", action="store_true",
                        help="the models' reduced configurations (a smoke run)")
    parser.add_argument("--executor", default="graph", choices=("graph", "aot"),
                        help="the executor built (benchmarks/run.py builds aot)")
    parser.add_argument("--json", default=None, help="where to write the results")
    parser.add_argument("--objects", action="store_true",
                        help="also each kernel object's C compiler CPU seconds, compiled alone")
    opts = parser.parse_args(argv)
    _warm_up()
    results = {}
    for name in opts.models.split(","):
        results[name] = measure(name, opts.small, opts.executor, opts.objects)
        cold = results[name]["cold"]
        print(f"{name}: cold {cold['wall_s']:.2f}s wall ({cold['py_cpu_s']:.2f}s python, "
              f"{cold['cc_cpu_s']:.2f}s C compiler cpu)", file=sys.stderr, flush=True)
    print(table(rows(results), HEADS))
    if opts.objects:
        print(table([[name, obj, sec] for name, r in results.items()
                     for obj, sec in sorted(r["objects_cpu_s"].items(), key=lambda kv: -kv[1])]
                    + [[name, "(all)", round(sum(r["objects_cpu_s"].values()), 2)]
                       for name, r in results.items()],
                    ["model", "kernel object", "cc cpu s alone"]))
    for name, limit in TARGETS.items():
        if name in results:
            cold = results[name]["cold"]
            empty = results[name]["empty"]
            print(f"target: {name} cold compile under {limit:.0f}s: wall {cold['wall_s']:.2f}s, "
                  f"cpu {cold['py_cpu_s']:.2f}s python + {cold['cc_cpu_s']:.2f}s C compiler "
                  f"(empty cache: wall {empty['wall_s']:.2f}s, cpu {empty['py_cpu_s']:.2f}s + "
                  f"{empty['cc_cpu_s']:.2f}s)")
    path = opts.json or results_path("bench_compile.json")
    with open_results(path) as f:
        json.dump({"models": results, "small": opts.small, "executor": opts.executor,
                   "targets_s": TARGETS,
                   "cpus": os.cpu_count(),
                   "load_avg": os.getloadavg()}, f, indent=2)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
