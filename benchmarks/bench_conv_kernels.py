"""ember's conv kernels against onnxruntime, one conv at a time and whole models, on one thread.

    python benchmarks/bench_conv_kernels.py                       # resnet18 + mobilenet_v2 convs
    python benchmarks/bench_conv_kernels.py --cpu-time --models resnet18 mobilenet_v2 dscnn
    python benchmarks/bench_conv_kernels.py --small --rounds 2    # smoke run
    python benchmarks/bench_conv_kernels.py --models --conv 1024,256,64,1,1 --conv 256,256,64,1,1
    python benchmarks/bench_conv_kernels.py --models --stems --cpu-time  # first convs, old/new
    python benchmarks/bench_conv_kernels.py --cpu-time --models --pointwise   # the 1x1 convs

For each model of ``--models`` (zoo names, ``benchmarks/_models.py``), every distinct conv of
its ONNX twin (input shape, weight shape, strides, pads, groups, found by ONNX shape
inference) becomes a one-conv model (conv + relu, NCHW in and out, so both runtimes pay their
layout transforms) compiled by ember (graph executor) and by onnxruntime, both on one thread;
then the whole model. Each pair is timed interleaved, ``--rounds`` rounds of ``--reps`` calls
each, and the best round's median is kept. ``--conv IC,OC,HW,K,S`` adds one square conv of
that shape (padding K // 2; e.g. SegFormer's decoder 1x1 1024->256 at 64x64). ``--stems``
adds the first convs of the zoo's CNNs (a plain NCHW input of 1-3 channels, :data:`STEMS`),
each also timed with the NCHW-input kernel turned off (``ember_old_us``: the NCHW[L]c kernel
as the planner chose it before ``topi/nn/conv2d_nchw_input.py``).

``--cpu-time`` times each call with ``time.thread_time()`` (the calling thread's CPU time)
instead of ``time.perf_counter()``: on a machine loaded by other processes, wall time mostly
measures the scheduler, while both runtimes run their one thread on the caller's. Prints a
table and writes JSON (``--json``, default under ember's cache directory).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _models import zoo_models  # noqa: E402
from _report import open_results, results_path  # noqa: E402

import ember  # noqa: E402


def _stem(ic: int, oc: int, hw: tuple, k: tuple, s: int, pads: tuple) -> dict:
    return {"input": (1, ic, *hw), "weight": (oc, ic, *k), "strides": (s, s), "pads": pads,
            "group": 1}


# the first convs of the zoo's CNNs (and a Paddle-style OCR CNN's, on 3x48x192)
STEMS = [_stem(1, 64, (49, 10), (10, 4), 2, (4, 1, 5, 1)),  # dscnn
         _stem(3, 64, (224, 224), (7, 7), 2, (3,) * 4),  # resnet18
         _stem(3, 16, (32, 32), (3, 3), 1, (1,) * 4),  # resnet8
         _stem(3, 32, (224, 224), (3, 3), 2, (1,) * 4),  # mobilenet_v2, efficientnet_lite0
         _stem(3, 16, (640, 640), (3, 3), 2, (1,) * 4),  # yolov8n (dbnet: 8 channels)
         _stem(3, 8, (48, 192), (3, 3), 1, (1,) * 4),  # paddle-style OCR CNN
         _stem(3, 32, (48, 192), (3, 3), 2, (1,) * 4)]


def without_stem_kernel(fn: Callable) -> Callable:
    """``fn`` with the NCHW-input kernel turned off while it runs (its compile), and the
    lowered-kernel cache with it (its key does not see the switch)."""
    import os

    from ember.topi.nn import conv2d_nchw_input

    def run(*args, **kwargs):
        saved = conv2d_nchw_input.MAX_CHANNELS, os.environ.get("EMBER_KERNEL_CACHE")
        conv2d_nchw_input.MAX_CHANNELS = 0
        os.environ["EMBER_KERNEL_CACHE"] = "0"
        try:
            return fn(*args, **kwargs)
        finally:
            conv2d_nchw_input.MAX_CHANNELS = saved[0]
            if saved[1] is None:
                os.environ.pop("EMBER_KERNEL_CACHE")
            else:
                os.environ["EMBER_KERNEL_CACHE"] = saved[1]
    return run


def conv_specs(model) -> list[dict]:
    """The distinct convs of an ONNX model: input shape, weight shape and attributes."""
    import onnx
    from onnx import numpy_helper, shape_inference

    inferred = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.graph.value_info, *inferred.graph.input]}
    inits = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    seen, specs = set(), []
    for node in model.graph.node:
        if node.op_type != "Conv" or node.input[1] not in inits:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        wshape = tuple(inits[node.input[1]])
        spec = {"input": tuple(shapes[node.input[0]]), "weight": wshape,
                "strides": tuple(attrs.get("strides", (1, 1))),
                "pads": tuple(attrs.get("pads", (0, 0, 0, 0))), "group": attrs.get("group", 1)}
        key = json.dumps(spec)
        if key not in seen:
            seen.add(key)
            specs.append(spec)
    return specs


def conv_model(spec: dict, seed: int = 0):
    """A one-conv ONNX model (conv with bias, then relu) for ``spec``."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    wshape = spec["weight"]
    w = (rng.standard_normal(wshape) * 0.05).astype("float32")
    b = (rng.standard_normal(wshape[0]) * 0.05).astype("float32")
    n, _, h, wd = spec["input"]
    (sh, sw), (pt, pl, pb, pr) = spec["strides"], spec["pads"]
    oh, ow = (h + pt + pb - wshape[2]) // sh + 1, (wd + pl + pr - wshape[3]) // sw + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=list(wshape[2:]),
                              strides=list(spec["strides"]), pads=list(spec["pads"]),
                              group=spec["group"]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, spec["input"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, wshape[0], oh, ow])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def runners(model, inputs: dict[str, np.ndarray]) -> tuple[Callable, Callable]:
    """(ember, onnxruntime) callables of ``model`` on one thread; their outputs are checked
    against each other first."""
    import onnxruntime as ort

    compiled = ember.compile(model, executor="graph", threads=1)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    args = list(inputs.values())

    def run_ember() -> object:
        return compiled(*args)

    def run_ort() -> object:
        return sess.run(None, inputs)

    got, want = run_ember(), run_ort()[0]
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-3, atol=2e-3)
    return run_ember, run_ort


def best_median(fns: list[Callable], clock: Callable[[], float], rounds: int,
                reps: int) -> list[float]:
    """Per function, the smallest over ``rounds`` of the median of ``reps`` timed calls; the
    functions take turns within each round (load drifts hit both alike)."""
    best = [float("inf")] * len(fns)
    for f in fns:
        f()
    for _ in range(rounds):
        for i, f in enumerate(fns):
            times = []
            for _ in range(reps):
                t0 = clock()
                f()
                times.append(clock() - t0)
            best[i] = min(best[i], float(np.median(times)))
    return best


# ``--pointwise``: the 1x1 convs of the mobile zoo (IC,OC,HW,K,S): few input channels over
# large maps, projections onto few output blocks (EfficientDet's 96->24 at 128x128 and
# 144->40 at 64x64: 8-lane blocks on AVX-512, its pair tiles), small maps with many channels,
# resnet's stride-2 downsample, and SE blocks' GEMVs on a 1x1 map
POINTWISE = ("16,64,112,1,1", "24,72,56,1,1", "144,24,56,1,1", "96,24,128,1,1",
             "144,40,64,1,1", "24,144,128,1,1", "192,32,28,1,1",
             "576,96,14,1,1", "384,64,14,1,1", "960,160,7,1,1", "1152,192,7,1,1",
             "64,128,56,1,2", "128,256,28,1,2", "960,240,1,1,1", "240,960,1,1,1",
             "672,168,1,1,1", "64,64,25,1,1")


def parse_conv(text: str) -> dict:
    """A ``--conv`` value ``IC,OC,HW,K,S`` as a conv spec (square, padding K // 2)."""
    parts = text.split(",")
    if len(parts) != 5 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--conv {text!r}: want five positive integers IC,OC,HW,K,S")
    ic, oc, hw, k, s = (int(p) for p in parts)
    return {"input": (1, ic, hw, hw), "weight": (oc, ic, k, k), "strides": (s, s),
            "pads": (k // 2,) * 4, "group": 1}


def describe(spec: dict) -> str:
    n, c, h, w = spec["input"]
    oc, _, kh, kw = spec["weight"]
    g = spec["group"]
    kind = "dw" if g > 1 and g == c == oc else (f"g{g}" if g > 1 else "")
    sh, sw = spec["strides"]
    stride = f"{sh}" if sh == sw else f"{sh}x{sw}"  # a conv1d's (1, 2), crnn's (2, 1)
    return f"{c}->{oc} {h}x{w} k{kh}x{kw} s{stride} {kind}".rstrip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["resnet18", "mobilenet_v2"])
    ap.add_argument("--conv", action="append", default=[], metavar="IC,OC,HW,K,S",
                    help="a square conv to time besides the models' (repeatable)")
    ap.add_argument("--pointwise", action="store_true",
                    help="add the mobile zoo's 1x1 convs (POINTWISE) to --conv")
    ap.add_argument("--small", action="store_true", help="the zoo's reduced configurations")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the calling thread's CPU time (time.thread_time)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--stems", action="store_true",
                    help="the first convs of the zoo's CNNs, also with the old kernel")
    ap.add_argument("--no-convs", action="store_true", help="whole models only")
    ap.add_argument("--no-models", action="store_true", help="single convs only")
    ap.add_argument("--json", default=str(results_path("bench_conv_kernels.json")))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.reps < 1:
        ap.error(f"--rounds and --reps must be at least 1 (got {args.rounds}, {args.reps})")
    try:
        extra = [parse_conv(text) for text in
                 [*args.conv, *(POINTWISE if args.pointwise else ())]]
    except ValueError as err:
        ap.error(str(err))
    clock = time.thread_time if args.cpu_time else time.perf_counter
    rows = []
    print(f"one thread, {'thread CPU' if args.cpu_time else 'wall'} time, best of "
          f"{args.rounds} rounds of median-of-{args.reps}")
    print(f"{'model':14s} {'conv':30s} {'ember us':>10s} {'ort us':>10s} {'ratio':>6s}")
    groups = [("(--conv)", None, [(describe(s), conv_model(s), s["input"]) for s in extra])]
    if args.stems:
        groups.append(("(--stems)", None,
                       [(describe(s), conv_model(s), s["input"]) for s in STEMS]))
    for case in zoo_models(args.models, small=args.small):
        tests = [] if args.no_convs else [
            (describe(s), conv_model(s), s["input"]) for s in conv_specs(case.onnx_model)]
        if not args.no_models:
            tests.append(("(whole model)", case.onnx_model, None))
        groups.append((case.name, case, tests))
    for name, case, tests in groups:
        for what, model, shape in tests:
            rng = np.random.default_rng(1)
            inputs = case.inputs if shape is None else {
                "x": rng.standard_normal(shape).astype("float32")}
            fns = list(runners(model, inputs))
            if name == "(--stems)":
                fns.append(without_stem_kernel(runners)(model, inputs)[0])
            em, ort_, *old = best_median(fns, clock, args.rounds, args.reps)
            rows.append({"model": name, "conv": what, "ember_us": em * 1e6,
                         "ort_us": ort_ * 1e6, "ratio": em / ort_,
                         **({"ember_old_us": old[0] * 1e6} if old else {})})
            was = f"  (old kernel {old[0] * 1e6:.0f} us, {old[0] / ort_:.2f})" if old else ""
            print(f"{name:14s} {what:30s} {em * 1e6:10.0f} {ort_ * 1e6:10.0f} "
                  f"{em / ort_:6.2f}{was}", flush=True)
    with open_results(args.json) as f:
        json.dump({"clock": "thread_time" if args.cpu_time else "perf_counter",
                   "threads": 1, "rows": rows}, f, indent=1)
    print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
