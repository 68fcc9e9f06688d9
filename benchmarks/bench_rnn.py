"""Recurrent networks from ONNX: what unrolling costs at build time, and the run time of each
form against onnxruntime.

    python benchmarks/bench_rnn.py [--seq 16,64,128,256,512] [--hidden 128] [--input 64]
                                   [--batch 1] [--op LSTM] [--forms unrolled,loop] [--json PATH]

One bidirectional ``--op`` layer over a sequence of each ``--seq`` length, imported with static
shapes and built two ways:

- ``unrolled``: the steps as straight-line Relay (what a known length up to the PassContext
  config ``relay.frontend.max_unroll``, default 128, becomes; here whatever the length), built
  for the graph executor;
- ``loop``: the steps as a loop (what a symbolic length, or a longer known one, becomes), built
  for the VM.

Per model: import seconds, build seconds per stage (optimize = the Relay passes, lower = tensor
expressions to C, compile = the C compiler), the process's CPU seconds for the whole build
(children, the C compiler, included: on a shared machine the wall clock also measures the other
processes), then the median milliseconds of a run, onnxruntime's at one thread, and the largest
difference from onnxruntime's outputs. Every build starts cold (a fresh ``EMBER_CACHE_DIR``).
Results are printed and written as JSON (default ``bench_results/rnn.json`` in ember's cache
directory).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path, table  # noqa: E402
from _systems import cache_dir  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# Build stages (graph executor and VM) by the column they are counted in.
STAGES = {"optimize": "optimize", "vm passes": "optimize", "lower": "lower",
          "vm codegen + lower kernels": "lower", "compile": "compile"}


def rnn_model(op: str, seq: int, batch: int, inputs: int, hidden: int) -> Any:
    """One bidirectional ``op`` layer with random weights over x (seq, batch, inputs)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    g = GATES[op]
    weights = {"W": (2, g * hidden, inputs), "R": (2, g * hidden, hidden), "B": (2, 2 * g * hidden)}
    inits = [numpy_helper.from_array(rng.uniform(-.2, .2, s).astype("float32"), k)
             for k, s in weights.items()]
    outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ["x", "W", "R", "B"], outs, hidden_size=hidden,
                            direction="bidirectional")
    graph = helper.make_graph(
        [node], op.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                           [seq, batch, inputs])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def build(model: Any, form: str) -> tuple[Any, dict[str, float]]:
    """(a function running the model on x, the seconds of each stage)."""
    import ember
    from ember import relay
    from ember.ir.transform import PassContext
    from ember.relay._build import stage_listener

    times: dict[str, float] = {}
    cpu, start = _cpu_seconds(), time.perf_counter()
    limit = 1 << 30 if form == "unrolled" else 0
    with PassContext(config={"relay.frontend.max_unroll": limit}):
        mod, params = relay.frontend.from_onnx(model)
    times["import"] = time.perf_counter() - start

    def listen(name: str, seconds: float | None) -> None:
        if seconds is not None:
            key = STAGES.get(name, "other")
            times[key] = times.get(key, 0.0) + seconds

    with stage_listener(listen):
        if form == "unrolled":
            gm = relay.build(mod, "llvm", params=params)["default"](ember.cpu(0))

            def run(x: np.ndarray) -> list[np.ndarray]:
                gm.set_input("x", x)
                gm.run()
                return [gm.get_output(i).numpy() for i in range(gm.get_num_outputs())]
        else:
            exe = relay.vm.compile(mod, "llvm", params=params)
            vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu(0))

            def run(x: np.ndarray) -> list[np.ndarray]:
                return [a.numpy() for a in vm.invoke("main", x)]
    times["total"] = time.perf_counter() - start
    times["cpu"] = _cpu_seconds() - cpu
    return run, times


def median_ms(fn: Any, *args: Any, number: int = 20) -> float:
    fn(*args)
    samples = []
    for _ in range(number):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return 1e3 * float(np.median(samples))


def measure(op: str, seq: int, form: str, opts: argparse.Namespace) -> dict[str, Any]:
    import onnxruntime as ort

    model = rnn_model(op, seq, opts.batch, opts.input, opts.hidden)
    x = np.random.default_rng(1).uniform(-1, 1, (seq, opts.batch, opts.input)).astype("float32")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    run, times = build(model, form)
    want = sess.run(None, {"x": x})
    diff = max(float(np.abs(g - w).max()) for g, w in zip(run(x), want))
    return {"op": op, "seq": seq, "form": form, "seconds": times,
            "ember_ms": median_ms(run, x), "ort_ms": median_ms(sess.run, None, {"x": x}),
            "max_abs_diff": diff}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="LSTM", choices=sorted(GATES))
    parser.add_argument("--seq", default="16,64,128,256,512")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--input", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--forms", default="unrolled,loop")
    parser.add_argument("--json", default=str(results_path("rnn.json")))
    opts = parser.parse_args(argv)
    rows, results = [], []
    for seq in (int(s) for s in opts.seq.split(",")):
        for form in opts.forms.split(","):
            with tempfile.TemporaryDirectory() as cache, cache_dir(cache):  # a cold build
                r = measure(opts.op, seq, form, opts)
            results.append(r)
            s = r["seconds"]
            rows.append([f"{opts.op} seq {seq}", form, s["import"], s.get("optimize"),
                         s.get("lower"), s.get("compile"), s["total"], s["cpu"], r["ember_ms"],
                         r["ort_ms"], r["max_abs_diff"]])
            print(table(rows[-1:], HEADS).splitlines()[-1], flush=True)
    print()
    print(table(rows, HEADS))
    out = {"benchmark": "rnn", "hidden": opts.hidden, "input": opts.input, "batch": opts.batch,
           "load_average": os.getloadavg(), "results": results}
    with open_results(opts.json) as f:
        json.dump(out, f, indent=2)
    print(f"wrote {opts.json}")


HEADS = ["model", "form", "import s", "optimize s", "lower s", "compile s", "build s", "cpu s",
         "ember ms", "ort ms", "max|diff|"]

if __name__ == "__main__":
    main()
