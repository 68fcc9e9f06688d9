"""Model Library Format (MLF): a compiled model as a tar of plain files a firmware build uses.

``export_model_library_format(factory_or_list, "model.tar")`` writes, per executor factory
(``relay.build``'s result; module name ``<mod>``)::

    metadata.json                           version, and per module: model_name, export_datetime,
                                            target, executors, style, memory (below)
    codegen/host/src/<mod>_lib<N>.c         the generated C (AOT: lib0 kernels, lib1 executor)
    codegen/host/lib/<mod>_lib<N>.o         the same compiled, for target "llvm" (ember's llvm
                                            is compiled through C, so the sources stay too)
    codegen/host/include/tvmgen_<mod>.h     the AOT interface (sizes, structs, entry points)
    parameters/<mod>.params                 the params (``save_param_dict`` byte format)
    src/<mod>.relay                         the model's IR as given to relay.build (text format)
    executor-config/graph/<mod>.graph       graph JSON (graph executor factories)
    runtime/                                the standalone C runtime: ``ember/crt`` with the C ABI
                                            headers of ``ember/include`` merged into its include/

``memory`` holds ``pools`` (AOT with the USMP: per workspace pool ``pool_name``,
``size_hint_bytes``, ``planned_bytes``, ``lower_bound`` and ``operator_workspace_bytes``, the
largest kernel scratch planned into it), ``constant_pools`` (AOT with constant memory pools:
per pool ``pool_name`` and ``size_bytes``) and ``functions``: ``main`` (one entry per device:
``workspace_size_bytes``, the run function's own memory plus the largest operator workspace
taken at run time; ``io_size_bytes``;
``constants_size_bytes``; ``inputs``/``outputs`` with sizes and dtypes) and
``operator_functions`` (``function_name`` and its ``workspace`` per device); graph factories
add ``sids`` (each storage id's size, and the input it holds if any).

Only C-source modules can be exported: a factory loaded from a compiled library, or one whose
kernels are not C, raises :class:`UnsupportedInModelLibraryFormatError`.
"""
from __future__ import annotations

import datetime
import io
import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..runtime.errors import CompileError, TVMError
from ..runtime.executor_factory import (
    AotExecutorFactoryModule,
    ExecutorFactoryModule,
    GraphExecutorFactoryModule,
)
from ..runtime.graph_format import Graph
from ..runtime.module import CSourceModule, Module
from ..runtime.params import save_param_dict
from . import UnsupportedInModelLibraryFormatError, get_crt_include_dirs, get_standalone_crt_dir

_GENERATED_VERSION = 7  # the layout of TVM's MLF version 7 ("modules" keyed by module name)
MAIN_FUNC_NAME_STR = "__tvm_main__"
CPU_DEVICE = 1  # kDLCPU
DATETIME_FORMAT = "%Y-%m-%d %H:%M:%SZ"  # export_datetime in metadata.json, UTC
# Files of ember/crt a firmware build needs (not build products or editor droppings).
_RUNTIME_SUFFIXES = (".c", ".h", ".md")


class DuplicateModuleNameError(TVMError, ValueError):
    """Two modules exported into one MLF share a module name."""


# -- codegen/ ------------------------------------------------------------------------------------
def _c_modules(mods: Sequence[Module]) -> list[CSourceModule]:
    """The C-source modules of the import trees of ``mods``; anything else is refused."""
    out: list[CSourceModule] = []
    for root in mods:
        for mod in root._walk():
            if isinstance(mod, CSourceModule) and mod.format in ("c", "cc", "cpp"):
                out.append(mod)
            elif not isinstance(mod, ExecutorFactoryModule):
                raise UnsupportedInModelLibraryFormatError(
                    f"{mod!r}: Model Library Format exports C sources, and this module has none "
                    "(a factory loaded from a compiled library, or a non-C module); export the "
                    "factory relay.build returned")
    return out


def _populate_codegen_dir(mods: Sequence[Module] | Mapping[str, str], codegen_dir: str,
                          module_name: str | None = None, target_kind: str = "c",
                          target: str | None = None) -> list[str]:
    """Write the C of ``mods`` (modules, or ``{file name: C}``) as
    ``<codegen_dir>/host/src/<module_name>_lib<N>.c`` and, for ``target_kind == "llvm"``, also
    compile each into ``host/lib/<module_name>_lib<N>.o`` for the CPU of ``target`` (the
    host's when None). Returns the written paths."""
    lib_name = f"{module_name}_lib" if module_name else "lib"
    if isinstance(mods, Mapping):
        sources = list(mods.values())
    else:
        sources = [m.get_source() for m in _c_modules(mods)]
    src_dir = Path(codegen_dir, "host", "src")
    src_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, text in enumerate(sources):
        path = src_dir / f"{lib_name}{i}.c"
        path.write_text(text)
        written.append(str(path))
    if target_kind == "llvm":
        lib_dir = Path(codegen_dir, "host", "lib")
        lib_dir.mkdir(parents=True, exist_ok=True)
        for i, src in enumerate(list(written)):
            written.append(_compile_object(src, str(lib_dir / f"{lib_name}{i}.o"), target))
    return written


def _compile_object(src: str, out: str, target: str | None = None) -> str:
    """``cc -c`` of one generated file (no OpenMP runtime: the simd hints only), for the CPU
    the C was generated for (``cpu_choice``: its kernels' vector width). Compiled for the
    baseline CPU instead, GCC would emulate 512-bit vectors with SSE: slow code, and a
    compile of minutes."""
    from ..contrib.cc import _compiler_argv
    from ..target.simd import cpu_choice

    incs = [f"-I{d}" for d in get_crt_include_dirs()]
    cmd = [*_compiler_argv(), "-c", "-O2", "-fPIC", "-fopenmp-simd",
           *cpu_choice(target).arch_flags, *incs, src, "-o", out]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"export_model_library_format: compiling {os.path.basename(src)} "
                           f"failed\ncommand: {' '.join(cmd)}\n{proc.stderr.strip()}")
    return out


# -- memory ----------------------------------------------------------------------------------------
def _entry(workspace: int, io: int = 0, constants: int = 0) -> dict[str, int]:
    return {"constants_size_bytes": int(constants), "device": CPU_DEVICE,
            "io_size_bytes": int(io), "workspace_size_bytes": int(workspace)}


def _build_function_memory_map(function_metadata: Mapping[str, Mapping[str, int]]
                               ) -> dict[str, list[dict[str, Any]]]:
    """``memory.functions`` from ``{function name: {"workspace_size_bytes", ...}}``, where
    ``__tvm_main__`` is the run function (also ``io_size_bytes``, ``constants_size_bytes``).

    Main's workspace is its own plus the largest operator workspace: operators run one at a
    time, each taking and returning its scratch memory."""
    sizes = {name: int(info.get("workspace_size_bytes", 0))
             for name, info in function_metadata.items() if name != MAIN_FUNC_NAME_STR}
    ops = [{"function_name": name,
            "workspace": [{"device": CPU_DEVICE, "workspace_size_bytes": size}]}
           for name, size in sizes.items()]
    largest = max(sizes.values(), default=0)
    main = dict(function_metadata.get(MAIN_FUNC_NAME_STR, {}))
    entry: dict[str, Any] = _entry(int(main.get("workspace_size_bytes", 0)) + largest,
                                   main.get("io_size_bytes", 0),
                                   main.get("constants_size_bytes", 0))
    for key in ("inputs", "outputs"):
        if key in main:
            entry[key] = main[key]
    return {"main": [entry], "operator_functions": ops}


def _aot_pools(meta: Any) -> dict[str, Any]:
    """``pools`` (USMP: per workspace pool its name, limit (-1: none), planned bytes, lower
    bound, and the largest operator scratch it holds) and ``constant_pools`` (per constant
    memory pool its name and bytes), each only when the model has some."""
    from ..relay.backend.aot.interface import constant_pool_sizes
    from ..relay.backend.aot.metadata import OPERATOR_WORKSPACE, pool_memory_key

    out: dict[str, Any] = {}
    if meta.pools:
        out["pools"] = [{**q, OPERATOR_WORKSPACE: int(meta.memory.get(
            pool_memory_key("workspace_pool", q["pool_name"]), 0))} for q in meta.pools]
    sizes = constant_pool_sizes(meta)
    if sizes:
        out["constant_pools"] = [{"pool_name": name, "size_bytes": size}
                                 for name, size in sizes.items()]
    return out


def _build_sid_map(graph: Graph) -> list[dict[str, Any]]:
    """One entry per storage id: its size (``Graph.storage_bytes``) and, for a graph input
    or param, ``input_binding`` (its name)."""
    sizes = graph.storage_bytes()
    binding = {graph.storage_id[graph.entry_id(nid)]: graph.nodes[nid].name
               for nid in graph.arg_nodes}
    out = []
    for sid in sorted(sizes):
        item: dict[str, Any] = {"storage_id": sid, "size_bytes": sizes[sid]}
        if sid in binding:
            item["input_binding"] = binding[sid]
        out.append(item)
    return out


def _io(params: Sequence[Any]) -> dict[str, dict[str, Any]]:
    return {p.relay_name_hint: {"size": p.nbytes, "dtype": p.dtype} for p in params}


def _aot_function_metadata(mod: AotExecutorFactoryModule) -> dict[str, dict[str, Any]]:
    meta = mod.get_model_metadata()
    main = meta.main
    out: dict[str, dict[str, Any]] = {op["function_name"]: dict(op) for op in meta.operators}
    out[MAIN_FUNC_NAME_STR] = {"workspace_size_bytes": main.workspace_size_bytes,
                               "io_size_bytes": main.io_size_bytes,
                               "constants_size_bytes": main.constant_size_bytes,
                               "inputs": _io(main.inputs), "outputs": _io(main.outputs)}
    return out


def _graph_function_metadata(mod: GraphExecutorFactoryModule) -> dict[str, dict[str, Any]]:
    """Main: storage of everything but inputs and params (workspace), graph inputs + outputs
    (io), params (constants). Operators: from the build's ``function_metadata`` when given
    (``{kernel: {"workspace_size_bytes": n}}``), else each kernel of the graph with 0."""
    graph = mod.graph
    params = set(mod.params)
    arg_sids = {graph.storage_id[graph.entry_id(nid)] for nid in graph.arg_nodes}
    sids = _build_sid_map(graph)
    workspace = sum(s["size_bytes"] for s in sids if s["storage_id"] not in arg_sids)
    inputs = {graph.nodes[n].name: graph.entry_id(n) for n in graph.arg_nodes
              if graph.nodes[n].name not in params}
    outputs = {("output" if len(graph.heads) == 1 else f"output{j}"): graph.entry_id(h)
               for j, h in enumerate(graph.heads)}

    def described(eids: Mapping[str, int]) -> dict[str, dict[str, Any]]:
        return {n: {"size": graph.nbytes(e), "dtype": graph.dltype[e]} for n, e in eids.items()}

    known = dict(mod.function_metadata or {})
    out: dict[str, dict[str, Any]] = {}
    for node in graph.nodes:
        if not node.is_input and node.func_name != "__nop" and node.func_name not in out:
            info = known.get(node.func_name, {})
            out[node.func_name] = {"workspace_size_bytes": int(
                info if isinstance(info, int) else info.get("workspace_size_bytes", 0))}
    io_bytes = sum(graph.nbytes(e) for e in [*inputs.values(), *outputs.values()])
    out[MAIN_FUNC_NAME_STR] = {
        "workspace_size_bytes": workspace, "io_size_bytes": io_bytes,
        "constants_size_bytes": sum(int(v.nbytes) for v in mod.params.values()),
        "inputs": described(inputs), "outputs": described(outputs)}
    return out


# -- one module ------------------------------------------------------------------------------------
def _target_strings(target: Any) -> list[str]:
    if target is None:
        return []
    if isinstance(target, Mapping):
        return [str(t) for t in target.values()]
    return [str(target)]


def _target_kind(mod: ExecutorFactoryModule) -> str:
    text = " ".join(_target_strings(mod.target)).strip()
    return text.split()[0] if text else "c"


def _relay_text(mod: ExecutorFactoryModule) -> str | None:
    ir_mod = getattr(mod, "ir_mod", None)
    if ir_mod is None:
        return None
    from ..ir.printer import astext

    return astext(ir_mod)


def _export_module(mod: ExecutorFactoryModule, root: Path) -> dict[str, Any]:
    """Write the files of one factory under ``root``; its entry of ``metadata.json``."""
    name = mod.libmod_name
    kind = _target_kind(mod)
    if isinstance(mod, AotExecutorFactoryModule):
        _c_modules([mod.lib])  # refuses imported modules without C (external codegens')
        sources: Sequence[Module] | Mapping[str, str] = mod.sources or [mod.lib]
        function_metadata = _aot_function_metadata(mod)
        executor = "aot"
    elif isinstance(mod, GraphExecutorFactoryModule):
        sources = [mod.lib]
        function_metadata = _graph_function_metadata(mod)
        executor = "graph"
    else:
        raise UnsupportedInModelLibraryFormatError(
            f"{mod!r}: Model Library Format holds graph and AOT executor factories; a "
            f"{mod.executor_kind or type(mod).__name__} factory cannot be exported")
    targets = _target_strings(mod.target)
    _populate_codegen_dir(sources, str(root / "codegen"), name, kind,
                          targets[0] if targets else None)
    memory: dict[str, Any] = {}
    if isinstance(mod, GraphExecutorFactoryModule):
        memory["sids"] = _build_sid_map(mod.graph)
        _write(root / "executor-config" / "graph" / f"{name}.graph", mod.get_graph_json())
    memory["functions"] = _build_function_memory_map(function_metadata)
    if isinstance(mod, AotExecutorFactoryModule):
        memory.update(_aot_pools(mod.get_model_metadata()))
    header = getattr(mod, "header", "")
    if header and isinstance(mod, AotExecutorFactoryModule):
        prefix = mod.get_model_metadata().prefix
        _write(root / "codegen" / "host" / "include" / f"{prefix}.h", header)
    _write(root / "parameters" / f"{name}.params", bytes(save_param_dict(mod.params)))
    text = _relay_text(mod)
    if text is not None:
        _write(root / "src" / f"{name}.relay", text)
    return {"model_name": name, "export_datetime": _now().strftime(DATETIME_FORMAT),
            "target": _target_strings(mod.target), "executors": [executor],
            "style": "full-model", "memory": memory}


def _now() -> datetime.datetime:
    """The export time, UTC (one function, so tests can fix the clock)."""
    return datetime.datetime.now(datetime.timezone.utc)


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def _copy_runtime(dest: Path) -> None:
    """``ember/crt`` (Makefile, sources, platform) with the C ABI headers in its include/, so
    that ``make -C runtime BUILD=...`` builds it from the MLF alone."""
    crt = Path(get_standalone_crt_dir())
    for path in sorted(crt.rglob("*")):
        rel = path.relative_to(crt)
        if rel.parts[0] == "template":  # project templates (ember.micro.project), not runtime
            continue
        if path.is_file() and (path.suffix in _RUNTIME_SUFFIXES or path.name == "Makefile"):
            _write(dest / rel, path.read_bytes())
    abi = Path(get_crt_include_dirs()[-1])
    for path in sorted(abi.rglob("*.h")):
        _write(dest / "include" / path.relative_to(abi), path.read_bytes())


def _check_input(mods: Any) -> list[ExecutorFactoryModule]:
    items = list(mods) if isinstance(mods, (list, tuple)) else [mods]
    if not items:
        raise TVMError("export_model_library_format: no module to export")
    for m in items:
        if not isinstance(m, ExecutorFactoryModule):
            raise UnsupportedInModelLibraryFormatError(
                f"{m!r}: export_model_library_format takes executor factories (what relay.build "
                f"returns), got {type(m).__name__}")
    names = [m.libmod_name for m in items]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise DuplicateModuleNameError(
            f"Multiple modules should have unique names: {', '.join(map(repr, dups))} is used "
            "more than once; build each model with its own mod_name")
    return items


def export_model_library_format(mods: Any, file_name: str | os.PathLike) -> Path:
    """Export one executor factory, or a list of them with distinct module names, to the
    Model Library Format tar ``file_name`` (layout in this module's doc). Returns the path.

    Raises DuplicateModuleNameError (a ValueError) for repeated module names and
    UnsupportedInModelLibraryFormatError for modules without C sources (e.g. a factory loaded
    from a compiled library) or executors other than graph and AOT.
    """
    items = _check_input(mods)
    out = Path(file_name)
    with tempfile.TemporaryDirectory(prefix="ember-mlf-") as tmp:
        root = Path(tmp)
        modules = {m.libmod_name: _export_module(m, root) for m in items}
        _copy_runtime(root / "runtime")
        metadata = {"modules": modules, "version": _GENERATED_VERSION}
        _write(root / "metadata.json", json.dumps(metadata, indent=2, sort_keys=True))
        _make_tar(root, out)
    return out


def _make_tar(root: Path, out: Path) -> None:
    """A tar of ``root``'s files in sorted order (deterministic apart from the dates)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                tar.add(str(path), arcname=str(path.relative_to(root)))
    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, out)


__all__ = ["DuplicateModuleNameError", "UnsupportedInModelLibraryFormatError",
           "export_model_library_format"]
