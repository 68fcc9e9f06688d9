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
- ``c prog us``: a standalone C program (no Python, no heap) running the C-interface build,
  from its Model Library Format export (:func:`standalone_c_us`);
- memory: intermediate bytes planned (graph: storage plan; AOT: the arena), the lower bound
  (the largest sum of sizes live at one time) and the sum of all intermediates (no reuse).

A second table (``--zoo``) gives, for every zoo model at its published size, the AOT arena
planned against its lower bound and the no-reuse sum, the ratio (target: within 5% of the
lower bound; misses are listed), and the graph executor's storage plan beside it.

Writes the same figures as JSON (default bench_results/executors.json in the cache directory).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path  # noqa: E402
import ember
from ember import relay
from ember.relay import testing
from ember.relay.backend import Executor, Runtime

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


def standalone_c_us(mod: Any, params: dict[str, Any], inputs: dict[str, np.ndarray],
                    outputs: list[np.ndarray], number: int, repeat: int) -> float:
    """Latency of the C-interface build in a standalone C program on ember/crt (no Python).

    The model is built for target ``c`` (C interface, unpacked calls, params in a constant
    pool the program hands over), exported as Model Library Format, and the generated test
    runner (ember.testing.aot) is built once with ``-O3 -march=native`` (as relay.build's
    libraries) and a timing loop; its outputs are checked against ``outputs`` first.
    Microseconds per inference, best of ``repeat`` batches of ``number`` runs."""
    from ember.testing.aot import AOTTestModel, AOTTestRunner, compile_and_run

    model = AOTTestModel(module=mod, inputs=inputs, params=params, output_tolerance=1e-4,
                         outputs={f"output{i}": o for i, o in enumerate(outputs)})
    runner = AOTTestRunner(parameters={
        "CFLAGS": "-O3 -march=native",
        "TEST_CFLAGS": f"-DAOT_BENCH_REPEAT={repeat} -DAOT_BENCH_NUMBER={number}"})
    result = compile_and_run(model, runner, "c", True, link_params=False)
    return result.bench["default"] * 1e6


def measure(model: str, executor: str, number: int, repeat: int) -> dict[str, Any]:
    mod, params, inputs = MODELS[model]()
    ex, rt = EXECUTORS[executor]
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", executor=ex, runtime=rt, params=params)
    m = factory["default"](ember.cpu(0))
    m.set_input(**inputs)
    m.run()
    outputs = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
    prog = (standalone_c_us(mod, params, inputs, outputs, number, repeat)
            if executor == "aot-c" else None)
    return {"model": model, "executor": executor,
            "py_us": best_us(m.run, number, repeat),
            "c_us": m.benchmark(number=number, repeat=repeat).min * 1e6,
            "c_prog_us": prog, **memory(executor, factory, mod, params)}


# Every zoo model at the sizes of its published workload (the LSTM keeps its cell as a Relay
# function: AOT refuses it, and the table says so).
ZOO: dict[str, Callable[[], tuple[Any, dict[str, Any]]]] = {
    "mlp": lambda: testing.mlp.get_workload(1),
    "synthetic": lambda: testing.synthetic.get_workload(),
    "dqn": lambda: testing.dqn.get_workload(1),
    "dcgan": lambda: testing.dcgan.get_workload(1),
    "lstm": lambda: testing.lstm.get_workload(iterations=4, num_hidden=16),
    "resnet18": lambda: testing.resnet.get_workload(num_layers=18),
    "resnet50": lambda: testing.resnet.get_workload(num_layers=50),
    "mobilenet": lambda: testing.mobilenet.get_workload(),
    "squeezenet": lambda: testing.squeezenet.get_workload(),
    "vgg11": lambda: testing.vgg.get_workload(1, num_layers=11),
    "densenet121": lambda: testing.densenet.get_workload(batch_size=1),
    "inception_v3": lambda: testing.inception_v3.get_workload(),
}
ARENA_TARGET = 1.05  # planned arena within 5% of the lower bound


def zoo_memory(name: str) -> dict[str, Any]:
    """AOT arena bytes (planned, lower bound, no reuse) of a zoo model, and the graph
    executor's storage plan of the same fused program for comparison."""
    mod, params = ZOO[name]()
    row: dict[str, Any] = {"model": name}
    try:
        with ember.transform.PassContext(opt_level=3):
            factory = relay.build(mod, "llvm", executor=Executor("aot"), runtime=Runtime("cpp"),
                                  params=params)
    except ember.TVMError as err:
        return {**row, "refused": str(err).split(": ", 1)[-1].split(";")[0]}
    mem = factory.get_model_metadata().memory
    row.update({k: mem[k] for k in ("planned_bytes", "lower_bound", "total_bytes")})
    row["ratio"] = mem["planned_bytes"] / mem["lower_bound"] if mem["lower_bound"] else 1.0
    row["within_target"] = row["ratio"] <= ARENA_TARGET
    row["graph_planned_bytes"] = memory("graph", None, mod, params)["planned_bytes"]
    return row


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if v < 1 else f"{v:.2f}"
    return "-" if v is None else str(v)


def _table(rows: list[dict[str, Any]], cols: list[str], heads: list[str]) -> None:
    widths = [max(len(h), *(len(_fmt(r.get(c))) for r in rows)) for h, c in zip(heads, cols)]
    print("  ".join(h.rjust(w) for h, w in zip(heads, widths)))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).rjust(w) for c, w in zip(cols, widths)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000,
                        help="calls per repeat for add (mlp: /20, cnn: /2000)")
    parser.add_argument("--repeat", type=int, default=20, help="repeats (the best is kept)")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--zoo", nargs="*", default=list(ZOO), choices=list(ZOO),
                        help="zoo models of the memory table (none: --zoo with no name)")
    default_json = results_path("executors.json")
    parser.add_argument("--json", default=str(default_json), help="where to write results")
    opts = parser.parse_args()

    # fewer calls per repeat for the bigger models, so that each repeat stays short
    calls = {"add": opts.number, "mlp": max(opts.number // 20, 10),
             "cnn": max(opts.number // 2000, 5)}
    rows = [measure(model, ex, calls[model], opts.repeat)
            for model in opts.models for ex in EXECUTORS]
    if rows:
        _table(rows, ["model", "executor", "py_us", "c_us", "c_prog_us", "planned_bytes",
                      "lower_bound", "total_bytes"],
               ["model", "executor", "py us", "c us", "c prog us", "planned B", "lower bound B",
                "no reuse B"])
    zoo = [zoo_memory(name) for name in opts.zoo]
    if zoo:
        print("\nzoo: AOT arena (intermediates) vs its lower bound; graph executor plan beside")
        _table(zoo, ["model", "planned_bytes", "lower_bound", "total_bytes", "ratio",
                     "graph_planned_bytes", "refused"],
               ["model", "aot planned B", "lower bound B", "no reuse B", "planned/lb",
                "graph planned B", "refused"])
        misses = [r for r in zoo if "ratio" in r and not r["within_target"]]
        for r in misses:
            print(f"  {r['model']}: arena {100 * (r['ratio'] - 1):.1f}% above the lower bound "
                  f"(target {100 * (ARENA_TARGET - 1):.0f}%)")
    os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
    with open_results(opts.json) as f:
        json.dump({"benchmark": "executors", "unit": {"latency": "us", "memory": "bytes"},
                   "number": opts.number, "repeat": opts.repeat,
                   "python": platform.python_version(), "machine": platform.machine(),
                   "results": rows, "zoo_memory": zoo}, f, indent=2)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
