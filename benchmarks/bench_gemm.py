"""Single GEMMs, ember x onnxruntime, in thread CPU time at one thread (GFLOP/s).

    python benchmarks/bench_gemm.py                       # gpt2's GEMMs (the zoo's: hidden 384)
    python benchmarks/bench_gemm.py --shapes small        # GPT-2 small's (hidden 768)
    python benchmarks/bench_gemm.py --shapes gemv         # batch-1 dense layers (vgg16, dcgan)
    python benchmarks/bench_gemm.py --rounds 9 --json out.json

Each case is a one-product ONNX model, as the zoo's GPT-2 writes it: ``x (1, M, K) @ W`` (a
constant (K, N) weight) plus a bias, then the case's epilogue: none, GPT-2's tanh-GELU spelled
out (``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``), or a residual input added. ember
compiles it with ``ember.compile(model, threads=1)`` (the product and its epilogue become one
``ember_sgemm`` call with the weight packed at build time); onnxruntime runs it with
``intra_op_num_threads=1`` (MLAS sgemm, its bias and GELU fused by its graph optimiser).

Timing is thread CPU time (``time.thread_time``) of the calling thread, so a loaded machine
(other processes taking the cores) does not inflate it; both systems run on the calling thread
at one thread. Rounds interleave the two systems (the order alternating); each round times a
block of calls, and the median over rounds is reported. GFLOP/s counts 2 M N K (the epilogue's
work not counted); ``% peak`` is against a single-thread FMA peak (``--peak``; the default,
102 GFLOP/s, is what 12 independent chains of 8-lane FMAs reach on the 2-vCPU AMD EPYC
development machine: 2 FMA units x 8 lanes x 2 flops at about 3.2 GHz, its boost clock, not
the 2.45 GHz /proc/cpuinfo reports).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember
from _report import open_results, results_path, table

# name -> (M, K, N, epilogue): the zoo's gpt2 (seq 128, hidden 384, 4x MLP, vocab 16384)
GPT2 = {
    "qkv": (128, 384, 1152, "bias"),
    "attn_out": (128, 384, 384, "residual"),
    "mlp_up": (128, 384, 1536, "gelu_tanh"),
    "mlp_down": (128, 1536, 384, "residual"),
    "lm_head": (128, 384, 16384, "none"),
}
# GPT-2 small (hidden 768), the brief's 768->3072 and 3072->768
SMALL = {
    "qkv": (128, 768, 2304, "bias"),
    "mlp_up": (128, 768, 3072, "gelu_tanh"),
    "mlp_down": (128, 3072, 768, "residual"),
    "odd_rows": (77, 768, 3072, "gelu_tanh"),
}
# matrix-vector products and a few rows: vgg16's classifier (its 25088x4096 weight is 411 MB,
# streamed from memory at every call), dcgan's 100->16384 projection, and 2-4 rows of vgg's
# second layer (a small batch)
GEMV = {
    "vgg_fc1": (1, 25088, 4096, "bias"),
    "vgg_fc2": (1, 4096, 4096, "bias"),
    "vgg_fc3": (1, 4096, 1000, "bias"),
    "dcgan_fc": (1, 100, 16384, "bias"),
    "fc2_2rows": (2, 4096, 4096, "bias"),
    "fc2_4rows": (4, 4096, 4096, "bias"),
}
SETS = {"gpt2": GPT2, "small": SMALL, "gemv": GEMV}


def gemm_onnx(M: int, K: int, N: int, epilogue: str, seed: int = 0):
    """The one-product ONNX model of a case, and its inputs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((K, N)) / math.sqrt(K)).astype(np.float32)
    b = (rng.standard_normal(N) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, M, K])]
    feeds = {"x": rng.uniform(-1, 1, (1, M, K)).astype(np.float32)}
    if epilogue == "none":
        nodes[0].output[0] = "y"
        inits = inits[:1]
    else:
        nodes.append(helper.make_node("Add", ["mm", "b"], ["h" if epilogue != "bias" else "y"]))
    if epilogue == "gelu_tanh":
        consts = {"c3": 3.0, "cubic": 0.044715, "s": math.sqrt(2 / math.pi), "half": 0.5,
                  "one": 1.0}
        inits += [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in consts.items()]
        nodes += [helper.make_node("Pow", ["h", "c3"], ["h3"]),
                  helper.make_node("Mul", ["cubic", "h3"], ["t0"]),
                  helper.make_node("Add", ["h", "t0"], ["t1"]),
                  helper.make_node("Mul", ["s", "t1"], ["t2"]),
                  helper.make_node("Tanh", ["t2"], ["t3"]),
                  helper.make_node("Add", ["one", "t3"], ["t4"]),
                  helper.make_node("Mul", ["half", "h"], ["t5"]),
                  helper.make_node("Mul", ["t5", "t4"], ["y"])]
    elif epilogue == "residual":
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, M, N]))
        feeds["r"] = rng.uniform(-1, 1, (1, M, N)).astype(np.float32)
        nodes.append(helper.make_node("Add", ["h", "r"], ["y"]))
    graph = helper.make_graph(nodes, "gemm", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, M, N])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, feeds


def thread_time_per_call(fn, calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - start) / calls


def bench_case(M: int, K: int, N: int, epilogue: str, rounds: int, budget_s: float) -> dict:
    import onnxruntime as ort

    model, feeds = gemm_onnx(M, K, N, epilogue)
    compiled = ember.compile(model, threads=1)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    args = [feeds[k] for k in sorted(feeds, key=lambda k: k != "x")]
    got = compiled(*args)
    want = sess.run(None, feeds)[0]
    err = float(np.max(np.abs(np.asarray(got) - want)))
    runners = {"ember": lambda: compiled(*args), "ort": lambda: sess.run(None, feeds)}
    first = {k: thread_time_per_call(f, 3) for k, f in runners.items()}
    calls = {k: max(1, int(budget_s / rounds / max(t, 1e-6))) for k, t in first.items()}
    per_round: dict[str, list[float]] = {k: [] for k in runners}
    for r in range(rounds):
        order = list(runners) if r % 2 == 0 else list(runners)[::-1]
        for k in order:
            per_round[k].append(thread_time_per_call(runners[k], calls[k]))
    flops = 2.0 * M * N * K
    med = {k: statistics.median(v) for k, v in per_round.items()}
    return {"M": M, "K": K, "N": N, "epilogue": epilogue, "max_abs_err": err,
            "ember_us": med["ember"] * 1e6, "ort_us": med["ort"] * 1e6,
            "ember_gflops": flops / med["ember"] / 1e9, "ort_gflops": flops / med["ort"] / 1e9,
            "ratio": med["ember"] / med["ort"]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", choices=sorted(SETS), default="gpt2")
    p.add_argument("--only", nargs="*", help="case names of the set to run")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--budget", type=float, default=1.5, help="timed seconds per system per case")
    p.add_argument("--peak", type=float, default=102.0, help="single-thread peak, GFLOP/s")
    p.add_argument("--json", default=str(results_path("bench_gemm.json")))
    opts = p.parse_args(argv)
    cases = {k: v for k, v in SETS[opts.shapes].items() if not opts.only or k in opts.only}
    results = {}
    for name, (M, K, N, epi) in cases.items():
        results[name] = bench_case(M, K, N, epi, opts.rounds, opts.budget)
    rows = [(name, f"{r['M']}x{r['K']}x{r['N']}", r["epilogue"], r["ember_us"], r["ort_us"],
             r["ember_gflops"], r["ort_gflops"], 100 * r["ember_gflops"] / opts.peak,
             r["ratio"]) for name, r in results.items()]
    print(f"single GEMMs at 1 thread, thread CPU time, median of {opts.rounds} rounds; "
          f"peak {opts.peak} GFLOP/s")
    print(table(rows, ["case", "MxKxN", "epilogue", "ember us", "ort us", "ember GF/s",
                       "ort GF/s", "% peak", "x ort"]))
    with open_results(opts.json) as f:
        json.dump({"peak_gflops": opts.peak, "rounds": opts.rounds, "cases": results}, f,
                  indent=1)
    print(f"JSON: {opts.json}")


if __name__ == "__main__":
    main()
