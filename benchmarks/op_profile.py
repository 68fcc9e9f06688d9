"""Where the time goes: ember's fused functions vs onnxruntime's nodes, per kind of op.

    python benchmarks/op_profile.py                                  # resnet18, mobilenet_v2
    python benchmarks/op_profile.py --models resnet8 --threads 2 --top 20

ember: the graph executor's debug variant (``factory.debug_create``) times every node
(``run_individual``: each node run once per repeat, in graph order; the median over repeats
is kept), and nodes are grouped by the kernel they call. onnxruntime: the same ONNX model with
``SessionOptions.enable_profiling``; each node's ``kernel_time`` event, median over the runs
after a warm-up. Both at the given thread count, batch 1.

Kinds: convolutions by kernel size (``conv2d 3x3``), depthwise marked ``dw`` (weight shape
(O, 1, KH, KW) on more than one input channel; onnxruntime turns a batch norm it cannot fold
into a ``conv2d 1x1 dw``), ``dense`` (dense, Gemm, MatMul with a constant weight),
``batch_matmul`` (MatMul of two activations), ``pool``, ``softmax``, and ``other`` (what is
left: elementwise ops not fused into an anchor, layout and shape ops; onnxruntime's NCHWc
reorders land here).
Fused epilogues (bias, batch norm, activation, residual add) count with their anchor on both
sides. GFLOP/s per ember kernel assumes NCHW-family layouts (N, C, H, W[, c]).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# this checkout's ember (not another installed one), and the helpers beside this file
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _models import known_models, zoo_models
from _report import results_path, table
from _systems import frontend_available, ort_session, to_relay

import ember
from ember import relay
from ember.relay.backend import Executor
from ember.runtime.threads import ThreadControl

DEFAULT_JSON = results_path("op_profile.json")


def conv_kind(weight: Sequence[int], in_channels: int) -> str:
    """'conv2d 3x3', 'conv2d 3x3 dw' (depthwise) from an OIHW(-blocked) weight shape."""
    kh, kw = weight[2], weight[3]
    depthwise = _weight_in_channels(weight) == 1 and in_channels > 1
    return f"conv2d {kh}x{kw}{' dw' if depthwise else ''}"


def _weight_in_channels(weight: Sequence[int]) -> int:
    """Input channels per group of an OIHW or blocked [O/L, I/CB, KH, KW, CB, L] weight."""
    return weight[1] * (weight[4] if len(weight) == 6 else 1)


def _channels(shape: Sequence[int]) -> int:
    """Channels of an NCHW or NCHW[x]c activation."""
    return shape[1] * (shape[4] if len(shape) == 5 else 1)


def conv_operands(ins: Sequence[Sequence[int]], consts: Sequence[bool]
                  ) -> tuple[Sequence[int], Sequence[int]] | None:
    """(data, weight) shapes among a fused conv kernel's arguments: the weight is the constant
    of rank >= 4; the data the activation whose channels the weight consumes (a residual
    operand of the epilogue may come first)."""
    weights = [s for s, c in zip(ins, consts) if c and len(s) >= 4]
    acts = [s for s, c in zip(ins, consts) if not c and len(s) >= 4]
    if not weights or not acts:
        return None
    weight = weights[0]
    fits = [a for a in acts if _weight_in_channels(weight) in (1, _channels(a))]
    return (fits or acts)[0], weight


def direct_weight_shapes(func_name: str, ins: Sequence[Sequence[int]], consts: Sequence[bool]
                         ) -> list[Sequence[int]]:
    """``ins`` with a Winograd conv's transformed weight ``[a*a, O/L, I, L]`` given as the
    3x3 OIHW weight it stands for (its kind and FLOPs are the direct conv's)."""
    if "winograd" not in func_name:
        return list(ins)
    return [(s[1] * s[3], s[2], 3, 3) if c and len(s) == 4 else s for s, c in zip(ins, consts)]


def ember_kind(func_name: str, ins: Sequence[Sequence[int]], consts: Sequence[bool]) -> str:
    """The kind of an ember kernel, from its name (``fused_<ops>``) and argument shapes
    (``consts``: which arguments are weights)."""
    ops = func_name.split("fused_", 1)[-1]
    if ops.startswith("nn_conv2d_transpose"):
        return "conv2d_transpose"
    operands = conv_operands(ins, consts) if ops.startswith(
        ("nn_conv2d", "nn_contrib_conv2d")) else None
    if operands is not None:
        return conv_kind(operands[1], _channels(operands[0]))
    if "contrib_gemm" in ops:  # FuseGemmEpilogue's kernels: a constant weight makes it dense
        return "dense" if any(c and len(s) in (2, 3) for s, c in zip(ins, consts)) else \
            "batch_matmul"
    for key, kind in (("batch_matmul", "batch_matmul"), ("dense", "dense"),
                      ("matmul", "dense"), ("pool", "pool"), ("softmax", "softmax")):
        if key in ops:
            return kind
    return "other"


def ember_flops(kind: str, ins: Sequence[Sequence[int]], consts: Sequence[bool],
                out: Sequence[int]) -> int:
    """FLOPs (2 * MACs) of one call of an anchor kernel; 0 for other kinds."""
    operands = conv_operands(ins, consts) if kind.startswith("conv2d ") else None
    if operands is not None:
        return 2 * out[0] * out[2] * out[3] * int(np.prod(operands[1]))
    if kind == "dense":  # weight (units, K), or packed (panels, K, nr): the constant of rank
        # 2 or 3 (a residual may come first)
        weight = next((s for s, c in zip(ins, consts) if c and len(s) in (2, 3)), None)
        return 2 * int(np.prod(out)) * weight[1] if weight else 0
    if kind == "batch_matmul":
        return 2 * int(np.prod(out)) * ins[0][-1]
    return 0


def profile_ember(mod: Any, params: Any, inputs: dict[str, np.ndarray], threads: int,
                  repeat: int) -> list[dict[str, Any]]:
    """One record per ember kernel: name, kind, calls, median us per run (all calls), FLOPs."""
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params, executor=Executor("graph"))
    dbg = factory.debug_create("default", ember.cpu(0))
    dbg.set_input(**inputs)
    with ThreadControl(factory).use(threads):
        dbg.run_individual(number=1, repeat=1)  # warm-up
        dbg.run_individual(number=1, repeat=repeat)
    g, kernels = dbg.graph, {}
    for nid, node in enumerate(g.nodes):
        if node.is_input or nid not in dbg.node_times:
            continue
        ins = [g.shape[g.entry_id(e)] for e in node.inputs]
        consts = [g.nodes[e.nid].is_input and g.nodes[e.nid].name not in inputs
                  for e in node.inputs]
        out = g.shape[g.entry_id(nid, 0)]
        ins = direct_weight_shapes(node.func_name, ins, consts)
        kind = ember_kind(node.func_name, ins, consts)
        rec = kernels.setdefault(node.func_name, {"name": node.func_name, "kind": kind,
                                                  "calls": 0, "us": 0.0, "flops": 0,
                                                  "shapes": f"{ins} -> {list(out)}"})
        rec["calls"] += 1
        rec["us"] += statistics.median(dbg.node_times[nid]) * 1e6
        rec["flops"] += ember_flops(kind, ins, consts, out)
    return sorted(kernels.values(), key=lambda r: -r["us"])


def ort_kind(op: str, shapes: Sequence[Sequence[int]]) -> str:
    """The kind of an onnxruntime node from its op type and input shapes."""
    if "ConvTranspose" in op:
        return "conv2d_transpose"
    if "Conv" in op and len(shapes) > 1 and len(shapes[1]) >= 4:  # inputs X, W, B, [Z]
        return conv_kind(shapes[1], _channels(shapes[0]))
    if "Gemm" in op:
        return "dense"
    if "MatMul" in op:  # a prepacked constant weight is not listed among the inputs
        acts = [s for s in shapes if len(s) >= 3]
        return "batch_matmul" if len(acts) >= 2 else "dense"
    if "Pool" in op:
        return "pool"
    return "softmax" if "Softmax" in op else "other"


def profile_ort(onnx_path: str, inputs: dict[str, np.ndarray], threads: int,
                repeat: int) -> list[dict[str, Any]]:
    """One record per onnxruntime node: name, op, kind, median us over ``repeat`` runs."""
    session = ort_session(onnx_path, threads, profile=True)
    for _ in range(repeat + 1):
        session.run(None, inputs)
    events = json.loads(Path(session.end_profiling()).read_text())
    durations: dict[str, list[float]] = defaultdict(list)
    meta: dict[str, tuple[str, list[list[int]]]] = {}
    for ev in events:
        if ev.get("cat") != "Node" or not ev["name"].endswith("_kernel_time"):
            continue
        name = ev["name"].removesuffix("_kernel_time")
        durations[name].append(float(ev["dur"]))
        shapes = [next(iter(s.values())) for s in ev["args"].get("input_type_shape", [])]
        meta[name] = (ev["args"].get("op_name", "?"), shapes)
    nodes = []
    for name, durs in durations.items():
        op, shapes = meta[name]
        nodes.append({"name": name, "op": op, "kind": ort_kind(op, shapes),
                      "us": statistics.median(durs[1:] or durs)})  # the first run warms up
    return sorted(nodes, key=lambda r: -r["us"])


def by_kind(ember_k: Sequence[dict[str, Any]],
            ort_n: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kind: ember and onnxruntime microseconds per run, their ratio, ember's FLOPs."""
    kinds: dict[str, dict[str, Any]] = {}
    for side, recs in (("ember", ember_k), ("ort", ort_n)):
        for r in recs:
            k = kinds.setdefault(r["kind"], {"kind": r["kind"], "ember_us": 0.0, "ort_us": 0.0,
                                             "ember_calls": 0, "ort_nodes": 0, "flops": 0})
            k[f"{side}_us"] += r["us"]
            k["ember_calls" if side == "ember" else "ort_nodes"] += r.get("calls", 1)
            k["flops"] += r.get("flops", 0)
    return sorted(kinds.values(), key=lambda k: -k["ember_us"])


def print_model(name: str, threads: int, rec: dict[str, Any], top: int) -> None:
    ember_total = sum(k["us"] for k in rec["ember"])
    ort_total = sum(n["us"] for n in rec["onnxruntime"])
    print(f"\n{name}, {threads} thread(s): ember kernels {ember_total / 1e3:.2f} ms per run, "
          f"onnxruntime nodes {ort_total / 1e3:.2f} ms per run")
    rows = [[k["kind"], 1e-3 * k["ember_us"], 100 * k["ember_us"] / ember_total,
             k["ember_calls"], 1e-3 * k["ort_us"], 100 * k["ort_us"] / ort_total,
             k["ort_nodes"], k["ember_us"] / k["ort_us"] if k["ort_us"] else None,
             k["flops"] / k["ember_us"] / 1e3 if k["flops"] else None] for k in rec["by_kind"]]
    print(table(rows, ["kind", "ember ms", "%", "calls", "ort ms", "%", "nodes", "ember/ort",
                       "ember GFLOP/s"]))
    print(f"top {top} ember kernels")
    rows = [[k["name"].removeprefix("tvmgen_default_"), k["kind"], k["calls"], k["us"] / 1e3,
             100 * k["us"] / ember_total, k["flops"] / k["us"] / 1e3 if k["flops"] else None,
             k["shapes"]] for k in rec["ember"][:top]]
    print(table(rows, ["kernel", "kind", "calls", "ms", "%", "GFLOP/s", "shapes (in -> out)"]))
    print(f"top {top} onnxruntime nodes")
    rows = [[n["name"], n["op"], n["kind"], n["us"] / 1e3, 100 * n["us"] / ort_total]
            for n in rec["onnxruntime"][:top]]
    print(table(rows, ["node", "op", "kind", "ms", "%"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v2",
                        help=f"comma-separated, any of {', '.join(known_models())}")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=10, help="runs timed per node")
    parser.add_argument("--top", type=int, default=12, help="kernels and nodes listed")
    parser.add_argument("--source", choices=("onnx", "relay"), default="onnx",
                        help="what ember builds: the ONNX file (imported) or the twin's Relay")
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    opts = parser.parse_args(argv)
    if opts.threads < 1 or opts.repeat < 1:
        parser.error("--threads and --repeat must be >= 1")
    if opts.source == "onnx" and not frontend_available():
        parser.error("--source onnx: this ember has no ONNX importer; use --source relay")
    models = [m.strip() for m in opts.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in known_models()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}")
    print(f"ember source: {opts.source}; {opts.threads} thread(s); median of {opts.repeat} runs")
    out: dict[str, Any] = {"threads": opts.threads, "source": opts.source, "models": {}}
    for case in zoo_models(models):
        import onnx

        with tempfile.TemporaryDirectory(prefix="ember-prof-") as tmp:
            path = str(Path(tmp, f"{case.name}.onnx"))
            onnx.save(case.onnx_model, path)
            mod, params = to_relay(opts.source, path, case.mod, case.params)
            ember_k = profile_ember(mod, params, case.inputs, opts.threads, opts.repeat)
            ort_n = profile_ort(path, case.inputs, opts.threads, opts.repeat)
        rec = {"ember": ember_k, "onnxruntime": ort_n, "by_kind": by_kind(ember_k, ort_n)}
        out["models"][case.name] = rec
        print_model(case.name, opts.threads, rec, opts.top)
    Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.json).write_text(json.dumps(out, indent=1))
    print(f"\nwrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
