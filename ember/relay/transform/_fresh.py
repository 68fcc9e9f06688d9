"""Copies of expressions whose bound variables are new Var objects.

Relay binds each variable once per program (``well_formed``), so a pass that pastes a
function's body into several places (Inline, PartialEvaluate, Defunctionalization) pastes a
*fresh copy* each time: every parameter, let variable and pattern variable bound inside is
replaced by a new Var with the same name and annotation; free variables stay.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...ir.expr import RelayExpr, Var
from ...ir.visitor import ExprMutator, bound_vars


class _Freshen(ExprMutator):
    def __init__(self, renames: dict[Var, RelayExpr]) -> None:
        super().__init__()
        self.renames = renames

    def visit_var(self, var: Var) -> RelayExpr:
        return self.renames.get(var, var)


def fresh_copy(expr: RelayExpr, subst: Mapping[Var, RelayExpr] | None = None,
               keep: Callable[[Any], bool] | None = None) -> RelayExpr:
    """``expr`` with its bound variables renamed apart and its free variables in ``subst``
    replaced (a substituted expression is shared, not copied). A new variable keeps its
    annotation if ``keep(annotation)`` (default: always)."""
    renames: dict[Var, RelayExpr] = dict(subst or {})
    for v in bound_vars(expr):
        ty = v.type_annotation if keep is None or keep(v.type_annotation) else None
        renames[v] = Var(v.name_hint, ty, span=v.span)
    out: RelayExpr = _Freshen(renames).visit(expr)
    return out
