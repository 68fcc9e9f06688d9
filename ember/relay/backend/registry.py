"""The executors' compile sides, by name: what ``relay.build`` and ``relay.create_executor``
choose from.

Each backend registers itself when its package is imported (``backend/graph``,
``backend/aot``, ``backend/vm``; ``backend/__init__.py`` imports them):

- a *builder* ``build(mod, target, executor, runtime, params, mod_name) -> factory module``
  for ``relay.build(..., executor=Executor(name))``;
- an *evaluator* class ``cls(mod, device, target)`` with ``evaluate(expr=None)`` for
  ``relay.create_executor(name, ...)`` (the reference interpreter is the ``"debug"`` one).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...runtime.errors import TVMError

Builder = Callable[..., Any]
_BUILDERS: dict[str, Builder] = {}
_EVALUATORS: dict[str, type] = {}


def register_builder(name: str, build: Builder) -> Builder:
    """Make ``build`` the compile side of the ``name`` executor in ``relay.build``."""
    if name in _BUILDERS and _BUILDERS[name] is not build:
        raise ValueError(f"an executor builder named {name!r} is already registered")
    _BUILDERS[name] = build
    return build


def register_evaluator(kind: str, cls: type) -> type:
    """Make ``cls`` the ``kind`` of ``relay.create_executor``."""
    if kind in _EVALUATORS and _EVALUATORS[kind] is not cls:
        raise ValueError(f"an executor kind {kind!r} is already registered")
    _EVALUATORS[kind] = cls
    return cls


def builder_names() -> list[str]:
    """The executors ``relay.build`` can build, in registration order."""
    return list(_BUILDERS)


def evaluator_kinds() -> list[str]:
    """The kinds ``relay.create_executor`` accepts, in registration order."""
    return list(_EVALUATORS)


def get_builder(name: str, where: str = "relay.build") -> Builder:
    """The builder of the ``name`` executor; an unknown name raises naming the known ones."""
    build = _BUILDERS.get(name)
    if build is None:
        raise TVMError(f"{where}: the {name!r} executor cannot be built (available: "
                       f"{', '.join(map(repr, _BUILDERS))})")
    return build


def get_evaluator(kind: str, where: str = "create_executor") -> type:
    """The ``create_executor`` class of ``kind``; an unknown kind raises naming the known."""
    cls = _EVALUATORS.get(kind)
    if cls is None:
        raise TVMError(f"{where}: executor kind {kind!r} is not available; available kinds: "
                       f"{', '.join(map(repr, _EVALUATORS))}")
    return cls
