"""``ember.compile``: a model in, a runnable ``CompiledModel`` out.

::

    model = ember.compile("model.onnx")                    # ONNX file or onnx.ModelProto
    model = ember.compile(mod, params=params)              # IRModule (+ weights)
    model = ember.compile("def @main(%x: Tensor[(2), float32]) { nn.relu(%x) }")  # text
    y = model(x)

The model goes through the frontend (``relay.frontend.from_onnx``, or the text parser), then
``relay.build`` with the chosen executor. ``executor="auto"`` picks AOT for a static dataflow
graph and the VM for dynamic shapes (``relay.Any``) or control flow, closures, ADTs,
references (the AOT build's own check, ``aot.build.check_supported``, made after
``DynamicToStatic``), and says which and why once, at INFO level, on the ``ember`` logger.
The VM runs a straight-line model with symbolic shapes as a few native calls per run (its
shape functions, then the same kernels a static build has; ``ember.runtime.vm.static_plan``),
so no shape has to be fixed for speed.
"""
from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..ir.module import IRModule
from ..ir.types import TensorType, TupleType, Type
from ..runtime.errors import TVMError
from ..runtime.threads import check_num_threads, default_num_threads
from .model import EXECUTORS, CompiledModel, ModelRecord, TensorSpec

logger = logging.getLogger("ember")
_TEXT_SUFFIXES = (".relay", ".txt")


def _onnx_model(model: Any) -> Any:
    """``model`` if it is an onnx.ModelProto or names an .onnx file (read later by the ONNX
    frontend's one loader, whose errors name the file), else None."""
    if type(model).__name__ == "ModelProto" and type(model).__module__.startswith("onnx"):
        return model
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".onnx"):
        return os.fspath(model)
    return None


def _relay_text(model: Any) -> str | None:
    """The Relay text of ``model`` (a .relay/.txt path, or text itself), else None."""
    if isinstance(model, os.PathLike) or (
            isinstance(model, str) and model.endswith(_TEXT_SUFFIXES) and "\n" not in model):
        path = Path(model)
        if path.suffix not in _TEXT_SUFFIXES or not path.is_file():
            raise FileNotFoundError(f"ember.compile: no Relay text file {os.fspath(path)!r} "
                                    f"(model files end in .onnx, .relay or .txt)")
        return path.read_text()
    if isinstance(model, str) and "(" not in model:  # no Relay program lacks a parenthesis
        raise ValueError(f"ember.compile: {model!r} is neither Relay text nor a model file "
                         "(.onnx, .relay or .txt)")
    return model if isinstance(model, str) else None


def from_onnx(model: Any,
              input_shapes: Mapping[str, Any] | None) -> tuple[IRModule, dict[str, Any]]:
    """The ONNX importer's ``(mod, params)`` (``ember.relay.frontend.from_onnx``)."""
    try:
        frontend = importlib.import_module("ember.relay.frontend")
    except ModuleNotFoundError as err:
        if err.name != "ember.relay.frontend":  # the importer's own dependency is missing
            raise
        raise ImportError("ember.compile: this ember has no ONNX importer "
                          "(ember.relay.frontend.from_onnx)") from err
    mod, params = frontend.from_onnx(model, shape=dict(input_shapes) if input_shapes else None)
    return mod, dict(params or {})


def to_relay(model: Any, input_shapes: Mapping[str, Any] | None,
             params: Mapping[str, Any] | None) -> tuple[IRModule, dict[str, Any]]:
    """``(mod, params)`` from any model ``ember.compile`` takes; TypeError for anything else."""
    onnx_model = _onnx_model(model)
    if onnx_model is not None:
        mod, found = from_onnx(onnx_model, input_shapes)
        return mod, {**found, **dict(params or {})}
    if input_shapes is not None:
        raise ValueError("ember.compile: input_shapes applies to ONNX models; a Relay "
                         "module's input shapes are the types of its main's parameters")
    if isinstance(model, IRModule):
        return model, dict(params or {})
    text = _relay_text(model)
    if text is None:
        raise TypeError(f"ember.compile: expected an ONNX model (path or onnx.ModelProto), an "
                        f"IRModule, or Relay text (a string or a .relay/.txt path), got "
                        f"{type(model).__name__}")
    from ..parser import fromtext

    return fromtext(text), dict(params or {})


def choose_executor(mod: IRModule, executor: str) -> tuple[str, str]:
    """(executor, why) for ``mod`` (typed); ``executor`` "auto" or one of graph/aot/vm."""
    if executor not in ("auto", *EXECUTORS):
        raise ValueError(f"ember.compile: executor must be 'auto', 'graph', 'aot' or 'vm', "
                         f"got {executor!r}")
    if executor != "auto":
        return executor, "requested"
    from ..relay.backend.aot.build import UNSUPPORTED, check_supported

    try:
        check_supported(mod)
    except TVMError as err:
        why = str(err).replace(f"relay.build: {UNSUPPORTED} (", "", 1)
        return "vm", why.removesuffix(")")
    return "aot", "static shapes and no control flow"


def _spec(name: str, ty: Type, dims: Sequence[str | None] = ()) -> TensorSpec:
    """The record of a value of type ``ty``; ``dims``: names of its symbolic axes."""
    if isinstance(ty, TensorType):
        named = list(dims) if len(dims) == len(ty.shape) else [None] * len(ty.shape)
        shape = tuple(d if isinstance(d, int) else named[k] for k, d in enumerate(ty.shape))
        return TensorSpec(name, shape, ty.dtype)
    return TensorSpec(name, None, str(ty))


def _output_types(ty: Type) -> list[Type]:
    """The tensors of a (nested) tuple result, flattened as every executor returns them."""
    stack, out = [ty], []
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(reversed(t.fields))
        else:
            out.append(t)
    return out


def specs(mod: IRModule, params: Mapping[str, Any],
          dims: Mapping[str, Sequence[str | None]] | None = None
          ) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Input specs (main's parameters that are not params, their symbolic axes named by
    ``dims``, by default the importer's ``mod.attrs["input_dims"]``) and output specs of
    typed ``mod``."""
    main = mod["main"]
    dims = dims if dims is not None else mod.attrs.get("input_dims") or {}
    inputs = [_spec(p.name_hint, p.checked_type, dims.get(p.name_hint, ())) for p in main.params
              if p.name_hint not in params]
    ret = main.checked_type.ret_type
    outputs = [_spec(f"output{i}", t) for i, t in enumerate(_output_types(ret))]
    return inputs, outputs


def compile(model: Any, executor: str = "auto", target: str = "llvm",
            threads: int | None = None, input_shapes: Mapping[str, Any] | None = None,
            params: Mapping[str, Any] | None = None) -> CompiledModel:
    """Compile ``model`` into a :class:`CompiledModel`.

    ``model``: an ONNX file path (``.onnx``) or ``onnx.ModelProto`` (imported with
    ``relay.frontend.from_onnx(model, shape=input_shapes)``), an ``IRModule`` (with
    ``params``, its weights by name), or Relay text (a string, or a ``.relay``/``.txt`` path).
    ``executor``: "auto" (AOT for static dataflow graphs, else the VM), "graph", "aot", "vm".
    ``threads``: worker threads of the model's kernels, recorded in the saved model (default
    ``EMBER_NUM_THREADS``, else the physical cores). The passes run at opt_level 3 with the
    pass options (``config``) and required/disabled passes of the enclosing ``PassContext``,
    if any. Raises TypeError/ValueError for bad
    arguments, FileNotFoundError for a missing file, and what the frontend or build raises.
    """
    from ..ir.transform import PassContext
    from ..relay import build as relay_build
    from ..relay.backend import Executor
    from ..relay.transform import DynamicToStatic, InferType

    threads = default_num_threads() if threads is None else check_num_threads(threads)
    mod, weights = to_relay(model, input_shapes, params)
    dims = mod.attrs.get("input_dims")  # ONNX dim_param names, from the importer
    # Known values make dyn ops static first, so a module they leave static goes to AOT.
    mod = DynamicToStatic()(InferType()(mod))
    kind, why = choose_executor(mod, executor)
    if executor == "auto":
        logger.info("ember.compile: executor %s (%s)", kind, why)
    inputs, outputs = specs(mod, weights, dims)
    outer = PassContext.current()
    with PassContext(opt_level=3, required_pass=outer.required_pass,
                     disabled_pass=outer.disabled_pass, config=outer.config):
        factory = relay_build(mod, target, params=weights or None, executor=Executor(kind))
    return CompiledModel(factory, ModelRecord(kind, threads, inputs, outputs))
