"""Where one call's time goes outside the kernels: each layer of a model's call, one thread.

    python benchmarks/bench_call_cost.py                     # add, mlp, dscnn, resnet8
    python benchmarks/bench_call_cost.py dscnn --rounds 15 --min-ms 300

Each model (``add``: a 1x2 float32 ONNX Add, pure call overhead; the others: zoo twins at full
size) is compiled with ``ember.compile(path, threads=1)`` and, for ``benchmarks/run.py``'s
path, with ``relay.build(..., executor=aot)``; onnxruntime opens the same file with one
intra-op thread. Every layer below is timed by the calling thread's CPU time
(``time.thread_time()``: the machine's other load does not count, and at one thread the
kernels run on the calling thread), ``--rounds`` rounds interleaved, the best round kept:

- ``model(x)``: the call a user makes (numpy in, numpy out);
- ``ModelCall.run``: its one C call (``EmberModelCall``: checks, input copy, kernels,
  output copy) with the output allocation, without ``CompiledModel.__call__``;
- ``ModelCall.call``: the C call alone, into preallocated outputs;
- ``module.run``: the AOT executor's ``run()`` (``run.py``'s timed call, inputs set once);
- ``entry (ctypes)``: the compiled ``tvmgen_default_run`` called once through ctypes;
- ``entry (C loop)``: the same entry called in a C loop (``EmberTimeLoop``): the kernels and
  the generated code between them, no Python at all;
- ``ort run``: ``session.run(None, feeds)``; ``ort iobinding``: ``run_with_iobinding`` on
  bound inputs and outputs (``run.py``'s onnxruntime call).

``outside`` = ``model(x)`` - ``entry (C loop)``: what a user's call costs beyond its kernels.
Prints a table (microseconds) and writes JSON (``--json``).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# this checkout's ember (not another installed one), and the helpers beside this file
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table
from _systems import ort_runner, ort_session

DEFAULT_JSON = results_path("call_cost.json")
LAYERS = ("model(x)", "ModelCall.run", "ModelCall.call", "module.run", "entry (ctypes)",
          "entry (C loop)", "ort run", "ort iobinding")


def add_model(directory: str) -> tuple[str, dict[str, np.ndarray]]:
    """A 1x2 float32 ``c = a + b`` ONNX file in ``directory`` and its inputs."""
    import onnx
    from onnx import TensorProto, helper

    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2]) for n in "abc"]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "add", io[:2],
                              io[2:])
    path = os.path.join(directory, "add.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, {"a": np.ones((1, 2), np.float32), "b": np.full((1, 2), 2, np.float32)}


def zoo_model(name: str, directory: str) -> tuple[str, dict[str, np.ndarray]]:
    from _models import zoo_models

    case = next(zoo_models([name]))
    path = os.path.join(directory, f"{name}.onnx")
    Path(path).write_bytes(case.onnx_model.SerializeToString())
    return path, dict(case.inputs)


def layers(path: str, feeds: dict[str, np.ndarray]) -> tuple[dict[str, Callable[[], Any]],
                                                              Callable[[int], None], Any]:
    """The timed callables by layer name, the entry's C loop (calls -> None) and what they
    hold alive. Every ember layer runs at one thread; outputs are checked against
    onnxruntime first."""
    import ember
    from ember import relay
    from ember.relay.backend import Executor
    from ember.relay.frontend import from_onnx
    from ember.runtime.threads import ThreadControl

    args = tuple(feeds.values())
    model = ember.compile(path, threads=1)
    model(*args)
    ctx = model._pool.free[-1]  # the context the call used: its native call and executor
    native, entry_exec = ctx.native, ctx.executor
    if native is None or model.executor != "aot":
        raise RuntimeError(f"{path}: expected an AOT model with a one-C-call form")
    outs = native.new_outputs()
    mod, params = from_onnx(path)
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params, executor=Executor("aot"))
    module = factory["default"](ember.cpu(0))
    module.set_input(**feeds)
    control = ThreadControl(factory)
    entry = entry_exec._entry
    values, codes, count = entry_exec._call.args[:3]
    lib = entry._owner._lib
    seconds = ctypes.c_double()

    def c_loop(calls: int) -> None:
        if lib.EmberTimeLoop(entry.address, values, codes, count, calls,
                             ctypes.byref(seconds)) != 0:
            raise RuntimeError(f"{path}: the entry failed in the C loop")

    session = ort_session(path, 1)
    bound = ort_runner(session, 1, feeds)
    want = session.run(None, feeds)
    got = model(*args)
    got = got if isinstance(got, list) else [got]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    timed = {"model(x)": lambda: model(*args), "ModelCall.run": lambda: native.run(args),
             "ModelCall.call": lambda: native.call(args, outs), "module.run": module.run,
             "entry (ctypes)": entry_exec._call, "ort run": lambda: session.run(None, feeds),
             "ort iobinding": bound.run}
    # This thread's count in the libraries of both builds (the model's call sets its own).
    keep = (control.use(1), ThreadControl(model.factory).use(1), model, module, bound)
    for cm in keep[:2]:
        cm.__enter__()
    return timed, c_loop, keep


def measure(path: str, feeds: dict[str, np.ndarray], rounds: int, min_ms: float
            ) -> dict[str, float]:
    """Best-round microseconds per call of each layer (thread CPU time)."""
    timed, c_loop, keep = layers(path, feeds)
    clock = time.thread_time
    t0 = clock()
    for _ in range(50):
        timed["model(x)"]()
    per_call = max((clock() - t0) / 50, 1e-7)
    calls = max(20, int(min_ms * 1e-3 / per_call))
    best = dict.fromkeys(LAYERS, float("inf"))
    try:
        for _ in range(rounds):
            for name in LAYERS:
                start = clock()
                if name == "entry (C loop)":
                    c_loop(calls)
                else:
                    fn = timed[name]
                    for _ in range(calls):
                        fn()
                best[name] = min(best[name], (clock() - start) / calls * 1e6)
    finally:
        for cm in reversed(keep[:2]):
            cm.__exit__(None, None, None)
    best["outside"] = best["model(x)"] - best["entry (C loop)"]
    best["calls_per_round"] = calls
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=["add", "mlp", "dscnn", "resnet8"],
                    help="add, or zoo names (default: add mlp dscnn resnet8)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--min-ms", type=float, default=150.0,
                    help="CPU time of one round of one layer (sets the calls per round)")
    ap.add_argument("--json", default=str(DEFAULT_JSON))
    opts = ap.parse_args(argv)
    if opts.rounds < 1 or opts.min_ms <= 0:
        ap.error("--rounds must be >= 1 and --min-ms > 0")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in opts.models:
            path, feeds = add_model(tmp) if name == "add" else zoo_model(name, tmp)
            rows[name] = measure(path, feeds, opts.rounds, opts.min_ms)
            print(f"{name}: done", file=sys.stderr, flush=True)
    heads = ["model", *LAYERS, "outside"]
    print(table([[n, *(r[k] for k in heads[1:])] for n, r in rows.items()], heads))
    load = os.getloadavg()
    print(f"(us per call, thread CPU time, best of {opts.rounds} rounds; load average "
          f"{load[0]:.1f})")
    with open_results(opts.json) as f:
        json.dump({"clock": "thread_time", "threads": 1, "load_avg": load, "models": rows}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
