"""Opening what ``ember run`` and ``ember inspect`` are given: a library (``.so``: one saved
by ``ember compile``/``CompiledModel.save``, or a plain ``export_library`` of an executor
factory) or a Model Library Format archive (``.tar``).

Libraries load through the runtime alone; the compiler is imported only to rebuild the memory
plan of a plain graph-executor library (which has none saved).
"""
from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime.model_record import ModelRecord, TensorSpec
from ._console import CLIError

ARTIFACT_SUFFIXES = (".so", ".tar")


@dataclass
class Artifact:
    """A compiled model as the CLI shows it (``model`` set when it can run here)."""

    path: Path
    executor: str
    target: str | None
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    kernels: list[str]
    memory: dict[str, Any] | None
    threads: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    model: Any = None           # CompiledModel
    mlf_files: dict[str, str] = field(default_factory=dict)  # a .tar's text members


def factory_kernels(factory: Any) -> list[str]:
    """The kernel names of an executor factory, each once, in call order."""
    kind = factory.executor_kind
    if kind == "graph":
        from ..runtime.graph_format import parse_graph

        graph = parse_graph(factory.get_graph_json())
        names = [n.func_name for n in graph.nodes if not n.is_input and n.func_name != "__nop"]
    elif kind == "aot":
        names = [op["function_name"] for op in factory.get_model_metadata().operators]
    else:
        names = list(factory.get_executor().primitive_ops)
    return list(dict.fromkeys(names))


def open_artifact(text: str) -> Artifact:
    """The artifact at ``text``; CLIError when it is missing or not a compiled model."""
    path = Path(text)
    if path.suffix not in ARTIFACT_SUFFIXES:
        hint = ("compile it first: ember compile " + text) if path.suffix in (
            ".onnx", ".relay", ".txt") else "ember run takes a .so library or a .tar archive"
        raise CLIError(f"{text}: not a compiled model (expected .so or .tar)", hint, code=2)
    if not path.is_file():
        raise CLIError(f"{text}: no such file", "check the path")
    return _open_mlf(path) if path.suffix == ".tar" else _open_library(path)


def _open_library(path: Path) -> Artifact:
    from ..api.model import CompiledModel
    from ..runtime.executor_factory import ExecutorFactoryModule
    from ..runtime.loaders import load_module

    root = load_module(os.fspath(path))
    if isinstance(root, ModelRecord):
        factory, record = root.imported_modules[0], root
    elif isinstance(root, ExecutorFactoryModule):
        factory = root
        record = ModelRecord(factory.executor_kind, _default_threads(), *_specs(factory))
    else:
        raise CLIError(f"{path}: a library without a model (its root module is "
                       f"{root.type_key}); ember runs executor factories",
                       "make one with `ember compile` or relay.build(...).export_library()")
    memory = record.info.get("memory") if record.info else _memory(factory)
    details = {"module name": factory.libmod_name, "params": len(factory.get_params()),
               "file size": path.stat().st_size}
    if factory.executor_kind == "aot":
        meta = factory.get_model_metadata()
        details.update({"interface api": meta.interface_api, "link params": meta.link_params,
                        "constants": meta.main.constant_size_bytes})
    return Artifact(path, record.executor, factory.target, list(record.inputs),
                    list(record.outputs), factory_kernels(factory), memory, record.threads,
                    dict(record.info), details, CompiledModel(factory, record, path=str(path)))


def _default_threads() -> int:
    from ..runtime.threads import default_num_threads

    return default_num_threads()


def _specs(factory: Any) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Input and output specs of a factory saved without ember's record."""
    kind = factory.executor_kind
    if kind == "aot":
        main = factory.get_model_metadata().main
        return ([TensorSpec(p.relay_name_hint, p.shape, p.dtype) for p in main.inputs],
                [TensorSpec(p.relay_name_hint, p.shape, p.dtype) for p in main.outputs])
    if kind == "graph":
        from ..runtime.graph_format import parse_graph

        g = parse_graph(factory.get_graph_json())
        params = set(factory.get_params())
        ins = [g.entry_id(n) for n in g.arg_nodes if g.nodes[n].name not in params]
        names = [g.nodes[n].name for n in g.arg_nodes if g.nodes[n].name not in params]
        outs = [g.entry_id(h) for h in g.heads]
        return ([TensorSpec(n, tuple(g.shape[e]), g.dltype[e]) for n, e in zip(names, ins)],
                [TensorSpec(f"output{i}", tuple(g.shape[e]), g.dltype[e])
                 for i, e in enumerate(outs)])
    exe = factory.get_executor()
    # a VM library records parameter names only; shapes come from the inputs given
    return [TensorSpec(n, None, "tensor") for n in exe.get_function_params("main")], []


def _memory(factory: Any) -> dict[str, Any] | None:
    if factory.executor_kind == "aot":
        return dict(factory.get_model_metadata().memory, executor="aot")
    if factory.executor_kind == "graph":
        from ..runtime.graph_format import parse_graph
        from .analysis import graph_json_plan

        return graph_json_plan(parse_graph(factory.get_graph_json()))
    return None


# -- Model Library Format --------------------------------------------------------------------
_MLF_TEXT = ("metadata.json", "src/", "codegen/host/src/", "executor-config/graph/")


def _read_mlf(path: Path) -> dict[str, str]:
    """The text members ``inspect`` uses: {name without "./": text}."""
    try:
        with tarfile.open(path) as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and m.name.removeprefix("./").startswith(_MLF_TEXT)]
            return {m.name.removeprefix("./"): _read(tar, m) for m in members}
    except (tarfile.TarError, OSError, UnicodeDecodeError) as err:
        raise CLIError(f"{path}: not a Model Library Format archive ({err})") from None


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    f = tar.extractfile(member)
    assert f is not None, f"{member.name}: a regular file has contents"
    return f.read().decode()


def _open_mlf(path: Path) -> Artifact:
    files = _read_mlf(path)
    try:
        meta = json.loads(files["metadata.json"])
        (name, mod), = meta["modules"].items()
        main = mod["memory"]["functions"]["main"][0]
        kernels = [op["function_name"] for op in mod["memory"]["functions"]["operator_functions"]]
        executor = mod["executors"][0]
    except (KeyError, ValueError, TypeError, IndexError) as err:
        raise CLIError(f"{path}: not a Model Library Format archive of one model (metadata.json: "
                       f"{type(err).__name__} {err})") from None
    memory: dict[str, Any] | None = None
    graph = files.get(f"executor-config/graph/{name}.graph")
    if executor == "graph" and graph is not None:
        from ..runtime.graph_format import parse_graph
        from .analysis import graph_json_plan

        memory = graph_json_plan(parse_graph(graph))
    ins = [TensorSpec(k, None, v["dtype"]) for k, v in main["inputs"].items()]
    outs = [TensorSpec(k, None, v["dtype"]) for k, v in main["outputs"].items()]
    details = {"module name": name, "format version": meta.get("version"),
               "workspace": main["workspace_size_bytes"], "io": main["io_size_bytes"],
               "constants": main["constants_size_bytes"], "file size": path.stat().st_size,
               "exported": mod.get("export_datetime")}
    return Artifact(path, executor, ", ".join(mod.get("target", [])), ins, outs, kernels,
                    memory, details=details, mlf_files=files)


def mlf_text(art: Artifact, prefix: str, suffix: str) -> dict[str, str]:
    """{member name: text} of the archive's members under ``prefix`` ending in ``suffix``."""
    return {name: text for name, text in art.mlf_files.items()
            if name.startswith(prefix) and name.endswith(suffix)}
