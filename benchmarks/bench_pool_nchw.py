"""Pools of plain NCHW tensors, one ONNX node per case: ember next to onnxruntime at one
thread, by the calling thread's CPU time, interleaved.

    python benchmarks/bench_pool_nchw.py                      # the default grid
    python benchmarks/bench_pool_nchw.py --channels 3,64 --maps 224 --ops max3s2

Each case (MaxPool 3x3/2 pad 1, MaxPool 2x2/2, AveragePool 3x3/1 pad 1 with and without
count_include_pad, MaxPool 3x3/2 ceil_mode, GlobalAveragePool, GlobalMaxPool) is built twice
with ember's graph executor: as ember plans it by default (``ember``: a pool of a value whose
channels split into lanes may run blocked, with a layout transform each way) and with the
layout planner off (``nchw``: AlterOpLayout's desired layout NCHW, the plain kernels alone),
and opened in onnxruntime (one intra-op thread, inputs and outputs bound once). The three run
in turn, ``--rounds`` rounds of ``--repeat`` calls; prints medians in microseconds and the
ratios to onnxruntime.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import table
from _systems import ort_runner, ort_session

OPS = {  # name -> (ONNX op, attributes)
    "max3s2": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "max2s2": ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "avg3s1": ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "avg3s1inc": ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                  "count_include_pad": 1}),
    "max3s2ceil": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "gavg": ("GlobalAveragePool", {}),
    "gmax": ("GlobalMaxPool", {}),
}


def one_node(op: str, attrs: dict[str, Any], shape: tuple[int, ...]) -> Any:
    from onnx import TensorProto, helper

    node = helper.make_node(OPS[op][0], ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                        None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def ember_run(path: str, shape: tuple[int, ...], x: np.ndarray, desired: str) -> Any:
    import ember
    from ember import relay
    from ember.contrib import graph_executor

    model = __import__("onnx").load(path)
    mod, params = relay.frontend.from_onnx(model, {"x": shape})
    config = {"relay.AlterOpLayout.desired_layout": desired}
    with ember.transform.PassContext(opt_level=3, config=config):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu(0)))
    m.set_input("x", x)
    return m


def cpu_us(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        out.append((time.thread_time() - t0) * 1e6)
    return out


def measure(op: str, c: int, hw: int, rounds: int, repeat: int) -> list[Any]:
    shape = (1, c, hw, hw)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / f"{op}.onnx")
        Path(path).write_bytes(one_node(op, OPS[op][1], shape).SerializeToString())
        systems = {"ember": ember_run(path, shape, x, "NCHWc"),
                   "nchw": ember_run(path, shape, x, "NCHW")}
        ort = ort_runner(ort_session(path, 1), 1, {"x": x})
        ort.run()
        want = ort.outputs()[0]
        runs = {k: m.run for k, m in systems.items()} | {"ort": ort.run}
        for k, m in systems.items():
            m.run()
            np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{op} {shape} {k}")
        times: dict[str, list[float]] = {k: [] for k in runs}
        for r in range(rounds):
            keys = list(runs)
            for k in keys[r % 3:] + keys[:r % 3]:
                runs[k]()
                times[k] += cpu_us(runs[k], repeat)
    med = {k: statistics.median(v) for k, v in times.items()}
    return [op, c, hw, med["ember"], med["nchw"], med["ort"], med["ember"] / med["ort"],
            med["nchw"] / med["ort"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--channels", default="3,6,21,64")
    ap.add_argument("--maps", default="224,112,57,7")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    opts = ap.parse_args(argv)
    rows = []
    for op in opts.ops.split(","):
        for c in map(int, opts.channels.split(",")):
            for hw in map(int, opts.maps.split(",")):
                rows.append(measure(op, c, hw, opts.rounds, opts.repeat))
                print(*(f"{v:.3g}" if isinstance(v, float) else v for v in rows[-1]),
                      flush=True)
    print(table(rows, ["op", "C", "HxW", "ember us", "nchw us", "ort us", "ember/ort",
                       "nchw/ort"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
