"""Per-operator comparison: ember's kernels next to onnxruntime's nodes, by ONNX node name.

    python benchmarks/op_compare.py MODEL.onnx                    # 1 thread, top 20 rows
    python benchmarks/op_compare.py --zoo dbnet --threads 4 --top 8
    python benchmarks/op_compare.py --zoo yolov8 --small          # a reduced configuration
    python benchmarks/op_compare.py model.onnx --shape input=1,3,320,320

ember: the model imported from ONNX (every call it builds carries the name of its ONNX node;
fusion keeps them, so each kernel lists the ONNX nodes it computes: the graph JSON's
``source_nodes``), built for the graph executor at opt_level 3; its debug variant times every
kernel call (``run_individual``, each node once per repeat; median over the repeats).
onnxruntime: the same model with ``SessionOptions.enable_profiling``; each node's
``kernel_time`` event, median over the runs. Both at ``--threads`` (default 1), on the same
random inputs, after ``--warmup`` runs.

onnxruntime's optimised graph renames the nodes it rewrites: a node keeps its ONNX name, is
named after the ONNX value it computes (``relu_nchwc``: the NCHWc conv that ends at value
``relu``, with its fused activation; ``bn_out_bn_nchwc``: the standalone BatchNormalization
of value ``bn_out``, run as a conv), or after the first node of a fusion
(``node_Mul/QuickGeluFusion/``: ``x * sigmoid(x)`` from Mul ``node_Mul``), and
``_token_<k>`` suffixes tell copies apart. Each
onnxruntime node is mapped back to the ONNX node of that name or that value; its time goes to
the ember kernel(s) covering that node (shared evenly if several do). Rows: one per ember
kernel call (its ONNX nodes, their op types, ember's time, onnxruntime's for the same nodes,
difference, ratio), sorted by the time ember loses; then onnxruntime's nodes that map to no
ember kernel (its layout reorders; ONNX nodes ember folded away). JSON: ``--json``.

Each ember row also says how the kernel's work split over ``--threads`` (one profiled call per
repeat, ``ember.runtime.work_split``; docs/profiling.md): ``imb``, the longest task's CPU time
over the mean task's (1.00: even), and ``serial``, the share of its CPU work that ran on one
thread while the others idled (outside parallel launches, or in one-task launches). Both are
CPU-time measures, so they hold on a loaded machine, and ``--threads 16`` on 2 cores shows the
split 16 threads would get (``--simulate`` runs those 16 tasks one after another on one
thread, so that they do not compete for 2 cores). ``--split-only`` skips onnxruntime and the
timing, and prints the kernels that split worst.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# this checkout's ember (not another installed one), and the helpers beside this file
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table
from _systems import ort_session

DEFAULT_JSON = results_path("op_compare.json")
PREFIX = "tvmgen_default_"
_COPY_SUFFIX = re.compile(r"(_token_\d+)+$")
_LAYOUT_SUFFIX = "_nchwc"
_BN_SUFFIX = "_bn"  # a standalone BatchNormalization onnxruntime runs as a conv


# -- the model and its inputs -----------------------------------------------------------------
def parse_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["x=1,3,224,224"]`` -> ``{"x": (1, 3, 224, 224)}``; ValueError naming a bad spec."""
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        except ValueError:
            shape = None
        if not sep or not name or shape is None or any(d < 0 for d in shape):
            raise ValueError(f"--shape {spec!r}: expected NAME=D0,D1,... with sizes >= 0")
        shapes[name] = shape
    return shapes


def graph_inputs(model: Any, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple]:
    """name -> (shape, numpy dtype) of each graph input that is not an initializer;
    ValueError for a size that is unknown and not given by ``shapes``."""
    from onnx import helper

    inits = {t.name for t in model.graph.initializer}
    unknown = set(shapes) - {i.name for i in model.graph.input}
    if unknown:
        raise ValueError(f"--shape: the model has no input {sorted(unknown)[0]!r}")
    out = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        ttype = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in ttype.shape.dim]
        shape = shapes.get(value.name, tuple(dims))
        if dims and len(shape) != len(dims):
            raise ValueError(f"--shape {value.name}: {len(shape)} sizes for an input of rank "
                             f"{len(dims)} {_dims(dims)}")
        if None in shape:
            raise ValueError(f"input {value.name!r} has an unknown size {_dims(dims)}; give it "
                             f"with --shape {value.name}=D0,D1,...")
        out[value.name] = (tuple(shape), helper.tensor_dtype_to_np_dtype(ttype.elem_type))
    return out


def _dims(dims: Sequence[int | None]) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"


def random_inputs(specs: Mapping[str, tuple], seed: int = 0) -> dict[str, np.ndarray]:
    """Uniform [-1, 1) floats; zeros for integer and boolean inputs (valid indices)."""
    rng = np.random.default_rng(seed)
    return {name: (rng.uniform(-1, 1, size=shape).astype(dtype)
                   if np.issubdtype(dtype, np.floating) else np.zeros(shape, dtype))
            for name, (shape, dtype) in specs.items()}


# -- the two profiles ---------------------------------------------------------------------------
def profile_ember(model: Any, inputs: Mapping[str, np.ndarray], threads: int, warmup: int,
                  repeat: int, clock: str = "wall", split_only: bool = False,
                  simulate: bool = False) -> list[dict[str, Any]]:
    """One record per kernel call of ember's graph: kernel, ONNX nodes, median us (``clock``
    "thread": CPU time of the calling thread, for one thread on a busy machine; none with
    ``split_only``), and its work split (``split_summary``; with ``simulate``, each launch
    run as a job of ``threads`` tasks on the calling thread)."""
    import ember
    from ember import relay
    from ember.relay.backend import Executor
    from ember.runtime.threads import ThreadControl

    shapes = {k: v.shape for k, v in inputs.items()}
    mod, params = relay.frontend.from_onnx(model, shape=shapes)
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params, executor=Executor("graph"))
    dbg = factory.debug_create("default", ember.cpu(0))
    if clock == "thread":
        dbg.clock = time.thread_time
    dbg.set_input(**inputs)
    with ThreadControl(factory).use(threads):
        if warmup:
            dbg.run_individual(number=1, repeat=warmup)
        if not split_only:
            dbg.run_individual(number=1, repeat=repeat)
        splits = dbg.measure_work_split(repeat=repeat, simulate=threads if simulate else 0)
    calls = []
    for nid, node in enumerate(dbg.graph.nodes):
        if node.is_input:
            continue
        times = dbg.node_times.get(nid)  # none for a __nop (a view of its input)
        calls.append({"kernel": node.func_name.removeprefix(PREFIX),
                      "nodes": list(node.extra_attrs.get("source_nodes", [])),
                      "us": statistics.median(times) * 1e6 if times else 0.0,
                      **split_summary(splits.get(nid, []))})
    return calls


def split_summary(splits: Sequence[Any]) -> dict[str, Any]:
    """The work-split fields of a kernel's row from its profiled calls (none: no kernel)."""
    from ember.runtime.work_split import imbalance, serial_share, task_count

    if not splits:
        return {"imbalance": None, "serial": None, "tasks": 0, "cpu_us": 0.0}
    cpu = sorted(s.kernel_cpu_ns + sum(sum(x.task_cpu_ns) - x.caller_cpu_ns
                                       for x in s.launches) for s in splits)
    return {"imbalance": imbalance(splits), "serial": serial_share(splits),
            "tasks": task_count(splits) // len(splits), "cpu_us": cpu[len(cpu) // 2] / 1e3}


def profile_ort(path: str, inputs: Mapping[str, np.ndarray], threads: int, warmup: int,
                repeat: int) -> list[dict[str, Any]]:
    """One record per onnxruntime node: name, op type, median us over ``repeat`` runs."""
    session = ort_session(path, threads, profile=True)
    for _ in range(warmup + repeat):
        session.run(None, dict(inputs))
    events = json.loads(Path(session.end_profiling()).read_text())
    return ort_nodes(events, warmup)


def ort_nodes(events: Sequence[Mapping[str, Any]], warmup: int) -> list[dict[str, Any]]:
    """Per node of an onnxruntime profile (``kernel_time`` events): name, op, median us of
    its runs after the first ``warmup``."""
    durations: dict[str, list[float]] = {}
    ops: dict[str, str] = {}
    for ev in events:
        if ev.get("cat") != "Node" or not str(ev.get("name", "")).endswith("_kernel_time"):
            continue
        name = ev["name"].removesuffix("_kernel_time")
        durations.setdefault(name, []).append(float(ev["dur"]))
        ops[name] = ev.get("args", {}).get("op_name", "?")
    return [{"name": name, "op": ops[name], "us": statistics.median(durs[warmup:] or durs)}
            for name, durs in durations.items()]


# -- mapping and the table ----------------------------------------------------------------------
def onnx_index(model: Any) -> tuple[dict[str, str], dict[str, str]]:
    """(ONNX node name -> op type, value name -> the node computing it); unnamed nodes
    as the importer names them (``<OpType>_<k>``)."""
    op_types, producer, counts = {}, {}, {}
    for node in model.graph.node:
        name = node.name
        if not name:
            k = counts.get(node.op_type, 0)
            counts[node.op_type] = k + 1
            name = f"{node.op_type}_{k}"
        op_types[name] = node.op_type
        producer.update(dict.fromkeys(node.output, name))
    return op_types, producer


def ort_onnx_node(name: str, op_types: Mapping[str, str], producer: Mapping[str, str]
                  ) -> str | None:
    """The ONNX node an onnxruntime node stands for (see the module docstring), or None."""
    for candidate in (name, _COPY_SUFFIX.sub("", name), name.split("/", 1)[0]):
        base = candidate.removesuffix(_LAYOUT_SUFFIX)
        for key in (candidate, base, base.removesuffix(_BN_SUFFIX)):
            if key in op_types:
                return key
            if key in producer:
                return producer[key]
    return None


def compare(ember_calls: Sequence[Mapping[str, Any]], ort: Sequence[Mapping[str, Any]],
            op_types: Mapping[str, str], producer: Mapping[str, str]) -> dict[str, Any]:
    """The table's rows (one per ember kernel call, sorted by time lost), onnxruntime's
    unmapped nodes, and the totals."""
    owners: dict[str, list[int]] = {}
    for i, call in enumerate(ember_calls):
        for node in call["nodes"]:
            owners.setdefault(node, []).append(i)
    ort_us = [0.0] * len(ember_calls)
    ort_names: list[list[str]] = [[] for _ in ember_calls]
    unmapped = []
    for rec in ort:
        node = ort_onnx_node(rec["name"], op_types, producer)
        users = owners.get(node, []) if node is not None else []
        if not users:
            unmapped.append({"name": rec["name"], "op": rec["op"], "onnx_node": node,
                             "ort_us": rec["us"]})
        for i in users:
            ort_us[i] += rec["us"] / len(users)
            ort_names[i].append(rec["name"])
    rows = [_row(call, ort_us[i], ort_names[i], op_types) for i, call in enumerate(ember_calls)]
    rows.sort(key=lambda r: -r["lost_us"])
    unmapped.sort(key=lambda r: -r["ort_us"])
    ember_total = sum(r["ember_us"] for r in rows)
    ort_total = sum(r["us"] for r in ort)
    covered = {n for call in ember_calls for n in call["nodes"]}
    return {"rows": rows, "ort_unmapped": unmapped,
            "onnx_nodes_without_kernel": [n for n in op_types if n not in covered],
            "totals": {"ember_us": ember_total, "ort_us": ort_total,
                       "ort_mapped_us": sum(ort_us), "lost_us": ember_total - ort_total,
                       "ratio": ember_total / ort_total if ort_total else None}}


def _row(call: Mapping[str, Any], ort_us: float, ort_names: list[str],
         op_types: Mapping[str, str]) -> dict[str, Any]:
    ops = list(dict.fromkeys(op_types.get(n, "?") for n in call["nodes"]))
    return {"kernel": call["kernel"], "onnx_nodes": list(call["nodes"]), "op_types": ops,
            "ort_nodes": ort_names, "ember_us": call["us"], "ort_us": ort_us,
            "lost_us": call["us"] - ort_us, "ratio": call["us"] / ort_us if ort_us else None,
            "imbalance": call.get("imbalance"), "serial": call.get("serial"),
            "tasks": call.get("tasks", 0), "cpu_us": call.get("cpu_us", 0.0)}


def _names(names: Sequence[str], width: int = 40, sep: str = ",") -> str:
    """``names`` joined, cut to about ``width`` characters (``..+<count>`` when cut)."""
    text = sep.join(names) or "-"
    return text if len(text) <= width else text[:width - 6] + f"..+{len(names)}"


def render(result: Mapping[str, Any], top: int) -> str:
    """The table (``top`` kernel rows, then the largest unmapped onnxruntime nodes), totals."""
    rows = [[_names(r["onnx_nodes"]), _names(r["op_types"], 30, "+"), r["ember_us"],
             r["ort_us"], r["lost_us"], r["ratio"], r.get("imbalance"), r.get("serial"),
             r["kernel"][:40]]
            for r in result["rows"][:top]]
    rows += [[f"(ort only) {u['name']}"[:40], u["op"], 0.0, u["ort_us"], -u["ort_us"], None,
              None, None, "-"] for u in result["ort_unmapped"][:max(top // 2, 1)]]
    t = result["totals"]
    lines = [table(rows, ["ONNX nodes", "op types", "ember us", "ort us", "lost us",
                          "ember/ort", "imb", "serial", "ember kernel"]),
             f"total: ember {t['ember_us']:.1f} us in {len(result['rows'])} kernel calls, "
             f"onnxruntime {t['ort_us']:.1f} us ({t['ort_mapped_us']:.1f} mapped to ember "
             f"kernels, {len(result['ort_unmapped'])} nodes unmapped); ember/ort "
             f"{t['ratio']:.2f}" if t["ratio"] else "total: onnxruntime timed nothing"]
    missing = result["onnx_nodes_without_kernel"]
    if missing:
        lines.append(f"{len(missing)} ONNX node(s) in no ember kernel (folded at build "
                     f"time): {_names(missing, 100)}")
    return "\n".join(lines)


def split_rows(calls: Sequence[Mapping[str, Any]], threads: int) -> dict[str, Any]:
    """``--split-only``: per kernel call, its CPU work, the time a ``threads``-way run loses to
    its split (``loss_us``: estimated critical path minus work / threads, the serial part
    running alone and the parallel part stretched by the imbalance), worst first; the model's
    totals (``efficiency``: work / threads over the estimated critical path)."""
    rows = []
    for call in calls:
        if call["imbalance"] is None:
            continue
        work, serial = call["cpu_us"], call["serial"]
        critical = work * serial + work * (1 - serial) * call["imbalance"] / threads
        rows.append({"kernel": call["kernel"], "nodes": call["nodes"], "cpu_us": work,
                     "tasks": call["tasks"], "imbalance": call["imbalance"], "serial": serial,
                     "loss_us": critical - work / threads})
    rows.sort(key=lambda r: -r["loss_us"])
    work = sum(r["cpu_us"] for r in rows)
    critical = work / threads + sum(r["loss_us"] for r in rows)
    return {"rows": rows, "totals": {"cpu_us": work, "ideal_us": work / threads,
                                     "critical_us": critical,
                                     "efficiency": work / threads / critical if critical else 1.0}}


def render_split(result: Mapping[str, Any], threads: int, top: int) -> str:
    rows = [[r["kernel"][:60], r["cpu_us"], r["tasks"], r["imbalance"], r["serial"],
             r["loss_us"]] for r in result["rows"][:top]]
    t = result["totals"]
    return "\n".join([table(rows, ["ember kernel", "cpu us", "tasks", "imb", "serial",
                                   "loss us"]),
                      f"work {t['cpu_us']:.1f} us of CPU; at {threads} threads ideal "
                      f"{t['ideal_us']:.1f} us, estimated critical path {t['critical_us']:.1f}"
                      f" us: split efficiency {t['efficiency']:.3f}"])


# -- the command --------------------------------------------------------------------------------
def load_model(opts: argparse.Namespace) -> tuple[str, Any, dict[str, np.ndarray] | None]:
    """(name, ONNX model, inputs or None) from the file or ``--zoo``."""
    if opts.zoo:
        from _models import zoo_models

        case = next(zoo_models([opts.zoo], small=opts.small, seed=opts.seed))
        return case.name, case.onnx_model, case.inputs
    import onnx

    path = Path(opts.model)
    if not path.is_file():
        raise ValueError(f"{opts.model}: no such file")
    try:
        return path.stem, onnx.load(str(path)), None
    except Exception as err:  # noqa: BLE001  (onnx raises DecodeError and others)
        raise ValueError(f"{opts.model}: not an ONNX model ({err})") from None


def prepare(opts: argparse.Namespace) -> tuple[str, Any, dict[str, np.ndarray]]:
    """(name, ONNX model, inputs); ValueError for what the command line got wrong."""
    name, model, inputs = load_model(opts)
    if inputs is None:
        inputs = random_inputs(graph_inputs(model, parse_shapes(opts.shape)), opts.seed)
    return name, model, inputs


def run(opts: argparse.Namespace, name: str, model: Any,
        inputs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Profile both, compare; the JSON record."""
    import onnx

    if opts.split_only:
        calls = profile_ember(model, inputs, opts.threads, opts.warmup, opts.repeat,
                              split_only=True, simulate=opts.simulate)
        return {"model": name, "threads": opts.threads, "repeat": opts.repeat,
                "simulated": opts.simulate, "split": split_rows(calls, opts.threads)}
    op_types, producer = onnx_index(model)
    with tempfile.TemporaryDirectory(prefix="ember-opcmp-") as tmp:
        path = str(Path(tmp, "model.onnx"))
        onnx.save(model, path)
        ember_calls = profile_ember(model, inputs, opts.threads, opts.warmup, opts.repeat,
                                    opts.clock)
        ort = profile_ort(path, inputs, opts.threads, opts.warmup, opts.repeat)
    result = compare(ember_calls, ort, op_types, producer)
    return {"model": name, "threads": opts.threads, "warmup": opts.warmup,
            "repeat": opts.repeat, "clock": opts.clock, **result}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", nargs="?", help="an ONNX file (or use --zoo)")
    p.add_argument("--zoo", help="a zoo model's ONNX twin instead (relay.testing.onnx_twin), "
                                 "by name or benchmark alias (mobilenet_v3_large, ...)")
    p.add_argument("--small", action="store_true", help="--zoo: the reduced configuration")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    p.add_argument("--repeat", type=int, default=20, help="timed runs (medians are kept)")
    p.add_argument("--top", type=int, default=20, help="rows printed")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="the size of an input the model leaves unknown (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="of the random inputs")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="ember's kernels timed by wall time, or by the calling thread's CPU "
                        "time (--threads 1 only: it stays meaningful on a busy machine; "
                        "onnxruntime's profile is wall time either way)")
    p.add_argument("--split-only", action="store_true",
                   help="only how ember's kernels split over --threads (no onnxruntime, no "
                        "timing): the kernels that lose most to imbalance or serial work")
    p.add_argument("--simulate", action="store_true",
                   help="--split-only: run each launch as a job of --threads tasks one after "
                        "another on one thread (the split of more threads than cores, "
                        "measured without them competing for the cores)")
    p.add_argument("--json", default=str(DEFAULT_JSON))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    opts = p.parse_args(argv)
    if (opts.model is None) == (opts.zoo is None):
        p.error("give an ONNX file or --zoo NAME (one of them)")
    if opts.threads < 1 or opts.repeat < 1 or opts.warmup < 0 or opts.top < 1:
        p.error("--threads, --repeat and --top must be >= 1, --warmup >= 0")
    if opts.simulate and not opts.split_only:
        p.error("--simulate needs --split-only (it measures the split, not the time)")
    if opts.clock == "thread" and opts.threads != 1:
        p.error("--clock thread needs --threads 1 (it counts the calling thread's CPU only)")
    try:
        name, model, inputs = prepare(opts)
    except ValueError as err:
        p.error(str(err))
    out = run(opts, name, model, inputs)
    if opts.split_only:
        print(f"{out['model']}: work split over {opts.threads} thread(s)"
              f"{' (simulated on one thread)' if opts.simulate else ''}, {opts.repeat} "
              "profiled calls per kernel; sorted by the time lost to the split")
        print(render_split(out["split"], opts.threads, opts.top))
    else:
        print(f"{out['model']}: {opts.threads} thread(s), median of {opts.repeat} runs after "
              f"{opts.warmup} warm-up, ember timed by {opts.clock} clock; sorted by the time "
              "ember loses")
        print(render(out, opts.top))
    with open_results(opts.json) as f:
        json.dump(out, f, indent=1)
    print(f"wrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
