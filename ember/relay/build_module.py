"""The driver: ``create_executor`` (and, with the code generators, ``build``).

``relay.create_executor(kind, mod, device, target, params)`` gives an executor whose
``evaluate(expr=None, binds=None)`` returns a Python callable (or, for a plain expression,
its value). Kinds are registered in ``EXECUTOR_KINDS``; today that is ``"debug"``, the
reference interpreter.
"""
from __future__ import annotations

import importlib
from typing import Any, Mapping

import numpy as np

from ..ir.expr import Constant, Function, Var, bind
from ..ir.module import IRModule
from ..runtime.device import Device, device as _device
from ..runtime.errors import TVMError
from ..runtime.ndarray import NDArray, array as _nd_array

# kind -> (module, class); each class takes (mod, device, target).
EXECUTOR_KINDS: dict[str, tuple[str, str]] = {
    "debug": ("ember.relay.backend.interpreter", "Interpreter"),
}
_HOST_TARGETS = ("llvm", "c")


def bind_params_by_name(func: Function, params: Mapping[str, Any]) -> Function:
    """Replace the parameters of ``func`` named in ``params`` by constants.

    Names that are not parameters of ``func`` are ignored (a params dict may hold more
    weights than one function uses); a name shared by several parameters is an error.
    """
    by_name: dict[str, list[Var]] = {}
    for p in func.params:
        by_name.setdefault(p.name_hint, []).append(p)
    binds: dict[Var, Any] = {}
    for name, value in params.items():
        found = by_name.get(name, [])
        if len(found) > 1:
            raise TVMError(f"bind_params_by_name: {len(found)} parameters are named {name!r}; "
                           "cannot tell which one to bind")
        if found:
            arr = value if isinstance(value, NDArray) else _nd_array(np.asarray(value))
            binds[found[0]] = Constant(arr)
    return bind(func, binds) if binds else func  # type: ignore[return-value]


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
    entry = EXECUTOR_KINDS.get(kind)
    if entry is None:
        kinds = ", ".join(repr(k) for k in EXECUTOR_KINDS)
        raise TVMError(f"create_executor: executor kind {kind!r} is not available; "
                       f"available kinds: {kinds}")
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
    module_name, class_name = entry
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(mod, dev, target)
