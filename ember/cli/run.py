"""``ember run ARTIFACT``: run a compiled model on given or random inputs, here or on an RPC
server; print (or save) the outputs, the top classes, timings and a per-operator profile."""
from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from ._console import CLIError, Status, fmt_seconds, table
from .artifact import Artifact, open_artifact
from .options import parse_rpc_address, positive_int

EXAMPLES = """\
examples:
  ember run model.so                                # random inputs (seeded), print outputs
  ember run model.so --inputs in.npz --outputs out.npz
  ember run model.so --print-top 5                  # a classifier's five best classes
  ember run model.so --repeat 20 --number 10        # median, p90, throughput
  ember run model.so --profile                      # per-operator times (graph, vm)
  ember run model.so --rpc 192.168.1.7:9091         # on a machine running `ember rpc-server`
  ember run model.so --json > result.json
"""
RANDOM_INT_HIGH = 8  # random integer inputs are drawn from [0, 8): valid indices for most models


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", parents=parents, help="run a compiled model",
                       description="Run a compiled model (.so) on inputs from a file or on "
                       "random inputs of the right shapes and dtypes.", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact", metavar="ARTIFACT", help="a library from `ember compile` (.so)")
    p.add_argument("--inputs", metavar="FILE", help=".npz with one array per input name "
                   "(.npy for a one-input model); default: random inputs")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--outputs", metavar="FILE", help="save the outputs to this .npz")
    p.add_argument("--print-top", type=positive_int, metavar="N",
                   help="the N highest scores of the first output, per batch row (classifiers)")
    p.add_argument("--repeat", type=positive_int,
                   help="timed measurements (default 10 when timing)")
    p.add_argument("--number", type=positive_int,
                   help="runs per measurement (default 1 when timing)")
    p.add_argument("--profile", action="store_true", help="per-operator time table")
    p.add_argument("--threads", type=positive_int,
                   help="threads for this run (default: the model's)")
    p.add_argument("--rpc", metavar="HOST:PORT[:KEY]", help="run on an RPC server "
                   "(secret, if it needs one, from $EMBER_RPC_SECRET)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=main)


# -- inputs ----------------------------------------------------------------------------------
def random_inputs(specs: Any, seed: int) -> dict[str, np.ndarray]:
    """Seeded random arrays for ``specs``: floats uniform in [0, 1), integers in [0, 8)."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in specs:
        if not spec.is_static:
            raise CLIError(f"input {spec.name!r} has no static shape "
                           f"({spec}), so random inputs cannot be made",
                           "give the inputs: --inputs FILE.npz")
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            out[spec.name] = rng.random(spec.shape).astype(dtype)
        elif dtype.kind == "b":
            out[spec.name] = rng.integers(0, 2, spec.shape).astype(dtype)
        else:
            out[spec.name] = rng.integers(0, RANDOM_INT_HIGH, spec.shape).astype(dtype)
    return out


def load_inputs(path: str, specs: Any) -> dict[str, np.ndarray]:
    """The arrays of ``path`` (.npz by input name; .npy, or a one-array .npz, for a model with
    one input)."""
    names = [s.name for s in specs]
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise CLIError(f"--inputs {path}: no such file") from None
    except (OSError, ValueError) as err:
        raise CLIError(f"--inputs {path}: not a .npz/.npy file ({err})") from None
    arrays = {names[0] if len(names) == 1 else "": data} if isinstance(data, np.ndarray) \
        else {k: data[k] for k in data.files}
    if len(names) == 1 and len(arrays) == 1:
        return {names[0]: next(iter(arrays.values()))}
    missing = [n for n in names if n not in arrays]
    extra = [k for k in arrays if k not in names]
    if missing or extra:
        raise CLIError(f"--inputs {path}: " + "; ".join(
            ([f"missing {', '.join(map(repr, missing))}"] if missing else [])
            + ([f"unknown {', '.join(map(repr, extra))}"] if extra else [])),
            f"the model's inputs are {', '.join(map(repr, names))}")
    return {n: arrays[n] for n in names}


# -- running ---------------------------------------------------------------------------------
def _with_threads(art: Artifact, threads: int | None) -> Any:
    if threads is None:
        return art.model
    from ..api.model import CompiledModel
    from ..runtime.model_record import ModelRecord
    from ..runtime.threads import check_num_threads

    model = art.model
    record = ModelRecord(model.executor, check_num_threads(threads, "--threads"), model.inputs,
                         model.outputs, art.info)
    return CompiledModel(model.factory, record, path=str(art.path))


def _timing(results: list[float], number: int) -> dict[str, Any]:
    """Seconds per run: median and p90 over the measurements, and runs per second."""
    median = statistics.median(results)
    p90 = float(np.percentile(results, 90))
    return {"repeat": len(results), "number": number, "median_s": median, "p90_s": p90,
            "mean_s": statistics.fmean(results), "min_s": min(results),
            "throughput_per_s": 1.0 / median if median > 0 else None}


def _timing_args(args: argparse.Namespace) -> tuple[int, int] | None:
    if args.repeat is None and args.number is None:
        return None
    return (10 if args.repeat is None else args.repeat,
            1 if args.number is None else args.number)


def run_local(model: Any, inputs: dict[str, np.ndarray],
              timing: tuple[int, int] | None) -> tuple[list[np.ndarray], dict[str, Any] | None]:
    """Outputs (a list) and, when asked, the timing of ``model`` here."""
    out = model(**inputs)
    outputs = out if isinstance(out, list) else [out]
    if timing is None:
        return outputs, None
    repeat, number = timing
    result = model.benchmark(**inputs, number=number, repeat=repeat)
    return outputs, _timing(list(result.results), number)


def run_remote(art: Artifact, address: str, inputs: dict[str, np.ndarray],
               timing: tuple[int, int] | None) -> tuple[list[np.ndarray], dict[str, Any] | None]:
    """Upload the library to the RPC server at ``address``, run it there, copy outputs back."""
    from .. import rpc
    from ..api.model import bind_inputs

    host, port, key = parse_rpc_address(address)
    checked = bind_inputs(art.model.inputs, [], inputs)
    secret = os.environ.get("EMBER_RPC_SECRET") or None
    sess = rpc.connect(host, port, key=key, secret=secret, timeout=300)
    try:
        sess.upload(str(art.path), art.path.name)
        rlib = sess.load_module(art.path.name)
        dev = sess.cpu(0)
        ex = rlib.get_function("default", query_imports=True)(dev)
        for name, value in checked.items():
            ex["set_input"](name, value)
        ex["run"]()
        outputs = [ex["get_output"](i).numpy() for i in range(ex["get_num_outputs"]())]
        result = None
        if timing is not None:
            repeat, number = timing
            bench = ex.time_evaluator("run", dev, number=number, repeat=repeat)()
            result = dict(_timing(list(bench.results), number), remote=f"{host}:{port}")
        return outputs, result
    finally:
        sess.close()


def profile_rows(art: Artifact, model: Any, inputs: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Per-operator time of one profiled run, longest first: name, time_us, share, calls."""
    from ..api.model import bind_inputs
    from ..runtime.threads import ThreadControl

    checked = bind_inputs(model.inputs, [], inputs)
    factory = model.factory
    with ThreadControl(factory).use(model.threads):
        if art.executor == "graph":
            report = factory.debug_create("default").profile(**checked)
        elif art.executor == "vm":
            from ..runtime.device import cpu
            from ..runtime.vm.profiler import VirtualMachineProfiler

            vm = VirtualMachineProfiler(factory.get_executor(), cpu(0))
            report = vm.profile(**checked)
        else:
            check_profilable(art)
    totals: dict[str, list[float]] = {}
    for call in report.calls:
        if call["Name"] == "__nop":  # a reshape: a view, no kernel
            continue
        us = float(call["Duration (us)"])
        slot = totals.setdefault(str(call["Name"]), [0.0, 0, 0.0, 0.0])
        slot[0] += us
        slot[1] += int(call.get("Count", 1))
        # the work split (graph executor): time-weighted over the calls of one operator
        slot[2] += us * float(call.get("Imbalance", 1.0))
        slot[3] += us * float(call.get("Serial Share", 1.0))
    whole = sum(t[0] for t in totals.values()) or 1.0
    split = any("Imbalance" in call for call in report.calls)
    rows = [{"name": n, "time_us": t, "share": 100.0 * t / whole, "calls": c,
             **({"imbalance": imb / t if t else 1.0, "serial": ser / t if t else 1.0}
                if split else {})}
            for n, (t, c, imb, ser) in totals.items()]
    return sorted(rows, key=lambda r: -r["time_us"])


def check_profilable(art: Artifact) -> None:
    """CLIError unless per-operator times can be measured for ``art`` (graph or VM)."""
    if art.executor not in ("graph", "vm"):
        raise CLIError("--profile: an AOT model's calls are compiled into one C function, "
                       "so its operators cannot be timed one by one",
                       "compile the same model with --executor graph (same kernels) to "
                       "profile it")


def top_classes(output: np.ndarray, n: int) -> list[list[tuple[int, float]]]:
    """Per batch row, the ``n`` highest (index, score) pairs."""
    rows = output.reshape(output.shape[0], -1) if output.ndim > 1 else output.reshape(1, -1)
    out = []
    for row in rows:
        best = np.argsort(-row, kind="stable")[:n]
        out.append([(int(i), float(row[i])) for i in best])
    return out


# -- printing --------------------------------------------------------------------------------
def _describe(arr: np.ndarray) -> dict[str, Any]:
    d: dict[str, Any] = {"shape": list(arr.shape), "dtype": str(arr.dtype)}
    if arr.size and arr.dtype.kind in "fiub":
        d.update(min=float(arr.min()), max=float(arr.max()), mean=float(arr.mean()))
    return d


def _output_names(model: Any, outputs: list[np.ndarray]) -> list[str]:
    return [s.name for s in model.outputs] or [f"output{i}" for i in range(len(outputs))]


def _text(art: Artifact, model: Any, source: str, outputs: list[np.ndarray],
          result: dict[str, Any]) -> str:
    where = f" on {result['remote']}" if result.get("remote") else ""
    lines = [(f"ember run: {art.path} ({model.executor}, {model.threads} thread(s)){where}, "
              f"{source}")]
    names = _output_names(model, outputs)
    rows = []
    for name, arr in zip(names, outputs):
        d = _describe(arr)
        stats = [f"{d[k]:.6g}" if k in d else "" for k in ("min", "max", "mean")]
        rows.append([name, d["dtype"], "x".join(map(str, arr.shape)) or "scalar", *stats])
    lines += ["", table(["output", "dtype", "shape", "min", "max", "mean"], rows, right=(3, 4, 5))]
    for r, best in enumerate(result.get("top", [])):
        lines += ["", f"top {len(best)} of {names[0]}" + (f", row {r}" if len(
            result["top"]) > 1 else "")]
        lines.append(table(["rank", "class", "score"],
                           [[k + 1, i, f"{s:.6g}"] for k, (i, s) in enumerate(best)], (0, 1, 2)))
    if result.get("timing"):
        t = result["timing"]
        lines += ["", (f"timing ({t['repeat']} x {t['number']} runs): median "
                       f"{fmt_seconds(t['median_s'])}, p90 {fmt_seconds(t['p90_s'])}, "
                       f"{t['throughput_per_s']:.1f} runs/s")]
    if result.get("profile"):
        split = "imbalance" in result["profile"][0]  # how each one's work split (threads > 1)
        rows = [[r["name"], f"{r['time_us']:.1f}", f"{r['share']:.1f}", r["calls"],
                 *([f"{r['imbalance']:.2f}", f"{r['serial']:.2f}"] if split else [])]
                for r in result["profile"]]
        heads = ["operator", "time (us)", "share %", "calls", *(["imbalance", "serial"]
                                                                if split else [])]
        lines += ["", table(heads, rows, tuple(range(1, len(heads))))]
    if result.get("saved"):
        lines += ["", f"outputs saved to {result['saved']}"]
    return "\n".join(lines)


def _check_args(args: argparse.Namespace) -> None:
    if args.rpc and (args.profile or args.threads is not None):
        raise CLIError("--profile and --threads apply to local runs, not with --rpc", code=2)
    if args.outputs and not args.outputs.endswith(".npz"):
        raise CLIError(f"--outputs {args.outputs}: the outputs are saved as .npz",
                       f"--outputs {Path(args.outputs).with_suffix('.npz')}", code=2)


def _inputs(args: argparse.Namespace, model: Any) -> tuple[dict[str, np.ndarray], str]:
    if args.inputs:
        return load_inputs(args.inputs, model.inputs), f"inputs from {args.inputs}"
    return random_inputs(model.inputs, args.seed), f"random inputs (seed {args.seed})"


def main(args: argparse.Namespace) -> int:
    _check_args(args)
    timing = _timing_args(args)
    art = open_artifact(args.artifact)
    if art.model is None:
        raise CLIError(f"{args.artifact}: a Model Library Format archive builds into a C "
                       "program; ember run runs libraries", "ember compile MODEL -o model.so")
    if args.profile:
        check_profilable(art)
    model = _with_threads(art, args.threads)
    inputs, source = _inputs(args, model)
    names: list[str] = []
    with Status(total=2) as status:
        status.stage("running" + (f" on {args.rpc}" if args.rpc else ""))
        if args.rpc:
            outputs, timed = run_remote(art, args.rpc, inputs, timing)
        else:
            outputs, timed = run_local(model, inputs, timing)
        names = _output_names(model, outputs)
        result: dict[str, Any] = {
            "artifact": str(art.path), "executor": model.executor, "threads": model.threads,
            "inputs": source, "timing": timed, "remote": args.rpc,
            "outputs": [dict(name=n, **_describe(o)) for n, o in zip(names, outputs)]}
        if args.profile:
            status.stage("profiling")
            result["profile"] = profile_rows(art, model, inputs)
    if args.print_top:
        result["top"] = top_classes(outputs[0], args.print_top)
    if args.outputs:
        np.savez(args.outputs, **dict(zip(names, outputs)))
        result["saved"] = args.outputs
    print(json.dumps(result, indent=2) if args.json else _text(art, model, source, outputs, result))
    return 0
