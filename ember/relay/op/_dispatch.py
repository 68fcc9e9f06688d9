"""Relay's builders take a shape, a count or bounds either as numbers or as an expression:
``relay.reshape(x, (2, 3))`` is the static op, ``relay.reshape(x, relay.shape_of(y))`` its
dynamic form (``dyn.reshape``, ``op/dyn``). A constant counts as numbers."""
from __future__ import annotations

from typing import Any

from ...ir.expr import Constant, RelayExpr


def run_time(*values: Any) -> bool:
    """True when any of ``values`` is an expression other than a constant."""
    return any(isinstance(v, RelayExpr) and not isinstance(v, Constant) for v in values)


def numbers(value: Any) -> Any:
    """A constant's value as a list (a scalar as a number); anything else as it is."""
    if isinstance(value, Constant):
        return value.data.numpy().tolist()
    return value


def dyn_op(name: str) -> Any:
    """The builder of ``dyn.<name>`` (``"nn.pad"``: ``dyn.nn.pad``), imported on first use:
    ``op/dyn`` builds on the static ops' modules, which call this."""
    from . import dyn

    out: Any = dyn
    for part in name.split("."):
        out = getattr(out, part)
    return out
