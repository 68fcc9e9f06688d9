"""``ember compile MODEL``: an ONNX or Relay text model in, a library (or C, or Model Library
Format) out, with a live progress line and a summary of what the build did."""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._console import CLIError, Status, fmt_bytes, fmt_seconds
from .options import (
    MODEL_SUFFIXES,
    check_model_path,
    parse_input_shapes,
    parse_pass_config,
    positive_int,
)

EXAMPLES = """\
examples:
  ember compile model.onnx                              # -> model.so (executor picked for you)
  ember compile model.onnx --input-shapes data:1x3x224x224 -o net.so
  ember compile model.relay --executor graph --opt-level 2 --threads 4
  ember compile model.onnx --executor aot --runtime crt --interface-api c -o model.tar
  ember compile model.relay --executor aot --link-params --system-lib -o model.o
outputs (by suffix):
  .so   one shared library: kernels, executor, params; `ember run`, ember.load, no compiler
  .tar  Model Library Format: C sources, headers, params, metadata and the C runtime
  .c    the generated C (graph: also NAME.json and NAME.params; AOT: also the header)
  .o    the same compiled to an object, for linking into a program (see --system-lib)
"""

OUTPUT_SUFFIXES = (".so", ".tar", ".c", ".o")
# relay.build stage -> (its name in the summary's times, what the progress line says)
STAGES = {"optimize": ("optimise", "optimising"),
          "lower": ("lower", "lowering kernels to C"),
          "vm passes": ("vm passes", "VM passes"),
          "vm codegen + lower kernels": ("lower", "lowering kernels to C"),
          "aot codegen": ("codegen", "planning memory, generating the executor"),
          "plan memory + graph codegen": ("codegen", "planning memory, generating the graph"),
          "compile": ("cc", "compiling C")}


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compile", parents=parents, help="compile a model into a library",
                       description="Compile an ONNX (.onnx) or Relay text (.relay, .txt) model.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="where to write (.so, .tar, .c, .o; default: MODEL's name with .so)")
    p.add_argument("--executor", default="auto", choices=("auto", "graph", "aot", "vm"),
                   help="auto: AOT for static graphs, the VM for dynamic shapes/control flow")
    p.add_argument("--runtime", default="cpp", choices=("cpp", "crt"),
                   help="cpp: ember's hosted runtime; crt: the standalone C runtime (firmware)")
    p.add_argument("--interface-api", choices=("packed", "c"), default=None,
                   help="AOT entry point: packed (default) or a plain C function (needs crt)")
    p.add_argument("--link-params", action="store_true",
                   help="put the weights into the code as constant arrays (graph, aot)")
    p.add_argument("--system-lib", action="store_true",
                   help="register the kernels at start-up, for static linking")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="threads of the model's kernels, saved with it (default: the cores)")
    p.set_defaults(func=main)


def add_model_options(p: argparse.ArgumentParser) -> None:
    """MODEL and the options that decide what a build makes of it (compile and tune share
    them: a tuning record applies when the build asks for the same kernel calls)."""
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx, .relay or .txt)")
    p.add_argument("--target", default="llvm",
                   help="what to compile for (default llvm: this CPU; 'c': portable C)")
    p.add_argument("--input-shapes", metavar="NAME:DxD,...",
                   help="ONNX input shapes, e.g. data:1x3x224x224,mask:1x128")
    p.add_argument("--opt-level", type=int, default=3, choices=range(4),
                   help="optimisation level 0-3 (default 3)")
    p.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a pass option (repeatable), e.g. relay.FuseOps.max_depth=8")
    p.add_argument("--desired-layout", default=None,
                   choices=("NCHW", "NCHWc", "NCHW4c", "NCHW8c", "NCHW16c"),
                   help="conv layout: NCHW keeps the model's; NCHWc (default) blocks channels "
                        "by the target's vector lanes; NCHW<L>c by L")


def load_model(args: argparse.Namespace, status: Status
               ) -> tuple[Path, Any, dict[str, Any], dict[str, Any], int, float]:
    """``(path, mod, params, pass config, threads, import seconds)`` of the model options
    (:func:`add_model_options`) and ``--threads``."""
    from ..runtime.threads import default_num_threads
    from .analysis import import_model

    path = check_model_path(args.model)
    shapes = parse_input_shapes(args.input_shapes)
    config = parse_pass_config(args.pass_config)
    if args.desired_layout is not None:
        config["relay.AlterOpLayout.desired_layout"] = args.desired_layout
    threads = default_num_threads() if args.threads is None else args.threads
    status.stage(f"importing {path.name}")
    start = time.perf_counter()
    from ..ir.transform import PassContext

    frontend = {k: v for k, v in config.items() if k.startswith("relay.frontend.")}
    with PassContext(config=frontend):  # the importer reads its keys from the context
        mod, params = import_model(path, shapes)
    return path, mod, params, config, threads, time.perf_counter() - start


@dataclass
class Build:
    """What a compile made and measured."""

    model: Any                     # CompiledModel
    why: str                       # why this executor
    info: dict[str, Any]           # saved in the record; inspect shows it
    timings: dict[str, float] = field(default_factory=dict)
    c_builds: list[Any] = field(default_factory=list)  # ember.contrib.cc.BuildReport


def _output_path(args: argparse.Namespace) -> Path:
    out = Path(args.output) if args.output else Path(Path(args.model).stem + ".so")
    if out.suffix not in OUTPUT_SUFFIXES:
        raise CLIError(f"-o {out}: unknown output type {out.suffix or '(none)'!r}",
                       "use .so (library), .tar (Model Library Format), .c (C source) or "
                       ".o (object)", code=2)
    if not out.parent.is_dir():
        raise CLIError(f"-o {out}: no directory {str(out.parent)!r}")
    return out


def executor_options(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """The relay.backend.Executor options the flags ask for; CLIError for combinations that
    cannot work, said before anything is built."""
    opts: dict[str, Any] = {}
    if args.link_params:
        if kind == "vm":
            raise CLIError("--link-params: the VM keeps weights in its program already",
                           "drop --link-params, or use --executor graph/aot", code=2)
        opts["link-params"] = True
    if args.interface_api is not None:
        if kind != "aot":
            raise CLIError(f"--interface-api applies to the AOT executor, not {kind}",
                           "add --executor aot", code=2)
        opts["interface-api"] = args.interface_api
        if args.interface_api == "c":
            if args.runtime != "crt":
                raise CLIError("--interface-api c needs --runtime crt (the hosted runtime "
                               "calls the packed entry point)", "add --runtime crt", code=2)
            opts["unpacked-api"] = True
    if kind == "vm" and (args.runtime == "crt" or args.system_lib):
        raise CLIError("the VM runs on the hosted runtime only (no --runtime crt or "
                       "--system-lib)", "use --executor graph or aot", code=2)
    return opts


def compile_model(args: argparse.Namespace, status: Status) -> Build:
    """Import, build and analyse ``args.model`` as the flags say (no output written)."""
    from ..api.compiler import choose_executor, specs
    from ..api.model import CompiledModel
    from ..ir.transform import PassContext
    from ..relay import build as relay_build
    from ..relay._build import stage_listener
    from ..relay.backend import Executor, Runtime
    from ..runtime.model_record import ModelRecord
    from ..topi.tile_records import THREADS_OPTION
    from .analysis import BuildRecorder

    path, mod, params, config, threads, import_seconds = load_model(args, status)
    timings: dict[str, float] = {"import": import_seconds}
    kind, why = choose_executor(mod, args.executor)
    executor = Executor(kind, executor_options(args, kind))
    runtime = Runtime(args.runtime, {"system-lib": True} if args.system_lib else None)
    inputs, outputs = specs(mod, params)

    def on_stage(name: str, seconds: float | None) -> None:
        short, text = STAGES.get(name, (name, name))
        if seconds is None:
            status.stage(text)
        else:
            timings[short] = timings.get(short, 0.0) + seconds

    from ..contrib import cc

    recorder = BuildRecorder(on_pass=status.note)
    # the tuning records looked up are those of the thread count the model will run on
    build_config = {**config, THREADS_OPTION: threads}
    with PassContext(opt_level=args.opt_level, config=build_config, instruments=[recorder]), \
            stage_listener(on_stage), cc.build_reports() as c_builds:
        factory = relay_build(mod, args.target, params=params or None, executor=executor,
                              runtime=runtime)
    status.note("")
    info = dict(source=path.name, **_build_info(args, executor, config, recorder, factory))
    record = ModelRecord(kind, threads, inputs, outputs, info)
    return Build(CompiledModel(factory, record), why, info, timings, c_builds)


def _build_info(args: argparse.Namespace, executor: Any, config: dict[str, Any],
                recorder: Any, factory: Any) -> dict[str, Any]:
    """What the saved record keeps about the build (``ember inspect`` shows it)."""
    from ..relay.transform import InferType
    from .analysis import count_ops, memory_plan, primitive_calls
    from .artifact import factory_kernels

    fused = InferType()(recorder.fused) if recorder.fused is not None else None
    plan = memory_plan(fused, executor.name) if fused is not None else None
    _check_plan(plan, factory)
    return {"target": str(factory.target), "runtime": args.runtime,
            "system_lib": bool(args.system_lib),
            "executor_options": {k: _plain(executor[k]) for k in executor},
            "opt_level": args.opt_level, "pass_config": config,
            "ops": count_ops(recorder.source) if recorder.source is not None else None,
            "calls": len(primitive_calls(fused)) if fused is not None else None,
            "kernels": factory_kernels(factory), "memory": plan}


def _plain(value: Any) -> Any:
    """An option value as JSON (bools and ints stay, anything else as text)."""
    return value if isinstance(value, (bool, int, str)) else str(value)


def _check_plan(plan: dict[str, Any] | None, factory: Any) -> None:
    """The recomputed AOT plan must be the one the build made (same planner, same input)."""
    if plan is None or plan["executor"] != "aot":
        return
    built = factory.get_model_metadata().memory
    if built.get("planned_bytes") != plan["planned_bytes"]:
        from ..runtime.errors import InternalError

        raise InternalError(f"ember compile: the memory plan recomputed for the report "
                            f"({plan['planned_bytes']} bytes) differs from the build's "
                            f"({built.get('planned_bytes')} bytes)")


def write_output(build: Build, out: Path) -> list[Path]:
    """Write the build as ``out`` says (suffix); returns every file written."""
    model, factory = build.model, build.model.factory
    if out.suffix == ".so":
        model.save(out)
        return [out]
    if model.executor == "vm":
        raise CLIError(f"-o {out}: the VM's bytecode lives in a library only",
                       "write a .so, or compile with --executor graph/aot for C outputs")
    if out.suffix == ".tar":
        from ..micro import export_model_library_format

        export_model_library_format(factory, out)
        return [out]
    written = [out]
    factory.get_lib().save(os.fspath(out))  # .c: the source; .o: compiled
    stem = out.with_suffix("")
    if model.executor == "graph":
        from ..runtime.params import save_param_dict

        Path(f"{stem}.json").write_text(factory.get_graph_json())
        Path(f"{stem}.params").write_bytes(bytes(save_param_dict(factory.get_params())))
        written += [Path(f"{stem}.json"), Path(f"{stem}.params")]
    else:
        header = out.parent / f"{factory.get_model_metadata().prefix}.h"
        header.write_text(factory.get_header())
        written.append(header)
        if factory.get_params():
            from ..runtime.params import save_param_dict

            Path(f"{stem}.params").write_bytes(bytes(save_param_dict(factory.get_params())))
            written.append(Path(f"{stem}.params"))
    return written


def summary(build: Build, written: list[Path], seconds: float) -> str:
    """The lines printed after a build."""
    info, model = build.info, build.model
    lines = [f"ember compile: {info['source']} -> {written[0]}",
             (f"  executor  {model.executor} ({build.why}); target {info['target']}, runtime "
              f"{info['runtime']}, {model.threads} thread(s)")]
    shape_funcs = sum(k.endswith("_shape_func") for k in info["kernels"])
    kernels = len(info["kernels"]) - shape_funcs
    if info["ops"] is not None:
        extra = f" (+{shape_funcs} shape functions)" if shape_funcs else ""
        lines.append(f"  fusion    {info['ops']} operators -> {info['calls']} fused calls, "
                     f"{kernels} distinct kernels{extra}")
    lines.append(f"  memory    {memory_line(info['memory'])}")
    sizes = ", ".join(f"{p} ({fmt_bytes(p.stat().st_size)})" for p in written)
    lines.append(f"  output    {sizes}")
    parts = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in build.timings.items())
    lines.append(f"  time      {fmt_seconds(seconds)} in all; {parts}")
    lines += [f"  C         {report.summary()}" for report in build.c_builds]
    return "\n".join(lines)


def memory_line(plan: dict[str, Any] | None) -> str:
    """``768 B planned (lower bound 768 B, 808 B without reuse)`` for a plan dict."""
    if plan is None:
        return "not a static graph: allocated at run time"
    bound = fmt_bytes(plan["lower_bound"])
    if plan.get("planned_bytes") is None:
        return f"intermediates planned by the VM at run time (lower bound {bound})"
    extra = plan["planned_bytes"] - plan["lower_bound"]
    gap = "at the lower bound" if extra <= 0 else f"lower bound {bound}, +{fmt_bytes(extra)}"
    return (f"{fmt_bytes(plan['planned_bytes'])} for intermediates ({gap}; "
            f"{fmt_bytes(plan['total_bytes'])} without reuse)")


def main(args: argparse.Namespace) -> int:
    out = _output_path(args)
    start = time.perf_counter()
    with Status(total=6) as status:
        build = compile_model(args, status)
        status.stage(f"writing {out}" + (" (C compiler)" if out.suffix in (".so", ".o") else ""))
        begin = time.perf_counter()
        written = write_output(build, out)
        build.timings["write"] = time.perf_counter() - begin
    print(summary(build, written, time.perf_counter() - start))
    return 0


__all__ = ["MODEL_SUFFIXES", "Build", "add_parser", "compile_model", "main", "write_output"]
