"""ember.contrib: the compiler driver (``cc``), temporary directories (``utils``) and other
helpers, as in ``tvm.contrib``.

Submodules load on first use (``ember.contrib.cc`` works after ``import ember``), so that
importing the runtime never loads them.
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
