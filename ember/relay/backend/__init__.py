"""ember.relay.backend: turning Relay into something that runs.

Today: the reference interpreter (``interpreter``). Graph / AOT / VM code generation and the
executor factory modules join it here. Submodules load on first attribute access.
"""
from __future__ import annotations

import importlib
from typing import Any

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
