"""Process CPU time per model build, and the share of it in type inference.

    EMBER_CACHE_DIR=/tmp/c python benchmarks/bench_typing_cpu.py          # run twice: the
    EMBER_CACHE_DIR=/tmp/c python benchmarks/bench_typing_cpu.py          # 2nd has C cached

Each build (the zoo at small sizes with ``relay.build``, the LSTM with ``relay.vm.compile``,
and ONNX twins of zoo models through ``relay.frontend.from_onnx``) is timed in process CPU
seconds (``time.process_time``: this process only, C compiles in children excluded), with
InferType's own share (every InferType run, the module-level reuse included). Run it with the
kernel cache warm (a second run with the same ``EMBER_CACHE_DIR``) so that Python's compile
time is what is measured. JSON goes to ``$EMBER_CACHE_DIR/bench_results/bench_typing_cpu.json``
unless ``--json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember
from ember import relay
from ember.relay.testing import onnx_twin
from ember.relay.transform import type_infer

from _report import open_results, results_path, table

_IMG64 = {"image_shape": (3, 64, 64), "num_classes": 10}
ZOO_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "resnet18_64": ("resnet", {"num_layers": 18, **_IMG64}),
    "mobilenet": ("mobilenet", {"alpha": 0.25, "image_shape": (3, 32, 32), "num_classes": 10}),
    "transformer": ("transformer", {"seq_len": 16, "hidden": 32, "ffn": 64}),
    "gpt2": ("gpt2", {"seq_len": 16, "hidden": 32, "num_heads": 2, "num_layers": 2,
                      "vocab_size": 64}),
}
ONNX_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "onnx_dscnn": ("dscnn", {}),
    "onnx_resnet8": ("resnet8", {}),
    "onnx_mobilenet_v2": ("mobilenet_v2", {"alpha": 0.35, "image_shape": (3, 32, 32),
                                           "num_classes": 10}),
    "onnx_vit": ("vit", {"image_size": 32, "patch": 8, "dim": 48, "depth": 2,
                         "num_classes": 10}),
}


class _InferTimer:
    """Adds up the CPU seconds spent in InferType while active."""

    def __init__(self) -> None:
        self.seconds, self.runs = 0.0, 0

    def __enter__(self) -> _InferTimer:
        self._orig = orig = type_infer.InferType.transform_module
        timer = self

        def timed(pass_: Any, mod: ember.IRModule, ctx: Any) -> ember.IRModule:
            t0 = time.process_time()
            try:
                return orig(pass_, mod, ctx)
            finally:
                timer.seconds += time.process_time() - t0
                timer.runs += 1

        type_infer.InferType.transform_module = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        type_infer.InferType.transform_module = self._orig  # type: ignore[method-assign]


def _zoo(kind: str, kwargs: dict[str, Any]) -> Callable[[], Any]:
    import importlib
    mod, params = importlib.import_module(f"ember.relay.testing.{kind}").get_workload(**kwargs)
    return lambda: relay.build(mod, target="llvm", params=params)


def _lstm() -> Callable[[], Any]:
    from ember.relay.testing import lstm
    mod, params = lstm.get_workload(iterations=4, num_hidden=16)
    return lambda: relay.vm.compile(mod, target="llvm", params=params)


def _onnx(kind: str, kwargs: dict[str, Any]) -> Callable[[], Any]:
    model = onnx_twin(kind, **kwargs)[0]

    def build() -> Any:
        mod, params = relay.frontend.from_onnx(model)  # the import is part of the build
        return relay.build(mod, target="llvm", params=params)
    return build


def cases() -> dict[str, Callable[[], Callable[[], Any]]]:
    out: dict[str, Callable[[], Callable[[], Any]]] = {}
    for name, (kind, kw) in ZOO_CASES.items():
        out[name] = lambda k=kind, a=kw: _zoo(k, a)
    out["lstm_vm"] = _lstm
    for name, (kind, kw) in ONNX_CASES.items():
        out[name] = lambda k=kind, a=kw: _onnx(k, a)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated case names")
    ap.add_argument("--repeat", type=int, default=1, help="builds per case (best kept)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    all_cases = cases()
    names = args.models.split(",") if args.models else list(all_cases)
    unknown = [n for n in names if n not in all_cases]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(all_cases)}")
    rows, results = [], {}
    for name in names:
        build = all_cases[name]()
        best: tuple[float, float, int] | None = None
        for _ in range(args.repeat):
            with _InferTimer() as timer:
                t0 = time.process_time()
                build()
                cpu = time.process_time() - t0
            if best is None or cpu < best[0]:
                best = (cpu, timer.seconds, timer.runs)
        assert best is not None
        rows.append((name, best[0], best[1], best[2]))
        results[name] = {"build_cpu_s": best[0], "infer_type_cpu_s": best[1],
                         "infer_type_runs": best[2]}
    total = sum(r[1] for r in rows), sum(r[2] for r in rows)
    rows.append(("total", total[0], total[1], sum(r[3] for r in rows)))
    print(table(rows, ["build", "CPU s", "InferType CPU s", "InferType runs"]))
    path = args.json or results_path("bench_typing_cpu.json")
    with open_results(path) as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
