"""``ember demo``: compile a bundled model with every executor, check the results against the
reference interpreter, and print latency and memory per executor."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

MODELS: dict[str, Callable[[], tuple[Any, dict[str, Any]]]] = {}


def _model(name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def register(fn: Callable[[], Any]) -> Callable[[], Any]:
        MODELS[name] = fn
        return fn
    return register


@_model("mlp")
def _mlp() -> tuple[Any, dict[str, Any]]:
    from ember.relay.testing import mlp

    return mlp.get_workload(batch_size=1)


@_model("resnet18-64")
def _resnet() -> tuple[Any, dict[str, Any]]:
    from ember.relay.testing import resnet

    return resnet.get_workload(num_layers=18, image_shape=(3, 64, 64), num_classes=10)


@_model("mobilenet-64")
def _mobilenet() -> tuple[Any, dict[str, Any]]:
    from ember.relay.testing import mobilenet

    return mobilenet.get_workload(image_shape=(3, 64, 64), num_classes=10, alpha=0.5)


@dataclass
class Row:
    executor: str
    build_s: float
    max_abs_err: float
    median_us: float
    memory: str


def _time(run: Callable[[], Any], min_seconds: float = 0.3) -> float:
    """Median microseconds per call over batches lasting at least ``min_seconds`` in total."""
    run()
    samples: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_seconds or len(samples) < 5:
        t0 = time.perf_counter()
        run()
        samples.append(time.perf_counter() - t0)
    return float(np.median(samples) * 1e6)


def _graph(mod: Any, params: dict[str, Any], data: np.ndarray,
           dev: Any) -> tuple[Any, Callable, str]:
    from ember import relay
    from ember.runtime.graph_format import parse_graph

    factory = relay.build(mod, target="llvm", params=params)
    m = factory["default"](dev)
    m.set_input("data", data)
    graph = parse_graph(factory.get_graph_json())
    inputs = {graph.storage_id[graph.entry_id(n)] for n in graph.arg_nodes}
    inputs |= {graph.storage_id[graph.entry_id(h)] for h in graph.heads}
    storage = graph.storage_bytes()
    inter = {sid: n for sid, n in storage.items() if sid not in inputs}
    memory = (f"{sum(inter.values())} B intermediates in {len(inter)} storages, "
              f"{sum(storage.values()) - sum(inter.values())} B params and io")
    return m, lambda: (m.run(), m.get_output(0))[1], memory


def _aot(mod: Any, params: dict[str, Any], data: np.ndarray, dev: Any) -> tuple[Any, Callable, str]:
    from ember import relay
    from ember.ir.transform import PassContext
    from ember.relay.backend import Executor
    from ember.relay.transform import InferType

    from .analysis import BuildRecorder, memory_plan

    recorder = BuildRecorder()
    with PassContext(opt_level=3, instruments=[recorder]):
        factory = relay.build(mod, target="llvm", params=params, executor=Executor("aot"))
    if recorder.fused is not None:
        _PLANS["aot"] = memory_plan(InferType()(recorder.fused), "aot")
    m = factory["default"](dev)
    m.set_input("data", data)
    main = factory.get_model_metadata().main
    memory = (f"{main.workspace_size_bytes} B arena, {main.constant_size_bytes} B constants, "
              f"{main.io_size_bytes} B io")
    return m, lambda: (m.run(), m.get_output(0))[1], memory


def _vm(mod: Any, params: dict[str, Any], data: np.ndarray, dev: Any) -> tuple[Any, Callable, str]:
    from ember import relay
    from ember.runtime.vm import VirtualMachine

    exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = VirtualMachine(exe, dev)
    arg = __import__("ember").nd.array(data)
    run = lambda: vm.invoke("main", arg)
    run()
    stats = vm.allocator.stats()
    memory = f"{stats.get('fresh_bytes', 0)} B pooled storage"
    return vm, run, memory


EXECUTORS = {"graph": _graph, "aot": _aot, "vm": _vm}
_PLANS: dict[str, Any] = {}  # executor -> the memory plan of its last build (analysis.py)


def memory_picture(model: str) -> str | None:
    """Draw the AOT memory plan of the last demo build under the cache directory; its path,
    or None when matplotlib is missing."""
    from ..runtime.cache import cache_dir
    from .plot import have_matplotlib, plot_memory

    plan = _PLANS.get("aot")
    if plan is None or not plan.get("buffers") or not have_matplotlib():
        return None
    path = cache_dir("demo") / f"memory-{model}.png"
    plot_memory(plan, f"ember demo {model}", path)
    return str(path)


def run_demo(model: str = "mlp", executors: tuple[str, ...] = ("graph", "aot", "vm"),
             rtol: float = 1e-4, atol: float = 1e-5) -> list[Row]:
    """Build ``model`` with each executor, check against the interpreter, time it."""
    import ember
    from ember import relay

    mod, params = MODELS[model]()
    data_type = mod["main"].params[0].checked_type
    rng = np.random.default_rng(0)
    data = rng.uniform(-1, 1, size=[int(d) for d in data_type.shape]).astype(data_type.dtype)
    reference = relay.create_executor("debug", mod=mod).evaluate()(data, **params).numpy()
    dev = ember.cpu(0)
    rows = []
    for name in executors:
        t0 = time.perf_counter()
        _, run, memory = EXECUTORS[name](mod, params, data, dev)
        build_s = time.perf_counter() - t0
        out = run().numpy()
        np.testing.assert_allclose(out, reference, rtol=rtol, atol=atol,
                                   err_msg=f"{name} executor disagrees with the interpreter")
        rows.append(Row(name, build_s, float(np.max(np.abs(out - reference))), _time(run), memory))
    return rows


def print_rows(model: str, rows: list[Row]) -> None:
    print(f"ember demo: model {model}, checked against the reference interpreter")
    header = f"{'executor':<9} {'build (s)':>9} {'max |err|':>10} {'latency (us)':>13}  memory"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.executor:<9} {r.build_s:>9.2f} {r.max_abs_err:>10.2e} {r.median_us:>13.1f}  "
              f"{r.memory}")


def main(model: str, as_json: bool) -> int:
    rows = run_demo(model)
    if as_json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
        return 0
    print_rows(model, rows)
    picture = memory_picture(model)
    if picture:
        print(f"memory plan (AOT arena, lower bound marked): {picture}")
    else:
        from .plot import INSTALL_HINT

        print(f"(a picture of the memory plan needs matplotlib: {INSTALL_HINT})")
    return 0
