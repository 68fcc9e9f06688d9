"""ember's one-line API: ``ember.compile(model)`` -> a runnable model; ``ember.load(path)``.

``compile`` (``compiler.py``) takes an ONNX model, an IRModule or Relay text through the
frontends and the build; ``CompiledModel``, ``load`` and the saved record (``model.py``) need
only the runtime, so loading a saved model loads none of the compiler. Names resolve lazily.
"""
from __future__ import annotations

import importlib
from typing import Any

_NAMES = {"compile": "compiler", "choose_executor": "compiler", "CompiledModel": "model",
          "TensorSpec": "model", "ModelInputError": "model", "load": "model"}


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMES))
