"""The ``relay.build`` pipeline (DESIGN.md "From model to machine code") and the ``"graph"``
kind of ``create_executor``.

optimize: InferType -> bind params -> the optimisation passes of the current PassContext
(each runs when the context's opt_level reaches its own) -> FuseOps -> InferType.
build: optimize -> lower every primitive function to C (``backend.te_compiler``) -> plan
memory -> graph codegen -> compile the C (cached by content hash) -> factory module.
``EMBER_DEBUG=1`` prints each stage with its time and the memory plan.
"""
from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..ir.expr import Function, RelayExpr
from ..ir.module import IRModule
from ..ir.transform import Pass, Sequential
from ..ir.types import is_dynamic
from ..runtime.errors import InternalError, TVMError
from ..runtime.ndarray import NDArray
from ..runtime.ndarray import array as nd_array
from ..target import Target
from .backend.executor import Executor
from .backend.interpreter import Executor as _EvaluatorBase
from .backend.runtime import Runtime
from .transform import (
    AlterOpLayout,
    CanonicalizeOps,
    EliminateCommonSubexpr,
    FoldConstant,
    FoldScaleAxis,
    FuseOps,
    InferType,
    SimplifyExpr,
    SimplifyInference,
    ToGraphNormalForm,
)


def optimize_passes() -> list[Pass]:
    """The optimisation passes, in TVM's order; each runs if the PassContext's opt_level
    reaches its own (SimplifyInference 0, FoldConstant 2, the others 3). AlterOpLayout plans
    blocked conv layouts for the current target (``relay/transform/alter_op_layout.py``)."""
    return [SimplifyInference(), EliminateCommonSubexpr(), FoldConstant(), FoldScaleAxis(),
            SimplifyExpr(), CanonicalizeOps(), FoldConstant(), AlterOpLayout()]


def _debug() -> int:
    try:
        return int(os.environ.get("EMBER_DEBUG", "0") or 0)
    except ValueError:
        return 0


# Called with (stage name, None) when a stage starts and (stage name, seconds) when it ends.
StageListener = Callable[[str, "float | None"], None]
_LISTENERS: list[StageListener] = []


@contextmanager
def stage_listener(listener: StageListener) -> Iterator[None]:
    """Within the block, ``listener(stage, None)`` is called as each build stage starts
    ("optimize", "lower", "compile", ...) and ``listener(stage, seconds)`` as it ends; the
    ``ember`` command draws its progress line from these."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


@contextmanager
def _stage(name: str) -> Iterator[None]:
    for listener in tuple(_LISTENERS):
        listener(name, None)
    start = time.perf_counter()
    yield
    seconds = time.perf_counter() - start
    for listener in tuple(_LISTENERS):
        listener(name, seconds)
    if _debug() >= 1:
        print(f"[ember] relay.build: {name} {1e3 * seconds:.1f} ms", file=sys.stderr)


def _as_module(ir_mod: Any, where: str) -> IRModule:
    if isinstance(ir_mod, Function):
        return IRModule.from_expr(ir_mod)
    if not isinstance(ir_mod, IRModule):
        raise TVMError(f"{where}: expected an IRModule or a relay.Function, got "
                       f"{type(ir_mod).__name__}")
    if "main" not in {gv.name_hint for gv in ir_mod.functions}:
        raise TVMError(f"{where}: the module has no main function")
    return ir_mod


def canon_target(target: Any, target_host: Any, where: str) -> Target:
    """The one CPU Target to build for (the current one, or "llvm", when None)."""
    if target is None:
        target = Target.current() or "llvm"
    if isinstance(target, Mapping) and "kind" not in target:
        if len(target) != 1:
            raise TVMError(f"{where}: ember builds for one target (the CPU), got "
                           f"{len(target)}: {dict(target)}")
        target = next(iter(target.values()))
    canon = Target(target, target_host)
    canon.check_buildable(where)
    return canon


def _bind(mod: IRModule, params: Mapping[str, Any] | None) -> tuple[IRModule, dict[str, NDArray]]:
    from .build_module import bind_params_by_name

    arrays = {k: v if isinstance(v, NDArray) else nd_array(v) for k, v in (params or {}).items()}
    if not arrays:
        return mod, arrays
    out = mod.copy()
    out["main"] = bind_params_by_name(mod["main"], arrays)
    return InferType()(out), arrays


def optimize(mod: Any, target: Any = None, target_host: Any = None,
             params: Mapping[str, Any] | None = None) -> tuple[IRModule, dict[str, NDArray]]:
    """``(optimised fused module, params bound)``; see ``relay.optimize``."""
    mod = _as_module(mod, "relay.optimize")
    with canon_target(target, target_host, "relay.optimize"), _stage("optimize"):
        mod = InferType()(mod)
        mod, arrays = _bind(mod, params)
        mod = Sequential(optimize_passes(), name="relay.optimize")(mod)
        mod = InferType()(FuseOps()(mod))
    return mod, arrays


def _check_static(mod: IRModule) -> None:
    main = mod["main"]
    for p in main.params:
        if is_dynamic(p.checked_type):
            raise TVMError(f"relay.build: input %{p.name_hint} has the dynamic type "
                           f"{p.checked_type}; the graph executor needs static shapes, use the "
                           "VM (relay.vm.compile or create_executor('vm'))")
    ret = main.checked_type.ret_type  # type: ignore[attr-defined]
    if is_dynamic(ret):
        raise TVMError(f"relay.build: main returns the dynamic type {ret}; the graph executor "
                       "needs static shapes, use the VM (relay.vm.compile)")


def _executor_and_runtime(target: Target, executor: Any, runtime: Any) -> tuple[Executor, Runtime]:
    from .build_module import _reconstruct_from_deprecated_options

    old_executor, old_runtime = _reconstruct_from_deprecated_options(target)
    executor = old_executor or executor or Executor("graph")
    runtime = old_runtime or runtime or Runtime("cpp")
    if not isinstance(executor, Executor):
        raise TVMError(f"relay.build: executor must be a relay.backend.Executor, got "
                       f"{type(executor).__name__} {executor!r}")
    if not isinstance(runtime, Runtime):
        raise TVMError(f"relay.build: runtime must be a relay.backend.Runtime, got "
                       f"{type(runtime).__name__} {runtime!r}")
    return executor, runtime


# executor name -> "module:function" building its factory; AOT and VM register here.
BUILDERS: dict[str, str] = {"graph": "ember.relay._build:build_graph",
                            "vm": "ember.relay.backend.vm.compiler:build_vm",
                            "aot": "ember.relay.backend.aot.build:build_aot"}


def build(ir_mod: Any, target: Any, target_host: Any, executor: Any, runtime: Any,
          params: Mapping[str, Any] | None, mod_name: str | None, workspace_pools: Any = None,
          constant_pools: Any = None) -> Any:
    """See ``relay.build``."""
    mod = _as_module(ir_mod, "relay.build")
    canon = canon_target(target, target_host, "relay.build")
    executor, runtime = _executor_and_runtime(canon, executor, runtime)
    name = "default" if mod_name is None else mod_name
    if not isinstance(name, str) or not name:
        raise TVMError(f"relay.build: mod_name must be a non-empty str, got {mod_name!r}")
    entry = BUILDERS.get(executor.name)
    if entry is None:
        raise TVMError(f"relay.build: the {executor.name!r} executor cannot be built yet "
                       f"(available: {', '.join(map(repr, BUILDERS))}); use "
                       "Executor('graph')" + (", or relay.vm.compile for the VM"
                                              if executor.name == "vm" else ""))
    module_name, func_name = entry.split(":")
    builder: Callable[..., Any] = getattr(importlib.import_module(module_name), func_name)
    with canon:
        return builder(mod, canon, executor, runtime, params, name)


def _kernels(lowered: Mapping[Any, Any]) -> dict[RelayExpr, Any]:
    """callee (primitive Function or GlobalVar) -> LoweredFunc, from lower_module's table
    (which also keys inline functions by kernel name: those keys are not callees)."""
    return {k: low for k, low in lowered.items() if isinstance(k, RelayExpr)}


def build_graph(mod: IRModule, target: Target, executor: Executor, runtime: Runtime,
                params: Mapping[str, Any] | None, mod_name: str) -> Any:
    """The graph executor factory for ``mod`` (see ``relay.build``)."""
    source = mod
    # Lets split fusion groups, and a static graph has no use for them.
    mod = ToGraphNormalForm()(InferType()(mod))
    mod, _ = optimize(mod, target, None, params)
    _check_static(mod)
    from ..runtime.executor_factory import GraphExecutorFactoryModule
    from .backend import te_compiler
    from .backend.graph_codegen import generate_graph

    with _stage("lower"):
        lowered, lib = te_compiler.lower_module(mod, target, mod_name)
    if runtime.name == "crt" or runtime.get("system-lib"):
        from ..runtime.aot_format import c_prefix
        from .backend.system_lib import registration_source

        lib.code += "\n" + registration_source(lib.func_names, c_prefix(mod_name), mod_name,
                                               runtime.name)
    with _stage("plan memory + graph codegen"):
        result = generate_graph(mod, _kernels(lowered))
    if _debug() >= 1:
        print(f"[ember] relay.build: memory plan: {result.plan.report}", file=sys.stderr)
    with _stage("compile"):
        for name in result.func_names:  # compiles the C once (cached by content hash)
            try:
                lib.get_function(name)
            except AttributeError:
                raise InternalError(f"relay.build: kernel {name!r} is called by the graph but "
                                    "missing from the lowered library") from None
    from .backend.aot.metadata import kernel_workspace_bytes

    # Per kernel its TVMBackendAllocWorkspace bytes, for Model Library Format's memory map.
    function_metadata = {low.name: {"workspace_size_bytes": kernel_workspace_bytes(low.prim_func)}
                         for low in _kernels(lowered).values()}
    return GraphExecutorFactoryModule(result.graph_json, lib, mod_name, result.params,
                                      ir_mod=source, target=target, executor=executor,
                                      runtime=runtime, function_metadata=function_metadata)


def evaluated_module(mod: IRModule, expr: Any = None) -> IRModule:
    """``mod``, typed, with ``expr`` (a Function or a GlobalVar of ``mod``; None: ``main``
    itself) as its ``main``: what the compiling kinds of ``create_executor`` build."""
    if expr is not None and not (hasattr(expr, "name_hint") and expr.name_hint == "main"):
        mod = mod.copy()
        mod["main"] = expr if isinstance(expr, Function) else mod[expr.name_hint]
    return InferType()(mod)


class GraphEvaluator(_EvaluatorBase):
    """The ``"graph"`` kind of ``create_executor``: builds ``main`` with ``relay.build`` and
    runs it on the graph executor. Results are NDArrays (ADTs for tuples)."""

    def _make_executor(self, expr: Function | Any = None) -> Callable[..., Any]:
        from ..runtime.container import ADT
        from ..runtime.graph_executor import GraphModule
        from .backend._values import convert_args

        mod = evaluated_module(self.mod, expr)
        main = mod["main"]
        _check_static(mod)
        factory = build(mod, self.target, None, None, None, None, "default")
        gmod = GraphModule(factory["default"](self.device))
        ret_type = main.checked_type.ret_type  # type: ignore[attr-defined]

        def unflatten(outs: Iterator[NDArray], ty: Any) -> Any:
            if hasattr(ty, "fields"):
                return ADT(0, [unflatten(outs, f) for f in ty.fields])
            return next(outs)

        def run(*args: Any, **kwargs: Any) -> Any:
            values = convert_args(main, args, kwargs, "graph executor")
            for i, value in enumerate(values):
                gmod.set_input(i, value)
            gmod.run()
            outs = [gmod.get_output(i).copyto(self.device) for i in range(gmod.get_num_outputs())]
            return unflatten(iter(outs), ret_type)

        return run
