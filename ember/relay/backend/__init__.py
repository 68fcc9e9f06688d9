"""ember.relay.backend: turning Relay into something that runs.

Each executor's compile side is a folder here, registered by name in ``registry`` when this
package is imported: ``graph`` (graph JSON), ``aot`` (C ``run_model``), ``vm`` (bytecode).
Shared by them: ``pipeline`` (optimize, build stages), ``te_compiler`` (primitive functions
to C), ``memory_plan``; the reference interpreter is ``interpreter`` (the ``"debug"`` kind of
``create_executor``); ``executor_factory`` names the factory modules ``relay.build`` returns.
Other submodules load on first attribute access.
"""
from __future__ import annotations

import importlib
from typing import Any

from . import aot, graph, interpreter, vm  # noqa: F401  (each registers its executor)

# name -> submodule defining it (relay.backend.Executor, relay.backend.Runtime).
_ATTRS = {"Executor": "executor", "Runtime": "runtime"}


def __getattr__(name: str) -> Any:
    if name in _ATTRS:
        return getattr(importlib.import_module(f"{__name__}.{_ATTRS[name]}"), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"{__name__}.{name}":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        raise
