"""Fused attention (``nn.contrib_attention``, FuseAttention) against the three kernels it
replaces (scores GEMM, softmax, P V GEMM), built from the same graph in one process and timed
interleaved.

    python benchmarks/bench_fused_attention.py                  # vit, bert, whisper, 1 thread
    python benchmarks/bench_fused_attention.py --only whisper --threads 2

The graph is attention as the ONNX importer writes it ((batch, seq, heads * dim) inputs, heads
split by reshape/transpose, rank-4 MatMuls, a divide by sqrt(dim) and a (batch, 1, 1, seq)
additive mask); FoldGemmViews turns the head chains into strides either way. Times: the
calling thread's CPU time at 1 thread, wall time otherwise; best of --rounds rounds.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import numpy as np  # noqa: E402
from _systems import Runner  # noqa: E402
from _timing import interleave  # noqa: E402

CASES = {"vit": (1, 3, 197, 64), "bert": (1, 12, 128, 64), "whisper": (1, 6, 1500, 64),
         "dim80": (1, 2, 577, 80), "long": (1, 1, 6000, 64), "bert_b4": (4, 12, 64, 64),
         "tiny": (2, 2, 9, 8)}


def attention(batch: int, heads: int, seq: int, dim: int):
    from ember import relay

    x = [relay.var(n, shape=(batch, seq, heads * dim)) for n in ("q", "k", "v")]
    mask = relay.var("mask", shape=(batch, 1, 1, seq))

    def heads_of(t, axes):
        return relay.transpose(relay.reshape(t, (batch, seq, heads, dim)), axes)

    s = relay.nn.batch_matmul(relay.reshape(heads_of(x[0], (0, 2, 1, 3)), (-1, seq, dim)),
                              relay.reshape(heads_of(x[1], (0, 2, 3, 1)), (-1, dim, seq)),
                              transpose_b=False)
    s = relay.reshape(s, (batch, heads, seq, seq))
    p = relay.nn.softmax(relay.add(relay.divide(s, relay.const(float(dim) ** 0.5)), mask))
    o = relay.nn.batch_matmul(relay.reshape(p, (-1, seq, seq)),
                              relay.reshape(heads_of(x[2], (0, 2, 1, 3)), (-1, seq, dim)),
                              transpose_b=False)
    o = relay.transpose(relay.reshape(o, (batch, heads, seq, dim)), (0, 2, 1, 3))
    return relay.Function(x + [mask], relay.reshape(o, (batch, seq, heads * dim)))


def build(func, fuse: bool):
    import ember
    from ember import relay
    from ember.contrib import graph_executor

    disabled = [] if fuse else ["FuseAttention"]
    with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
        lib = relay.build(ember.IRModule.from_expr(func), "llvm")
    return graph_executor.GraphModule(lib["default"](ember.cpu()))


def main(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    """Prints the table; returns {case: (fused s, three kernels s)}."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="vit,bert,whisper", help=f"of {','.join(CASES)}")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per sample")
    opts = parser.parse_args(argv)
    unknown = [c for c in opts.only.split(",") if c not in CASES]
    if unknown or opts.rounds < 1:
        parser.error(f"unknown cases {unknown}" if unknown else "--rounds must be positive")
    saved = os.environ.get("EMBER_NUM_THREADS")
    os.environ["EMBER_NUM_THREADS"] = str(opts.threads)
    try:
        return _run(opts)
    finally:
        if saved is None:
            del os.environ["EMBER_NUM_THREADS"]
        else:
            os.environ["EMBER_NUM_THREADS"] = saved


def _run(opts: argparse.Namespace) -> dict[str, tuple[float, float]]:
    clock = time.thread_time if opts.threads == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    result = {}
    print(f"{'case':8s} {'shape':>14s} {'fused ms':>9s} {'3 kernels ms':>13s} {'ratio':>6s}")
    for name in opts.only.split(","):
        batch, heads, seq, dim = CASES[name]
        inputs = {n: rng.standard_normal((batch, seq, heads * dim)).astype(np.float32)
                  for n in ("q", "k", "v")}
        inputs["mask"] = np.zeros((batch, 1, 1, seq), np.float32)
        runs = [build(attention(batch, heads, seq, dim), fuse) for fuse in (True, False)]
        for m in runs:
            m.set_input(**inputs)
            m.run()
        outs = [m.get_output(0).numpy() for m in runs]
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-5)
        # shuffled rounds (_timing): a fixed order biases whichever runs second
        runners = [Runner(label, opts.threads, m.run, lambda: [], contextlib.nullcontext)
                   for label, m in zip(("fused", "unfused"), runs)]
        timings = interleave(runners, opts.min_time, opts.rounds, clock=clock)
        best = [min(t.round_medians) for t in timings]
        shape = f"{batch}x{heads}x{seq}x{dim}"
        print(f"{name:8s} {shape:>14s} {best[0] * 1e3:9.3f} {best[1] * 1e3:13.3f} "
              f"{best[0] / best[1]:6.3f}", flush=True)
        result[name] = (best[0], best[1])
    return result


if __name__ == "__main__":
    main()
