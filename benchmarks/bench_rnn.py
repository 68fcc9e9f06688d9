"""Recurrent networks from ONNX: the one-kernel form (nn.lstm/gru/rnn) against the
step-by-step ones, build time and run time, and against onnxruntime.

    python benchmarks/bench_rnn.py [--seq 16,64,128,256,512] [--hidden 128] [--input 64]
                                   [--batch 1] [--op LSTM] [--forms kernel,unrolled,loop]
                                   [--model crnn] [--json PATH]

One bidirectional ``--op`` layer over a sequence of each ``--seq`` length (or, with ``--model
crnn``, the zoo's CRNN text recogniser at full size, (3, 48, 320) images: a conv backbone and a
bidirectional LSTM of 96 units over 80 steps), imported and built each way of ``--forms``:

- ``kernel``: what the importer makes of the node by default, one ``nn.lstm`` (``nn.gru``,
  ``nn.rnn``) call, one C kernel for the whole sequence; graph executor;
- ``kernel_vm``: the same with the sequence length symbolic (the model's first input axis a
  ``dim_param``), built for the VM (one kernel call per run whatever the length);
- ``unrolled``: the steps as straight-line Relay (``relay.frontend.rnn_kernel=False``; what a
  known length up to ``relay.frontend.max_unroll`` becomes; here whatever the length), built
  for the graph executor;
- ``loop``: the steps as a loop on the VM (``rnn_kernel=False``, what a symbolic length became).

Per model: import seconds, build seconds per stage (optimize = the Relay passes, lower = tensor
expressions to C, compile = the C compiler), the process's CPU seconds for the whole build
(children, the C compiler, included), then the median CPU milliseconds of a run on the calling
thread (``time.thread_time``; kernels on one thread, ``EMBER_NUM_THREADS=1`` unless set, and
onnxruntime with one intra-op thread, which runs on the calling thread: on a shared machine the
wall clock also measures the other processes), their ratio, and the largest difference from
onnxruntime's outputs. Every build starts cold (a fresh ``EMBER_CACHE_DIR``). Results are
printed and written as JSON (default ``bench_results/rnn.json`` in ember's cache directory).
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


def crnn_model() -> tuple[Any, str, tuple[int, ...]]:
    """The zoo's CRNN at full size as its ONNX twin: (model, input name, input shape)."""
    from _models import workload

    from ember.relay.testing import onnx_twin

    zoo, kwargs = workload("crnn")
    model, mod, _ = onnx_twin(zoo, **kwargs)
    data = mod["main"].params[0]
    return model, data.name_hint, tuple(int(d) for d in data.checked_type.shape)


def _symbolic_first_axis(model: Any, name: str) -> Any:
    """A copy of ``model`` whose input ``name`` has a symbolic first axis ("seq")."""
    copy = type(model)()
    copy.CopyFrom(model)
    for inp in copy.graph.input:
        if inp.name == name:
            inp.type.tensor_type.shape.dim[0].dim_param = "seq"
    return copy


def build(model: Any, form: str, name: str = "x") -> tuple[Any, dict[str, float]]:
    """(a function running the model on its input ``name``, the seconds of each stage)."""
    import ember
    from ember import relay
    from ember.ir.transform import PassContext
    from ember.relay._build import stage_listener

    times: dict[str, float] = {}
    cpu, start = _cpu_seconds(), time.perf_counter()
    config = {"relay.frontend.max_unroll": 1 << 30 if form == "unrolled" else 0,
              "relay.frontend.rnn_kernel": form.startswith("kernel")}
    if form == "kernel_vm":
        model = _symbolic_first_axis(model, name)
    with PassContext(config=config):
        mod, params = relay.frontend.from_onnx(model)
    times["import"] = time.perf_counter() - start

    def listen(stage: str, seconds: float | None) -> None:
        if seconds is not None:
            key = STAGES.get(stage, "other")
            times[key] = times.get(key, 0.0) + seconds

    with stage_listener(listen):
        if form in ("unrolled", "kernel"):
            gm = relay.build(mod, "llvm", params=params)["default"](ember.cpu(0))

            def run(x: np.ndarray) -> list[np.ndarray]:
                gm.set_input(name, x)
                gm.run()
                return [gm.get_output(i).numpy() for i in range(gm.get_num_outputs())]
        else:
            exe = relay.vm.compile(mod, "llvm", params=params)
            vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu(0))

            def run(x: np.ndarray) -> list[np.ndarray]:
                out = vm.invoke("main", x)
                return [a.numpy() for a in ([out] if hasattr(out, "numpy") else out)]
    times["total"] = time.perf_counter() - start
    times["cpu"] = _cpu_seconds() - cpu
    return run, times


def median_ms(fn: Any, *args: Any, number: int = 20) -> float:
    """The median CPU time of a call on this thread (the kernels run on it: one thread)."""
    fn(*args)
    samples = []
    for _ in range(number):
        start = time.thread_time()
        fn(*args)
        samples.append(time.thread_time() - start)
    return 1e3 * float(np.median(samples))


def measure(op: str, seq: int, form: str, opts: argparse.Namespace) -> dict[str, Any]:
    import onnxruntime as ort

    if opts.model == "crnn":
        model, name, shape = crnn_model()
    else:
        model, name = rnn_model(op, seq, opts.batch, opts.input, opts.hidden), "x"
        shape = (seq, opts.batch, opts.input)
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype("float32")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    run, times = build(model, form, name)
    want = sess.run(None, {name: x})
    diff = max(float(np.abs(g - w).max()) for g, w in zip(run(x), want))
    ember_ms, ort_ms = median_ms(run, x), median_ms(sess.run, None, {name: x})
    return {"op": op, "model": opts.model, "seq": seq, "form": form, "seconds": times,
            "ember_ms": ember_ms, "ort_ms": ort_ms, "ratio": ember_ms / ort_ms,
            "max_abs_diff": diff}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="LSTM", choices=sorted(GATES))
    parser.add_argument("--seq", default="16,64,128,256,512")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--input", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--forms", default="kernel,unrolled,loop")
    parser.add_argument("--model", choices=("layer", "crnn"), default="layer",
                        help="one --op layer per --seq (default), or the zoo's CRNN")
    parser.add_argument("--json", default=str(results_path("rnn.json")))
    opts = parser.parse_args(argv)
    forms = opts.forms.split(",")
    unknown = sorted(set(forms) - set(FORMS))
    if unknown:
        parser.error(f"unknown form(s) {', '.join(unknown)}; choose from {', '.join(FORMS)}")
    os.environ.setdefault("EMBER_NUM_THREADS", "1")
    rows, results = [], []
    lengths = [80] if opts.model == "crnn" else [int(s) for s in opts.seq.split(",")]
    for seq in lengths:
        for form in forms:
            with tempfile.TemporaryDirectory() as cache, cache_dir(cache):  # a cold build
                r = measure(opts.op, seq, form, opts)
            results.append(r)
            s = r["seconds"]
            label = "crnn (LSTM seq 80)" if opts.model == "crnn" else f"{opts.op} seq {seq}"
            rows.append([label, form, s["import"], s.get("optimize"), s.get("lower"),
                         s.get("compile"), s["total"], s["cpu"], r["ember_ms"], r["ort_ms"],
                         r["ratio"], r["max_abs_diff"]])
            print(table(rows[-1:], HEADS).splitlines()[-1], flush=True)
    print()
    print(table(rows, HEADS))
    out = {"benchmark": "rnn", "model": opts.model, "hidden": opts.hidden, "input": opts.input,
           "batch": opts.batch, "threads": os.environ["EMBER_NUM_THREADS"],
           "load_average": os.getloadavg(), "results": results}
    with open_results(opts.json) as f:
        json.dump(out, f, indent=2)
    print(f"wrote {opts.json}")


FORMS = ("kernel", "kernel_vm", "unrolled", "loop")
HEADS = ["model", "form", "import s", "optimize s", "lower s", "compile s", "build s", "cpu s",
         "ember cpu ms", "ort cpu ms", "ratio", "max|diff|"]

if __name__ == "__main__":
    main()
