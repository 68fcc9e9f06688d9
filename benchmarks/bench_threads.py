"""Threads sharing one model, and the per-call cost of a model as users call it.

    python benchmarks/bench_threads.py [--models add,mlp] [--threads 1,2,4,8]
                                       [--executors graph,aot,vm] [--seconds 1.0] [--rounds 3]
                                       [--json PATH]

Two tables, from one interleaved run (systems alternate round by round):

- **per call**: microseconds of one call, numpy in and numpy out, from one thread (wall
  time, and the calling thread's CPU time, which a busy machine disturbs less):
  ``ember.compile(model, executor=...)(x)`` against onnxruntime's ``InferenceSession.run``
  on the same ONNX model (both on one kernel thread);
- **throughput**: calls per second when T Python threads share one model object (each thread
  calls in a loop for ``--seconds``), and the ratio to one thread. Every result is checked
  against the model's output for that thread's input, so a wrong result under concurrency is
  reported (``wrong``), not timed.

Models: ``add`` (two 1x2 float32 inputs), and zoo models by name (``mlp``, ``dscnn``, ...,
through their ONNX twins). JSON goes to bench_results/threads.json in the cache directory.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path, table  # noqa: E402
import ember  # noqa: E402
from ember import relay  # noqa: E402


def add_case() -> tuple[Any, Any, dict[str, np.ndarray]]:
    """(IRModule, onnx ModelProto, inputs) of a 1x2 add."""
    import onnx
    from onnx import TensorProto, helper

    a, b = relay.var("a", shape=(1, 2)), relay.var("b", shape=(1, 2))
    mod = ember.IRModule.from_expr(relay.Function([a, b], relay.add(a, b)))
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2]) for n in "abc"]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "add", vi[:2],
                              vi[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return mod, model, {"a": np.ones((1, 2), "float32"), "b": np.ones((1, 2), "float32")}


def zoo_case(name: str) -> tuple[Any, Any, dict[str, np.ndarray]]:
    from _models import zoo_models

    case = next(iter(zoo_models([name])))
    return (case.mod, case.params), case.onnx_model, case.inputs


def ember_model(source: Any, executor: str) -> Callable[..., Any]:
    if isinstance(source, tuple):
        mod, params = source
        return ember.compile(mod, executor=executor, params=params, threads=1)
    return ember.compile(source, executor=executor, threads=1)


def ort_model(onnx_model: Any, names: list[str]) -> Callable[..., Any]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 1, 1
    sess = ort.InferenceSession(onnx_model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    feeds = [i.name for i in sess.get_inputs()]

    def call(*arrays: np.ndarray) -> np.ndarray:
        return sess.run(None, dict(zip(feeds, arrays)))[0]

    return call


def per_call_us(call: Callable[..., Any], args: list[np.ndarray], seconds: float,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """Median over 5 blocks of the mean microseconds per call, on ``clock``: wall time, or
    ``time.thread_time`` (the calling thread's CPU time: with the kernels on that thread, it
    leaves out the time other processes take the CPU, so it stays meaningful on a busy
    machine)."""
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.05:
        call(*args)
        n += 1
    block = max(1, int(n * seconds / 5 / 0.05))
    times = []
    for _ in range(5):
        t0 = clock()
        for _ in range(block):
            call(*args)
        times.append((clock() - t0) / block * 1e6)
    return statistics.median(times)


def throughput(call: Callable[..., Any], cases: list[tuple[list[np.ndarray], np.ndarray]],
               threads: int, seconds: float) -> tuple[float, int]:
    """(calls per second, wrong results) of ``threads`` threads calling for ``seconds``."""
    counts, wrong = [0] * threads, [0] * threads
    start, stop = threading.Barrier(threads + 1), threading.Event()

    def work(k: int) -> None:
        args, want = cases[k % len(cases)]
        expected = want.tobytes()  # a system's result is the same bits every call
        start.wait()
        while not stop.is_set():
            got = np.asarray(call(*args))
            counts[k] += 1
            if got.tobytes() != expected:
                wrong[k] += 1

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    return sum(counts) / (time.perf_counter() - t0), sum(wrong)


def thread_cases(inputs: dict[str, np.ndarray], call: Callable[..., Any], ref: Callable[..., Any],
                 count: int) -> list[tuple[list[np.ndarray], np.ndarray]]:
    """``count`` different inputs (scaled copies), each with ``call``'s output on it, checked
    against ``ref`` (onnxruntime) once here."""
    out = []
    for k in range(count):
        args = [(v * (1 + k / 8)).astype(v.dtype) if v.dtype.kind == "f" else v
                for v in inputs.values()]
        got = np.asarray(call(*args))
        np.testing.assert_allclose(got, np.asarray(ref(*args)), rtol=1e-4, atol=1e-5)
        out.append((args, got))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="add,mlp")
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--executors", default="graph,aot,vm")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=str(results_path("threads.json")))
    opts = ap.parse_args()
    counts = [int(t) for t in opts.threads.split(",")]
    print(f"ember {ember.__version__}, {os.cpu_count()} logical CPUs, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; kernels on 1 thread; "
          f"{opts.rounds} interleaved rounds of {opts.seconds:g} s")
    results: list[dict[str, Any]] = []
    for name in opts.models.split(","):
        source, onnx_model, inputs = add_case() if name == "add" else zoo_case(name)
        systems = {"onnxruntime": ort_model(onnx_model, list(inputs))}
        for ex in opts.executors.split(","):
            systems[ex] = ember_model(source, ex)
        ref = systems["onnxruntime"]
        cases = {s: thread_cases(inputs, call, ref, max(counts)) for s, call in systems.items()}
        args = list(inputs.values())
        samples: dict[tuple[str, str], list[float]] = {}
        wrong: dict[str, int] = {}
        for r in range(opts.rounds):
            order = list(systems.items())
            order = order[r % len(order):] + order[:r % len(order)]
            for system, call in order:
                samples.setdefault((system, "us"), []).append(
                    per_call_us(call, args, opts.seconds / 4))
                samples.setdefault((system, "cpu_us"), []).append(
                    per_call_us(call, args, opts.seconds / 4, time.thread_time))
                for t in counts:
                    rate, bad = throughput(call, cases[system], t,
                                           opts.seconds / len(counts))
                    samples.setdefault((system, str(t)), []).append(rate)
                    wrong[system] = wrong.get(system, 0) + bad
        rows = []
        for system in systems:
            us = statistics.median(samples[(system, "us")])
            cpu_us = statistics.median(samples[(system, "cpu_us")])
            rates = {t: statistics.median(samples[(system, str(t))]) for t in counts}
            row = {"model": name, "system": system, "per_call_us": us, "per_call_cpu_us": cpu_us,
                   "calls_per_s": rates, "wrong": wrong[system],
                   "ratio_to_1_thread": {t: rates[t] / rates[counts[0]] for t in counts}}
            results.append(row)
            ort_us = statistics.median(samples[("onnxruntime", "us")])
            ort_cpu = statistics.median(samples[("onnxruntime", "cpu_us")])
            rows.append([f"{name} {system}", us, us / ort_us, cpu_us, cpu_us / ort_cpu,
                         *(rates[t] for t in counts), rates[counts[-1]] / rates[counts[0]],
                         wrong[system]])
        print()
        print(table(rows, ["model system", "us/call", "x ort", "cpu us", "cpu x ort", *(f"{t} thr/s" for t in counts),
                           f"{counts[-1]}/{counts[0]} thr", "wrong"]))
    with open_results(opts.json) as f:
        json.dump({"results": results, "threads": counts, "cpus": os.cpu_count()}, f, indent=1)
    print(f"\nJSON: {opts.json}")


if __name__ == "__main__":
    main()
