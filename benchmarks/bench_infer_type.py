"""InferType in a VM build: how often it runs, how often it has work to do, what it costs.

    python benchmarks/bench_infer_type.py                       # transformer and resnet18
    python benchmarks/bench_infer_type.py --models mlp --repeat 1 --json out.json

Passes start and end with InferType, so a build re-infers, again and again, the module the
previous pass has just typed. InferType now returns a module it typed itself, unchanged since,
without checking it again. Per model (``relay.vm.compile``, target llvm, opt_level 3, the
kernel cache warm so that the C compiler does not drown the figures), both ways in one run:

- ``re-check``: every InferType checks the whole module (what the build did before);
- ``reuse``: a module typed already is reused (what it does now).

Columns: InferType runs per build, the runs that checked a module, InferType's seconds and the
build's (best of ``--repeat``). The two builds' bytecode and kernels are compared: they must be
the same. JSON goes to ``$EMBER_CACHE_DIR/bench_results/bench_infer_type.json`` unless
``--json``.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember
from ember import relay
from ember.relay.transform import type_infer

from _models import workload as zoo_workload
from _report import open_results, results_path, table

MODELS = ("transformer", "resnet18")


def _load(name: str) -> tuple[ember.IRModule, dict[str, Any]]:
    kind, kwargs = zoo_workload(name)
    return importlib.import_module(f"ember.relay.testing.{kind}").get_workload(**kwargs)


class _Counter:
    """Counts InferType runs and the checks among them; ``reuse`` False re-checks all."""

    def __init__(self, reuse: bool) -> None:
        self.runs = self.checks = 0
        self.seconds = 0.0
        self.reuse = reuse

    def __enter__(self) -> _Counter:
        self._run, self._records = type_infer.InferType.transform_module, type_infer._records
        counter, run = self, self._run

        def counted(pass_: Any, mod: ember.IRModule, ctx: Any) -> ember.IRModule:
            counter.runs += 1
            counter.checks += type_infer._records(mod) is None
            start = time.perf_counter()
            try:
                return run(pass_, mod, ctx)
            finally:
                counter.seconds += time.perf_counter() - start

        type_infer.InferType.transform_module = counted  # type: ignore[method-assign]
        if not self.reuse:
            type_infer._records = lambda mod: None
        return self

    def __exit__(self, *exc: object) -> None:
        type_infer.InferType.transform_module = self._run  # type: ignore[method-assign]
        type_infer._records = self._records


def _build(mod: ember.IRModule, params: dict[str, Any]) -> tuple[float, str]:
    start = time.perf_counter()
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    seconds = time.perf_counter() - start
    code, _ = exe.save()
    digest = hashlib.sha256(bytes(code) + exe.lib.get_source().encode()).hexdigest()[:16]
    return seconds, digest


def measure(name: str, repeat: int) -> list[dict[str, Any]]:
    mod, params = _load(name)
    _build(mod, params)  # warm the kernel cache
    rows = []
    for mode, reuse in (("re-check", False), ("reuse", True)):
        best: dict[str, Any] | None = None
        for _ in range(repeat):
            with _Counter(reuse) as counter:
                seconds, digest = _build(mod, params)
            row = {"model": name, "mode": mode, "runs": counter.runs, "checks": counter.checks,
                   "infer_s": counter.seconds, "build_s": seconds, "result": digest}
            best = row if best is None or seconds < best["build_s"] else best
        rows.append(best)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--repeat", type=int, default=3, help="builds per mode (best kept)")
    parser.add_argument("--json", default=None, help="where to write the results")
    args = parser.parse_args(argv)
    rows = [r for name in args.models for r in measure(name, args.repeat)]
    same: Callable[[str], bool] = lambda m: len({r["result"] for r in rows if r["model"] == m}) == 1
    print(table([[r["model"], r["mode"], r["runs"], r["checks"], r["infer_s"], r["build_s"],
                  "same" if same(r["model"]) else "DIFFERENT"] for r in rows],
                ["model", "mode", "runs", "checks", "infer s", "build s", "result"]))
    path = args.json or results_path("bench_infer_type.json")
    with open_results(path) as out:
        json.dump(rows, out, indent=1)
    print(f"results: {path}")
    return 0 if all(same(name) for name in args.models) else 1


if __name__ == "__main__":
    sys.exit(main())
