"""Per-op rules that passes read and users override, kept in ``OpDef.extra`` with a level.

``register_gradient`` and ``register_mixed_precision_conversion`` store their functions here,
under TVM's attribute names. A rule carries a priority ``level``: the defaults are
registered at level 10, and a user overrides one by registering at a higher level; the same
level again is an error (two rules would compete), a lower one is ignored.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.op import Op


def register_rule(api: str, op_name: str, key: str, func: Callable[..., Any] | None,
                  level: int, shape: str) -> Any:
    """Register ``func`` under ``key`` for ``op_name`` (a decorator when ``func`` is None);
    ``api`` and ``shape`` (what a rule looks like) name the caller in errors."""
    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            raise TypeError(f"{api}({op_name!r}): expected a function {shape}, got {f!r}")
        extra = Op.get(op_name).op_def.extra
        old = extra.get(key)
        if old is not None and old[1] == level:
            raise ValueError(f"{api}: {op_name} already has a rule at level {level}; "
                             "register with a higher level to override it")
        if old is None or level > old[1]:
            extra[key] = (f, level)
        return f

    return register if func is None else register(func)


def get_rule(op_name: str, key: str) -> Callable[..., Any] | None:
    """The rule registered under ``key`` for ``op_name``, or None."""
    entry = Op.get(op_name).op_def.extra.get(key)
    return None if entry is None else entry[0]
