"""ToGraphNormalForm: the inverse of ToANormalForm, a dataflow graph without ``let``.

Every use of a let variable is replaced by the (shared) value node, and the let goes. Kept
as lets: recursive bindings (a function that calls itself through its variable) and values
that are not pure (reference writes, unknown calls), whose place in the evaluation order
matters. An unused pure binding simply disappears.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir.expr import Function, Let, RelayExpr
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.visitor import free_vars, is_primitive, post_order, walk_children
from ._helpers import infer, map_functions
from .dead_code import LetEliminator, Purity

__all__ = ["ToGraphNormalForm", "to_graph_normal_form"]


def to_graph_normal_form(expr: RelayExpr, mod: IRModule | None = None) -> RelayExpr:
    """``expr`` with its pure, non-recursive let bindings inlined."""
    lets = {e.var: e.value for e in post_order(expr, skip=is_primitive, kids=walk_children)
            if isinstance(e, Let)}
    if not lets:
        return expr
    purity = Purity(mod, lets)
    inline = {v for v, value in lets.items() if purity.pure(value)
              and not (isinstance(value, Function) and v in free_vars(value))}
    return LetEliminator(set(), inline).visit(expr) if inline else expr


@dataclass(frozen=True)
class ToGraphNormalForm(ModulePass):
    """Turn let-bound programs into dataflow graphs (see the module docstring)."""

    name: ClassVar[str] = "ToGraphNormalForm"
    opt_level: ClassVar[int] = 1

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return infer(map_functions(mod, lambda f: to_graph_normal_form(f, mod)))  # type: ignore


register_pass("ToGraphNormalForm", ToGraphNormalForm)
