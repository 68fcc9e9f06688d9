"""The driver: ``relay.build``, ``relay.optimize`` and ``relay.create_executor``.

``relay.build(mod, target="llvm", params=...)`` runs the pipeline of DESIGN.md (type
inference, param binding, optimisation under the current PassContext, fusion, lowering to C,
memory planning, executor codegen, compiling the C) and returns an executor factory module:
``factory["default"](ember.cpu(0))`` is the executor. ``relay.create_executor(kind, mod,
device, target, params)`` gives an executor whose ``evaluate(expr=None, binds=None)`` returns
a Python callable; kinds are registered by the backends (``relay/backend/registry.py``):
``"debug"`` (the reference interpreter), ``"graph"`` (built with ``relay.build``, run by the
graph executor) and ``"vm"``.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping

from ..ir.expr import Function
from ..ir.module import IRModule
from ..runtime.device import Device, device as _device
from ..runtime.errors import TVMError
from ..runtime.ndarray import NDArray
from .backend import registry
from .transform.bind_params import bind_params_by_name  # noqa: F401  (relay.build_module's name)

_HOST_TARGETS = ("llvm", "c")


def _check_target(target: Any) -> None:
    if target is None or not isinstance(target, str):
        return  # a Target object (ember.target) has been validated already
    kind = target.split()[0] if target.strip() else ""
    if kind not in _HOST_TARGETS:
        raise TVMError(f"create_executor: target {target!r} is not supported; ember compiles for "
                       f"the host CPU only (use one of {', '.join(map(repr, _HOST_TARGETS))})")


def _as_device(dev: Any) -> Device:
    dev = _device(dev) if not isinstance(dev, Device) else dev
    dev.check_supported()
    return dev


def create_executor(kind: str = "debug", mod: IRModule | None = None, device: Any = None,
                    target: Any = "llvm", params: Mapping[str, Any] | None = None) -> Any:
    """An executor of ``kind`` for ``mod``; ``executor.evaluate()`` runs ``mod["main"]``.

    ``params`` binds parameters of ``main`` by name (as constants). ``device`` defaults to
    ``ember.cpu(0)``. Raises TVMError for an unknown kind, a non-CPU device or target.
    """
    cls = registry.get_evaluator(kind, "create_executor")
    if mod is None:
        mod = IRModule()
    elif not isinstance(mod, IRModule):
        raise TVMError(f"create_executor: mod must be an IRModule, got {type(mod).__name__}")
    dev = _as_device("cpu" if device is None else device)
    _check_target(target)
    if params:
        if "main" not in {g.name_hint for g in mod.functions}:
            raise TVMError("create_executor: params= binds parameters of main, but the module "
                           "has no main function")
        mod = mod.copy()
        mod["main"] = bind_params_by_name(mod["main"], params)
    return cls(mod, dev, target)


# -- build ----------------------------------------------------------------------------------------
def _deprecated(registry: str, param: str, sub: bool) -> None:
    # The Relay-era messages, word for word: scripts match on them. Attributed to the caller
    # of relay.build (5 frames up: build -> _build.build -> _executor_and_runtime -> here).
    what = f"{registry} (tvm.relay.backend.{registry})" + (f" parameter {param}" if sub else "")
    warnings.warn(f"Please use {what} instead of deprecated Target parameter -{param}",
                  DeprecationWarning, stacklevel=6)


def _reconstruct_from_deprecated_options(target: Any) -> tuple[Any, Any]:
    """The (Executor, Runtime) named by deprecated target options (``-executor=aot``,
    ``-runtime=c``, ``-link-params``, ``-interface-api``, ``-unpacked-api``, ``-system-lib``,
    ``-workspace-byte-alignment``, ``-constants-byte-alignment``), each None when the target
    names none; each option found gives the Relay-era DeprecationWarning."""
    from .backend.executor import Executor
    from .backend.runtime import Runtime

    attrs = target.attrs if target is not None else {}
    ex_args = {}
    for key, alias in (("interface-api", None), ("unpacked-api", None),
                       ("link-params", None), ("workspace-byte-alignment", None),
                       ("constants-byte-alignment", "constant-byte-alignment")):
        if key in attrs and (key != "link-params" or attrs[key]):
            _deprecated("Executor", key, sub=True)
            ex_args[alias or key] = attrs[key]
    executor = None
    if "executor" in attrs:
        _deprecated("Executor", "executor", sub=False)
    if "executor" in attrs or ex_args:
        executor = Executor(attrs.get("executor", "graph"), ex_args)
    runtime = None
    if "runtime" in attrs:
        _deprecated("Runtime", "runtime", sub=False)
    if "system-lib" in attrs:
        _deprecated("Runtime", "system-lib", sub=True)
    if "runtime" in attrs or "system-lib" in attrs:
        name = attrs.get("runtime", "cpp")
        rt_args = {"system-lib": attrs["system-lib"]} if "system-lib" in attrs else {}
        runtime = Runtime("crt" if name == "c" else name, rt_args)
    return executor, runtime


def _function_deprecated(ir_mod: Any, name: str) -> None:
    if isinstance(ir_mod, Function):
        warnings.warn(f"Please use input parameter mod (tvm.IRModule) instead of deprecated "
                      f"parameter {name} (tvm.relay.function.Function)", DeprecationWarning,
                      stacklevel=3)


def build(ir_mod: Any, target: Any = None, target_host: Any = None, executor: Any = None,
          runtime: Any = None, workspace_memory_pools: Any = None,
          constant_memory_pools: Any = None, params: Mapping[str, Any] | None = None,
          mod_name: str | None = "default", module_name: str | None = None) -> Any:
    """Compile ``ir_mod`` (an IRModule with ``main``, or a Function) into a factory module.

    ``target`` defaults to the current ``with Target(...)`` or ``"llvm"`` (the host CPU);
    ``executor`` to ``Executor("graph")``, ``runtime`` to ``Runtime("cpp")``; ``params``
    binds parameters of ``main`` by name (they become constants). The PassContext's
    opt_level chooses the optimisations. ``graph, lib, params = relay.build(...)`` still
    works (the factory iterates as that triple). For the graph executor, ``link-params`` is
    accepted and the params stay in the factory (loaded when an executor is created), and the
    memory pools are ignored (they matter to AOT).

    ``module_name`` is accepted as another name for ``mod_name`` (the spelling of the AOT
    RFC's example).

    Raises TargetError (a ValueError) for a target string ember does not understand, TVMError
    for a non-CPU target, an executor that cannot be built yet, or dynamic shapes with the
    graph executor (use the VM), OpNotImplemented for an operator with no lowering.
    """
    from . import _build

    _function_deprecated(ir_mod, "mod")
    if module_name is not None:  # the AOT RFC's spelling of mod_name
        if mod_name not in ("default", None, module_name):
            raise TVMError(f"relay.build: mod_name={mod_name!r} and module_name={module_name!r} "
                           "disagree; pass one of them")
        mod_name = module_name
    return _build.build(ir_mod, target, target_host, executor, runtime, params,
                              mod_name, workspace_memory_pools, constant_memory_pools)


def optimize(mod: Any, target: Any = None, target_host: Any = None,
             params: Mapping[str, Any] | None = None) -> tuple[IRModule, dict[str, NDArray]]:
    """The optimised, fused module that ``build`` would lower, and the params bound into it.

    Returns ``(mod, params)``.
    """
    from . import _build

    _function_deprecated(mod, "func")
    return _build.optimize(mod, target, target_host, params)
