"""The graph executor's compile side: ``relay.build(..., executor=Executor("graph"))`` and the
``"graph"`` kind of ``create_executor``.

build_graph: optimize -> lower every primitive function to C (``te_compiler``) -> plan
memory -> graph codegen -> compile the C (cached by content hash) -> factory module.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ....ir.expr import Function, RelayExpr
from ....ir.module import IRModule
from ....ir.types import is_dynamic
from ....runtime.env import debug_level
from ....runtime.errors import InternalError, TVMError
from ....runtime.ndarray import NDArray
from ....target import Target
from ...transform import InferType, ToGraphNormalForm
from ..executor import Executor
from ..interpreter import Executor as _EvaluatorBase
from ..pipeline import evaluated_module, optimize, stage
from ..runtime import Runtime


def check_static(mod: IRModule) -> None:
    """Raise unless ``main``'s inputs and result have static shapes (the graph executor's
    plan is fixed at build time)."""
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


def kernels_of(lowered: Mapping[Any, Any]) -> dict[RelayExpr, Any]:
    """callee (primitive Function or GlobalVar) -> LoweredFunc, from lower_module's table
    (which also keys inline functions by kernel name: those keys are not callees)."""
    return {k: low for k, low in lowered.items() if isinstance(k, RelayExpr)}


def build_graph(mod: IRModule, target: Target, executor: Executor, runtime: Runtime,
                params: Mapping[str, Any] | None, mod_name: str) -> Any:
    """The graph executor factory for ``mod`` (see ``relay.build``)."""
    from ....runtime.aot_format import c_prefix
    from ....runtime.executor_factory import GraphExecutorFactoryModule
    from .. import te_compiler
    from ....tir.codegen import referring_unit
    from ..system_lib import registration_source
    from .codegen import generate_graph
    from .linked_params import LOOKUP_LINKED_PARAM, linked_params_source

    source = mod
    # Lets split fusion groups, and a static graph has no use for them.
    mod = ToGraphNormalForm()(InferType()(mod))
    mod, _ = optimize(mod, target, None, params)
    check_static(mod)
    with stage("lower"):
        lowered, lib = te_compiler.lower_module(mod, target, mod_name)
    with stage("plan memory + graph codegen"):
        result = generate_graph(mod, kernels_of(lowered))
    params_out = result.params
    if executor.get("link-params", False) and result.params:  # the params live in the library
        linked = linked_params_source(result.params, c_prefix(mod_name))
        lib.code += "\n" + linked
        if lib.units:  # one more unit of the hosted build
            lib.units.append(("linked_params.c", referring_unit([], linked)))
        lib.func_names.append(LOOKUP_LINKED_PARAM)
        params_out = {}
    if runtime.name == "crt" or runtime.get("system-lib"):
        registration = registration_source(lib.func_names, c_prefix(mod_name), mod_name,
                                           runtime.name)
        lib.code += "\n" + registration
        if lib.units:  # the registration as one more unit of the hosted build
            lib.units.append(("registry.c", referring_unit(lib.func_names, registration)))
    if debug_level() >= 1:
        print(f"[ember] relay.build: memory plan: {result.plan.report}", file=sys.stderr)
    external = {low.name for low in lowered.values() if low.external_module is not None}
    missing = sorted(set(result.func_names) - set(lib.func_names) - external)
    if missing:
        raise InternalError(f"relay.build: kernels {missing} are called by the graph but "
                            "missing from the lowered library")
    with stage("compile"):
        lib.compile()  # not loaded: a build for another CPU must succeed here
        if runtime.name != "crt" and runtime.get("system-lib") and result.func_names:
            lib.get_function(result.func_names[0])  # loading registers the system library
    # Per kernel its TVMBackendAllocWorkspace bytes, for Model Library Format's memory map.
    function_metadata = {low.name: {"workspace_size_bytes": low.workspace_bytes}
                         for low in kernels_of(lowered).values()}
    return GraphExecutorFactoryModule(result.graph_json, lib, mod_name, params_out,
                                      ir_mod=source, target=target, executor=executor,
                                      runtime=runtime, function_metadata=function_metadata)


class GraphEvaluator(_EvaluatorBase):
    """The ``"graph"`` kind of ``create_executor``: builds ``main`` with ``relay.build`` and
    runs it on the graph executor. Results are NDArrays (ADTs for tuples). A subclass runs
    another module-based executor by overriding ``_executor_module``."""

    kind = "graph"

    def _executor_module(self, mod: IRModule, target: Target) -> Any:
        """The runnable module (``set_input``/``run``/``get_output``) for typed ``mod``."""
        from ....runtime.graph_executor import GraphModule

        check_static(mod)
        factory = build_graph(mod, target, Executor("graph"), Runtime("cpp"), None, "default")
        return GraphModule(factory["default"](self.device))

    def _make_executor(self, expr: Function | Any = None) -> Callable[..., Any]:
        from ....runtime.container import ADT
        from .._values import convert_args
        from ..pipeline import canon_target

        mod = evaluated_module(self.mod, expr)
        main = mod["main"]
        target = canon_target(self.target, None, "create_executor")
        with target:
            gmod = self._executor_module(mod, target)
        ret_type = main.checked_type.ret_type  # type: ignore[attr-defined]

        def unflatten(outs: Iterator[NDArray], ty: Any) -> Any:
            if hasattr(ty, "fields"):
                return ADT(0, [unflatten(outs, f) for f in ty.fields])
            return next(outs)

        def run(*args: Any, **kwargs: Any) -> Any:
            values = convert_args(main, args, kwargs, f"{self.kind} executor")
            for i, value in enumerate(values):
                gmod.set_input(i, value)
            gmod.run()
            outs = [gmod.get_output(i).copyto(self.device) for i in range(gmod.get_num_outputs())]
            return unflatten(iter(outs), ret_type)

        return run
