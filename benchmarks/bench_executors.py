"""Graph executor vs AOT executor: per-call latency from Python, and planned memory.

    python benchmarks/bench_executors.py [--number N] [--repeat R] [--json PATH] [--models ...]

Models: ``add`` (the AOT RFC's uint8[1, 2] add: pure call overhead), a small ``mlp`` (dense
layers) and a small ``cnn`` (conv2d/batch_norm/relu/pool/dense). Executors: the graph
executor, AOT with the packed interface (C++ runtime, cpacked operator calls) and AOT with the
C interface (C runtime, unpacked calls, linked params), each built with ``relay.build`` and
run through ``factory["default"](dev)``.

Columns:

- ``py us``: one ``m.run()`` called from Python (best of R repeats of N calls): what a Python
  caller pays per inference, overhead included (target for ``add`` with AOT: < 5 us);
- ``c us``: ``m.benchmark()`` (the compiled entry called in a C loop where the executor
  allows; the graph executor's loop is Python's), the model's own cost;
- ``c prog us``: a standalone C program (no Python) running the C-interface build. Not
  measured yet: :func:`standalone_c_us` is the hook that Model Library Format fills in;
- memory: intermediate bytes planned (graph: storage plan; AOT: the arena), the lower bound
  (the largest sum of sizes live at one time) and the sum of all intermediates (no reuse).

Writes the same figures as JSON (default bench_results/executors.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember  # noqa: E402
from ember import relay  # noqa: E402
from ember.relay.backend import Executor, Runtime  # noqa: E402

EXECUTORS: dict[str, tuple[Executor, Runtime]] = {
    "graph": (Executor("graph"), Runtime("cpp")),
    "aot-packed": (Executor("aot"), Runtime("cpp")),
    "aot-c": (Executor("aot", {"interface-api": "c", "unpacked-api": True, "link-params": True}),
              Runtime("crt")),
}


def add_model() -> tuple[ember.IRModule, dict[str, Any], dict[str, np.ndarray]]:
    mod = ember.parser.fromtext('#[version = "0.0.5"]\n'
                                "def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), uint8]) "
                                "{ %a + %b }")
    return mod, {}, {"a": np.array([[1, 2]], "uint8"), "b": np.array([[3, 5]], "uint8")}


def mlp_model() -> tuple[ember.IRModule, dict[str, Any], dict[str, np.ndarray]]:
    from ember.relay.testing import mlp

    mod, params = mlp.get_workload(1, image_shape=(1, 16, 16))
    return mod, params, {"data": np.random.default_rng(0).random((1, 1, 16, 16), "float32")}


def cnn_model() -> tuple[ember.IRModule, dict[str, Any], dict[str, np.ndarray]]:
    from ember.relay.testing import resnet

    mod, params = resnet.get_workload(num_layers=18, num_classes=10, image_shape=(3, 32, 32))
    return mod, params, {"data": np.random.default_rng(0).random((1, 3, 32, 32), "float32")}


MODELS = {"add": add_model, "mlp": mlp_model, "cnn": cnn_model}


def best_us(run: Callable[[], Any], number: int, repeat: int) -> float:
    """Best per-call time in microseconds over ``repeat`` runs of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            run()
        best = min(best, time.perf_counter() - start)
    return best / number * 1e6


def memory(name: str, factory: Any, mod: Any, params: dict[str, Any]) -> dict[str, int]:
    """Planned bytes, lower bound and no-reuse total of the intermediates."""
    if name.startswith("aot"):
        mem = factory.get_model_metadata().memory
        return {k: mem[k] for k in ("planned_bytes", "lower_bound", "total_bytes")}
    from ember.relay.backend.memory_plan import plan_memory

    with ember.transform.PassContext(opt_level=3):
        fused, _ = relay.optimize(mod, "llvm", params=params)
    report = plan_memory(fused).report
    return {"planned_bytes": report.planned_bytes, "lower_bound": report.lower_bound,
            "total_bytes": report.total_bytes}


def standalone_c_us(factory: Any, inputs: dict[str, np.ndarray]) -> float | None:
    """Latency of the C-interface build in a standalone C program on ember/crt (no Python).

    Hook for the Model Library Format work: export ``factory``, build the generated runner
    against the C runtime, run it and return microseconds per inference. None until then."""
    return None


def measure(model: str, executor: str, number: int, repeat: int) -> dict[str, Any]:
    mod, params, inputs = MODELS[model]()
    ex, rt = EXECUTORS[executor]
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", executor=ex, runtime=rt, params=params)
    m = factory["default"](ember.cpu(0))
    m.set_input(**inputs)
    m.run()
    return {"model": model, "executor": executor,
            "py_us": best_us(m.run, number, repeat),
            "c_us": m.benchmark(number=number, repeat=repeat).min * 1e6,
            "c_prog_us": standalone_c_us(factory, inputs) if executor == "aot-c" else None,
            **memory(executor, factory, mod, params)}


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000,
                        help="calls per repeat for add (mlp: /20, cnn: /2000)")
    parser.add_argument("--repeat", type=int, default=20, help="repeats (the best is kept)")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    default_json = Path(__file__).resolve().parents[1] / "bench_results" / "executors.json"
    parser.add_argument("--json", default=str(default_json), help="where to write results")
    opts = parser.parse_args()

    # fewer calls per repeat for the bigger models, so that each repeat stays short
    calls = {"add": opts.number, "mlp": max(opts.number // 20, 10),
             "cnn": max(opts.number // 2000, 5)}
    rows = [measure(model, ex, calls[model], opts.repeat)
            for model in opts.models for ex in EXECUTORS]
    cols = ["model", "executor", "py_us", "c_us", "c_prog_us", "planned_bytes", "lower_bound",
            "total_bytes"]
    heads = ["model", "executor", "py us", "c us", "c prog us", "planned B", "lower bound B",
             "no reuse B"]
    widths = [max(len(h), *(len(_fmt(r[c])) for r in rows)) for h, c in zip(heads, cols)]
    print("  ".join(h.rjust(w) for h, w in zip(heads, widths)))
    for r in rows:
        print("  ".join(_fmt(r[c]).rjust(w) for c, w in zip(cols, widths)))
    os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
    with open(opts.json, "w") as f:
        json.dump({"benchmark": "executors", "unit": {"latency": "us", "memory": "bytes"},
                   "number": opts.number, "repeat": opts.repeat,
                   "python": platform.python_version(), "machine": platform.machine(),
                   "results": rows}, f, indent=2)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
