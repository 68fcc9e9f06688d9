"""The Winograd conv kernel (F(2x2, 3x3) and F(4x4, 3x3)) against the direct NCHW[L]c kernel,
one 3x3 stride-1 conv + bias + relu at a time, on a blocked input (no layout transforms).

    python benchmarks/bench_winograd.py                    # vgg, resnet18, crnn shapes; 1, 2 threads
    python benchmarks/bench_winograd.py --shapes 64,64,56,56 --threads 1 --min-time 0.3

Each shape is built three times by ember (graph executor): ``nn.contrib_conv2d_NCHWc_fused``
and ``nn.contrib_conv2d_winograd_NCHWc_fused`` with m = 2 and 4; the three are timed
interleaved (``_timing.interleave``) at each thread count. Prints the medians, the speed-ups
over the direct kernel, the m the planner's selection picks (``winograd_tile``), and the
largest difference of each Winograd output from the direct one.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _systems import ember_runner  # noqa: E402
from _timing import interleave  # noqa: E402

import ember  # noqa: E402
from ember import relay  # noqa: E402
from ember.relay.transform.alter_op_layout import plan_lanes  # noqa: E402
from ember.topi.nn import conv2d_nchwc as K  # noqa: E402
from ember.topi.nn import conv2d_winograd as W  # noqa: E402

# (IC, OC, H, W) of the 3x3 stride-1 convs of vgg (224x224), resnet18 and crnn (48x320 input)
SHAPES = {"vgg": [(64, 64, 224, 224), (128, 128, 112, 112), (256, 256, 56, 56),
                  (512, 512, 28, 28), (512, 512, 14, 14)],
          "resnet18": [(64, 64, 56, 56), (128, 128, 28, 28), (256, 256, 14, 14),
                       (512, 512, 7, 7)],
          "crnn": [(128, 128, 6, 80), (256, 256, 3, 80), (256, 256, 12, 80)]}


def _build(ic: int, oc: int, h: int, w: int, lanes: int, m: int, seed: int = 0):
    """The conv (m = 0: direct) as a graph executor module over a blocked input."""
    rng = np.random.default_rng(seed)
    wt = (rng.standard_normal((oc, ic, 3, 3)) * np.sqrt(2 / (9 * ic))).astype("float32")
    bias = relay.const(rng.standard_normal(oc).astype("float32"))
    x = relay.var("x", shape=(1, ic // lanes, h, w, lanes))
    attrs = {"padding": (1, 1, 1, 1), "lanes": lanes, "in_block": lanes, "activation": "relu"}
    if m:
        y = relay.op.nn.conv_winograd.contrib_conv2d_winograd_nchwc_fused(
            x, relay.const(W.transform_weight(wt, m, lanes)), bias, tile_size=m, **attrs)
    else:
        y = relay.op.nn.conv_nchwc.contrib_conv2d_nchwc_fused(
            x, relay.const(K.pack_weight(wt, lanes, lanes)), bias, **attrs)
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    from ember.contrib import graph_executor

    return lib, graph_executor.GraphModule(lib["default"](ember.cpu()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="vgg,resnet18,crnn")
    ap.add_argument("--shapes", action="append", default=[],
                    help="IC,OC,H,W (repeatable; replaces --models)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes] or \
        [s for name in args.models.split(",") for s in SHAPES[name]]
    lanes = plan_lanes(ember.target.Target("llvm"))  # the layout planner's, 4 on a scalar build
    threads = [int(t) for t in args.threads.split(",")]
    print(f"lanes {lanes}; median us per call; speed-up = direct / winograd")
    print(f"{'shape':>22} thr {'direct':>9} {'F(2,3)':>9} {'F(4,3)':>9} {'x m2':>6} {'x m4':>6}"
          f" pick {'diff m2':>8} {'diff m4':>8}")
    for ic, oc, h, w in shapes:
        x = np.random.default_rng(1).standard_normal((1, ic // lanes, h, w, lanes))
        built = [_build(ic, oc, h, w, lanes, m) for m in (0, 2, 4)]
        geo = K.ConvGeometry(1, ic, h, w, oc, h, w, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1,
                             lanes, lanes)
        pick = W.winograd_tile(geo)
        for t in threads:
            runners = [ember_runner("graph", lib, mod, t, {"x": x.astype("float32")})
                       for lib, mod in built]
            for r in runners:
                r.run()
            outs = [r.outputs()[0] for r in runners]
            diffs = [np.abs(o - outs[0]).max() for o in outs[1:]]
            med = [tm.median * 1e6 for tm in interleave(runners, args.min_time, args.rounds)]
            print(f"{f'{ic}->{oc} {h}x{w}':>22} {t:3d} {med[0]:9.1f} {med[1]:9.1f} {med[2]:9.1f}"
                  f" {med[0] / med[1]:6.2f} {med[0] / med[2]:6.2f} {pick:4d} {diffs[0]:8.1e}"
                  f" {diffs[1]:8.1e}", flush=True)


if __name__ == "__main__":
    main()
