"""Convs whose channel counts do not split into SIMD blocks (150 SegFormer classes, a YOLO
head's 255, 21 VOC classes, 1- and 2-channel detector heads, RGB inputs): ember with
AlterOpLayout padding them to whole blocks against ember keeping them plain and onnxruntime.

    python benchmarks/bench_channel_pad.py                    # 1 thread, thread CPU time
    python benchmarks/bench_channel_pad.py --models segformer,yolov8n --json pad.json

Each case is an ONNX model (one Conv and its Relu, or two convs in a chain for an input of a
padded count) imported with ``relay.frontend.from_onnx`` and built at opt_level 3: ``pad``
is the default build, ``plain`` the same with ``relay.AlterOpLayout.pad_channels`` False
(the path before padding), ``ort`` onnxruntime on the same file. All run interleaved round
by round (``_timing.interleave``), timed with ``time.thread_time`` (the calling thread's CPU
time: steady on a loaded machine; kernels run on 1 thread). ``--models`` adds whole zoo
models (their ONNX twins for onnxruntime). The JSON (default ``bench_results/channel_pad.json``
in the cache directory) has every figure.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import open_results, results_path, table  # noqa: E402
from _systems import Runner, ember_runner, ort_runner, ort_session  # noqa: E402
from _timing import interleave  # noqa: E402

import ember  # noqa: E402
from ember import relay  # noqa: E402
from ember.relay.backend import Executor  # noqa: E402

# (name, batch, [(in, out, kernel, stride), ...] in a chain, image height, width)
CASES = [
    ("out 150 (segformer cls)", 1, [(256, 150, 1, 1)], 64, 64),
    ("out 255 (yolo head)", 1, [(64, 255, 1, 1)], 40, 40),
    ("out 21 3x3", 1, [(64, 21, 3, 1)], 56, 56),
    ("out 21 3x3 b3", 3, [(64, 21, 3, 1)], 28, 28),
    ("out 2 3x3", 1, [(64, 2, 3, 1)], 80, 80),
    ("out 1 1x1", 1, [(64, 1, 1, 1)], 80, 80),
    ("in 3 3x3/2 (rgb) b3", 3, [(3, 8, 3, 2)], 96, 96),
    ("in 3 3x3/1 (rgb)", 1, [(3, 16, 3, 1)], 96, 96),
    ("in 3 3x3/1 b3 48x192", 3, [(3, 8, 3, 1)], 48, 192),
    ("in 150 (chain)", 1, [(64, 150, 1, 1), (150, 64, 3, 1)], 32, 32),
    ("in 255 (chain)", 1, [(64, 255, 1, 1), (255, 64, 1, 1)], 40, 40),
]


def chain_model(batch: int, convs: list[tuple[int, int, int, int]], h: int, w: int) -> Any:
    """Conv+Relu layers in a chain on a (batch, in, h, w) input."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, name, oh, ow = [], [], "x", h, w
    for i, (ic, oc, k, s) in enumerate(convs):
        weight = rng.uniform(-0.1, 0.1, (oc, ic, k, k)).astype("float32")
        b = rng.uniform(-0.1, 0.1, oc).astype("float32")
        inits += [numpy_helper.from_array(weight, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("Conv", [name, f"w{i}", f"b{i}"], [f"c{i}"],
                                   kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        name = f"r{i}"
        oh, ow = (oh + 2 * (k // 2) - k) // s + 1, (ow + 2 * (k // 2) - k) // s + 1
    nodes[-1] = helper.make_node("Relu", [f"c{len(convs) - 1}"], ["y"])
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (batch, convs[0][0], h, w))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       (batch, convs[-1][1], oh, ow))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _ember(mod: Any, params: Any, inputs: dict[str, np.ndarray], threads: int,
           pad: bool) -> Runner:
    config = {"relay.AlterOpLayout.pad_channels": pad}
    with ember.transform.PassContext(opt_level=3, config=config):
        factory = relay.build(mod, "llvm", params=params, executor=Executor("graph"))
    return ember_runner("graph", factory, factory["default"](ember.cpu(0)), threads, inputs)


def measure(name: str, model: Any, mod: Any, params: Any, inputs: dict[str, np.ndarray],
            threads: int, min_time: float, rounds: int) -> dict[str, Any]:
    """Median us of ember padded, ember plain and onnxruntime on one model."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(model.SerializeToString())
        onnx_inputs = dict(zip([i.name for i in model.graph.input], inputs.values()))
        runners = {"pad": _ember(mod, params, inputs, threads, True),
                   "plain": _ember(mod, params, inputs, threads, False),
                   "ort": ort_runner(ort_session(str(path), threads), threads, onnx_inputs)}
        for r in runners.values():
            r.run()
        want = runners["ort"].outputs()[0]
        for key, r in runners.items():  # the same numbers before timing them
            np.testing.assert_allclose(r.outputs()[0].reshape(want.shape), want, rtol=1e-3,
                                       atol=1e-4, err_msg=f"{name}: {key}")
        timings = interleave(list(runners.values()), min_time, rounds, clock=time.thread_time)
    return {"case": name, **{f"{k}_us": t.median * 1e6 for k, t in zip(runners, timings)}}


def conv_case(name: str, batch: int, convs: list, h: int, w: int, threads: int,
              min_time: float, rounds: int) -> dict[str, Any]:
    from ember.relay.frontend import from_onnx

    model = chain_model(batch, convs, h, w)
    x = np.random.default_rng(1).uniform(-1, 1, (batch, convs[0][0], h, w)).astype("float32")
    mod, params = from_onnx(model, {"x": x.shape})
    return measure(name, model, mod, params, {"x": x}, threads, min_time, rounds)


def zoo_case(name: str, threads: int, min_time: float, rounds: int) -> dict[str, Any]:
    from ember.relay.testing import onnx_twin

    model, mod, params = onnx_twin(name)
    var = mod["main"].params[0]
    shape = tuple(int(d) for d in var.checked_type.shape) if var.checked_type_ else tuple(
        int(d) for d in var.type_annotation.shape)
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")
    return measure(name, model, mod, params, {var.name_hint: x}, threads, min_time, rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.5, help="timed seconds per system")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="", help="comma-separated case name prefixes")
    ap.add_argument("--models", default="", help="comma-separated zoo models to add")
    ap.add_argument("--json", default=str(results_path("channel_pad.json")))
    opts = ap.parse_args()
    wanted = [c for c in opts.cases.split(",") if c]
    rows = [conv_case(*case, opts.threads, opts.min_time, opts.rounds) for case in CASES
            if not wanted or any(case[0].startswith(w) for w in wanted)]
    rows += [zoo_case(m, opts.threads, opts.min_time, opts.rounds)
             for m in opts.models.split(",") if m]
    print(table([[r["case"], r["pad_us"], r["plain_us"], r["ort_us"], r["pad_us"] / r["ort_us"],
                  r["plain_us"] / r["ort_us"]] for r in rows],
                ["case", "pad us", "plain us", "ort us", "pad/ort", "plain/ort"]))
    with open_results(opts.json) as f:
        json.dump({"threads": opts.threads, "clock": "thread_time", "rows": rows}, f, indent=1)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
