"""``ember inspect ARTIFACT_OR_MODEL``: inputs, outputs, executor, target, metadata, kernels,
the memory plan; the optimised Relay (``--ir``), one kernel's C (``--c``), pictures
(``--plot``). A model file is imported, optimised and lowered (no C compiler runs)."""
from __future__ import annotations

import argparse
import itertools
import json
import re
from pathlib import Path
from typing import Any

from ._console import CLIError, Status, fmt_bytes, table
from .artifact import Artifact, mlf_text, open_artifact
from .compile import memory_line
from .options import MODEL_SUFFIXES, check_model_path, parse_input_shapes

EXAMPLES = """\
examples:
  ember inspect model.so                       # inputs, outputs, kernels, memory plan
  ember inspect model.onnx --executor graph    # the same, from the model (nothing compiled)
  ember inspect model.onnx --ir                # the optimised, fused Relay
  ember inspect model.onnx --c fused_nn_softmax    # the generated C of one kernel
  ember inspect model.so --plot memory.png     # the memory plan as a picture
  ember inspect model.so --plot profile.png    # operator times of a profiled run (graph, vm)
  ember inspect model.tar --json               # Model Library Format archives too
--plot FILE draws the memory plan when FILE's name starts with "memory", operator times when
it starts with "profile"; or say which: --plot memory=plan.png. Needs matplotlib (the [plot]
extra).
"""
PLOT_KINDS = ("memory", "profile")


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("inspect", parents=parents, help="describe a compiled model or a model",
                       description="Describe a compiled model (.so, .tar) or a model file "
                       "(.onnx, .relay, .txt).", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target_path", metavar="ARTIFACT_OR_MODEL")
    p.add_argument("--ir", action="store_true", help="print the optimised Relay (models; "
                   ".tar: the model as given to the build)")
    p.add_argument("--c", metavar="KERNEL", dest="kernel_c",
                   help="print the generated C of one kernel (models, .tar)")
    p.add_argument("--plot", action="append", default=[], metavar="[KIND=]FILE.png",
                   help="draw the memory plan or the operator times (repeatable)")
    p.add_argument("--executor", default="auto", choices=("auto", "graph", "aot", "vm"),
                   help="models: the executor to plan for (default: what compile picks)")
    p.add_argument("--target", default="llvm", help="models: the target (default llvm)")
    p.add_argument("--input-shapes", metavar="NAME:DxD,...", help="models: ONNX input shapes")
    p.add_argument("--seed", type=int, default=0, help="seed of the profiled run's inputs")
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.set_defaults(func=main)


def _plots(items: list[str]) -> list[tuple[str, Path]]:
    out = []
    for item in items:
        kind, eq, file = item.partition("=")
        if not eq:
            file = item
            kind = next((k for k in PLOT_KINDS if Path(item).name.startswith(k)), "")
        if kind not in PLOT_KINDS or not file:
            raise CLIError(f"--plot {item!r}: say what to draw",
                           "--plot memory=FILE.png or --plot profile=FILE.png", code=2)
        out.append((kind, Path(file)))
    return out


# -- models ----------------------------------------------------------------------------------
def analyse_model(args: argparse.Namespace, status: Status) -> tuple[Artifact, Any, dict[str, Any]]:
    """(the model described as an Artifact, the fused module, {kernel name: C})."""
    from ..api.compiler import choose_executor, specs
    from ..ir.transform import PassContext
    from ..relay import optimize
    from ..relay.backend._liveness import is_reshape_only
    from ..relay.backend.te_compiler import lower_module
    from ..relay.transform import InferType, ToGraphNormalForm
    from .analysis import BuildRecorder, count_ops, import_model, memory_plan, primitive_calls

    path = check_model_path(args.target_path)
    status.stage(f"importing {path.name}")
    mod, params = import_model(path, parse_input_shapes(args.input_shapes))
    kind, why = choose_executor(mod, args.executor)
    inputs, outputs = specs(mod, params)
    status.stage("optimising")
    recorder = BuildRecorder(on_pass=status.note)
    with PassContext(opt_level=3, instruments=[recorder]):
        fused, _ = optimize(ToGraphNormalForm()(mod), args.target, None, params or None)
    fused = InferType()(fused)
    status.stage("lowering kernels to C")
    lowered, _ = lower_module(fused, args.target)
    codes = {low.name: low.c_source for low in lowered.values()
             if not is_reshape_only(low.source_func)}  # reshapes are views: no kernel runs
    info = {"source": path.name, "executor chosen because": why, "opt_level": 3,
            "ops": count_ops(recorder.source) if recorder.source is not None else None,
            "calls": len(primitive_calls(fused)), "params": len(params)}
    art = Artifact(path, kind, args.target, inputs, outputs, list(codes),
                   memory_plan(fused, kind), info=info)
    return art, fused, codes


# -- output ----------------------------------------------------------------------------------
def kernel_source(source: str, name: str) -> str | None:
    """The part of a generated C file that defines kernel ``name`` (its comment, the unpacked
    function and the packed wrapper), or None."""
    starts = [m.start() for m in re.finditer(r"^/\* from: ", source, re.MULTILINE)]
    pattern = re.compile(rf"\b{re.escape(name)}(_unpacked)?\(")
    for a, b in itertools.pairwise([*starts, len(source)]):
        if pattern.search(source, a, b):
            return source[a:b].rstrip()
    return None


def find_kernel(names: list[str], wanted: str) -> str:
    """The kernel ``wanted`` names: exactly, or as the end of one name (``fused_nn_softmax``
    for ``tvmgen_default_fused_nn_softmax``)."""
    if wanted in names:
        return wanted
    found = [n for n in names if n.endswith("_" + wanted)]
    if len(found) == 1:
        return found[0]
    listed = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    what = "several kernels" if found else "no kernel"
    raise CLIError(f"--c {wanted}: {what} named so", f"kernels: {listed}")


def to_json(art: Artifact) -> dict[str, Any]:
    def specs(items: Any) -> list[dict[str, Any]]:
        return [{"name": s.name, "shape": None if s.shape is None else list(s.shape),
                 "dtype": s.dtype} for s in items]

    return {"path": str(art.path), "executor": art.executor,
            "target": None if art.target is None else str(art.target), "threads": art.threads,
            "inputs": specs(art.inputs), "outputs": specs(art.outputs), "kernels": art.kernels,
            "memory": art.memory, "info": art.info, "details": art.details}


def to_text(art: Artifact) -> str:
    lines = [f"ember inspect: {art.path}",
             f"  executor  {art.executor}", f"  target    {art.target}"]
    if art.threads is not None:
        lines.append(f"  threads   {art.threads}")
    for title, items in (("inputs", art.inputs), ("outputs", art.outputs)):
        rows = [[s.name, s.dtype, "?" if s.shape is None else
                 "x".join("?" if d is None else str(d) for d in s.shape) or "scalar"]
                for s in items]
        lines += ["", table([title, "dtype", "shape"], rows)]
    ops = art.info.get("ops")
    head = f"kernels ({len(art.kernels)})"
    if ops is not None:
        head += f": {ops} operators fused into {art.info.get('calls')} calls"
    lines += ["", head] + [f"  {k}" for k in art.kernels]
    known = "ops" in art.info or (art.memory is not None and "lower_bound" in art.memory)
    lines += ["", f"memory: {memory_line(art.memory) if known else 'not recorded'}"]
    meta = {k: v for k, v in art.info.items() if k not in ("ops", "calls", "kernels", "memory")}
    meta.update(art.details)
    if meta:
        rows = [[k, fmt_bytes(v) if k in _BYTE_KEYS and isinstance(v, int) else
                 json.dumps(v) if isinstance(v, (dict, list)) else v] for k, v in meta.items()]
        lines += ["", table(["metadata", "value"], rows)]
    return "\n".join(lines)


_BYTE_KEYS = ("file size", "workspace", "io", "constants")


def _draw(art: Artifact, plots: list[tuple[str, Path]], args: argparse.Namespace,
          status: Status) -> list[str]:
    from .plot import plot_memory, plot_profile

    written = []
    for kind, file in plots:
        if kind == "memory":
            if not art.memory or not art.memory.get("buffers"):
                raise CLIError(f"--plot {file}: {art.path} has no per-buffer memory plan",
                               "plans are recorded for graph and aot builds by ember compile "
                               "(inspect the model file to see its plan)")
            plot_memory(art.memory, art.path.name, file)
        else:
            if art.model is None:
                raise CLIError(f"--plot {file}: operator times need a profiled run of a "
                               "compiled library", "ember compile MODEL -o model.so; then "
                               "ember inspect model.so --plot profile.png")
            from .run import profile_rows, random_inputs

            status.stage("profiling")
            rows = profile_rows(art, art.model, random_inputs(art.model.inputs, args.seed))
            plot_profile(rows, art.path.name, file)
        written.append(str(file))
    return written


def main(args: argparse.Namespace) -> int:
    plots = _plots(args.plot)
    is_model = Path(args.target_path).suffix in MODEL_SUFFIXES
    with Status(total=4) as status:
        if is_model:
            art, fused, codes = analyse_model(args, status)
        else:
            art, fused, codes = open_artifact(args.target_path), None, {}
        written = _draw(art, plots, args, status)
    if args.ir:
        print(_ir(art, fused))
        return 0
    if args.kernel_c:
        print(_kernel_c(art, codes, args.kernel_c))
        return 0
    if args.json:
        print(json.dumps(dict(to_json(art), plots=written), indent=2, default=str))
    else:
        print(to_text(art) + "".join(f"\npicture: {w}" for w in written))
    return 0


def _ir(art: Artifact, fused: Any) -> str:
    if fused is not None:
        return str(fused)
    if art.mlf_files:
        texts = mlf_text(art, "src/", ".relay")
        if texts:
            return next(iter(texts.values()))
    raise CLIError(f"--ir: {art.path} keeps no Relay (a library holds compiled code)",
                   "inspect the model file: ember inspect MODEL --ir")


def _kernel_c(art: Artifact, codes: dict[str, str], wanted: str) -> str:
    name = find_kernel(art.kernels, wanted)
    sources = list(codes.values()) if codes else (
        list(mlf_text(art, "codegen/host/src/", ".c").values()))
    if not sources:
        raise CLIError(f"--c: {art.path} holds compiled code, not C",
                       "inspect the model file (ember inspect MODEL --c NAME) or a .tar")
    for source in ([codes[name]] if name in codes else sources):
        found = kernel_source(source, name)
        if found is not None:
            return found
    raise CLIError(f"--c {wanted}: kernel {name} not found in the generated C")
