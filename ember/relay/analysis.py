"""``relay.analysis``: variables of an expression, well-formedness, and small program facts.

All walks are iterative (``ir.post_order`` or an explicit stack), so deep let chains are fine.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable

from ..ir.adt import (Constructor, Match, Pattern, PatternConstructor, PatternVar,
                      pattern_vars)
from ..ir.expr import Call, Function, Let, RelayExpr, Var
from ..ir.module import IRModule
from ..ir.op import Op
from ..ir.types import FuncType, RelayRefType, TupleType, Type, TypeCall, TypeVar
from ..ir.visitor import post_order
from ..ir.well_formed import check_well_formed, well_formed

__all__ = ["free_vars", "bound_vars", "all_vars", "free_type_vars", "bound_type_vars",
           "all_type_vars", "well_formed", "check_well_formed", "post_order_visit",
           "list_op_freqs", "source_nodes"]


def _require_expr(fname: str, expr: Any) -> None:
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"relay.analysis.{fname}: expected a Relay expression, "
                        f"got {type(expr).__name__}")


# -- variables --------------------------------------------------------------------------------
def _binders(e: RelayExpr) -> Iterable[Var]:
    if isinstance(e, Function):
        return e.params
    if isinstance(e, Let):
        return (e.var,)
    if isinstance(e, Match):
        return [v for c in e.clauses for v in pattern_vars(c.lhs)]
    return ()


def _var_sets(expr: RelayExpr) -> tuple[dict[Var, None], set[Var]]:
    """(all vars in order of first occurrence, the bound ones). Binders come before their
    scope in ``post_order`` (params before the body, a let var before its value)."""
    every: dict[Var, None] = {}
    bound: set[Var] = set()
    for e in post_order(expr):
        if isinstance(e, Var):
            every.setdefault(e)
        for v in _binders(e):
            every.setdefault(v)  # pattern vars are not children: they first appear here
            bound.add(v)
    return every, bound


def free_vars(expr: RelayExpr) -> list[Var]:
    """Variables used in ``expr`` but bound nowhere inside it, in order of first occurrence."""
    _require_expr("free_vars", expr)
    every, bound = _var_sets(expr)
    return [v for v in every if v not in bound]


def bound_vars(expr: RelayExpr) -> list[Var]:
    """Variables bound inside ``expr`` (function params, let vars, pattern vars)."""
    _require_expr("bound_vars", expr)
    every, bound = _var_sets(expr)
    return [v for v in every if v in bound]


def all_vars(expr: RelayExpr) -> list[Var]:
    """Every variable in ``expr``, free or bound."""
    _require_expr("all_vars", expr)
    return list(_var_sets(expr)[0])


# -- type variables ---------------------------------------------------------------------------
class _TypeVarCollector:
    """Type variables met in types and expressions; those bound by a polymorphic function,
    a FuncType or a type definition (reached through a constructor) are marked bound."""

    def __init__(self, mod: IRModule | None) -> None:
        self.mod = mod
        self.every: dict[TypeVar, None] = {}
        self.bound: dict[TypeVar, None] = {}

    def bind(self, tvs: Iterable[TypeVar]) -> None:
        for tv in tvs:
            self.every.setdefault(tv)
            self.bound.setdefault(tv)

    def visit_type(self, ty: Type | None) -> None:
        stack: list[Any] = [ty]
        while stack:
            t = stack.pop()
            if isinstance(t, TypeVar):
                self.every.setdefault(t)
            elif isinstance(t, FuncType):
                self.bind(t.type_params)
                stack.extend(reversed((*t.arg_types, t.ret_type)))
            elif isinstance(t, Type):
                stack.extend(reversed(_type_children(t)))

    def visit_constructor(self, c: Constructor) -> None:
        # A constructor's type vars are bound by its type definition.
        td = None
        if self.mod is not None and c.belong_to is not None:
            td = self.mod.type_definitions.get(c.belong_to)
        inner = _TypeVarCollector(None)
        for ty in c.inputs:
            inner.visit_type(ty)
        self.bind(td.type_vars if td is not None else ())
        self.bind(inner.every)

    def visit_expr(self, expr: RelayExpr) -> None:
        for e in post_order(expr):
            if isinstance(e, Function):
                self.bind(e.type_params)
                self.visit_type(e.ret_type)
            elif isinstance(e, Var):
                self.visit_type(e.type_annotation)
            elif isinstance(e, Call):
                for ty in e.type_args:
                    self.visit_type(ty)
            elif isinstance(e, Constructor):
                self.visit_constructor(e)
            elif isinstance(e, Match):
                for c in e.clauses:
                    self.visit_pattern(c.lhs)

    def visit_pattern(self, pat: Pattern) -> None:
        stack = [pat]
        while stack:
            p = stack.pop()
            if isinstance(p, PatternVar):
                self.visit_type(p.var.type_annotation)
            elif isinstance(p, PatternConstructor):
                self.visit_constructor(p.constructor)
            stack.extend(reversed(getattr(p, "patterns", ())))


def _type_children(t: Type) -> tuple[Any, ...]:
    # Tensor types hold no type vars; FuncType is handled by the caller (it binds).
    if isinstance(t, TupleType):
        return t.fields
    if isinstance(t, TypeCall):
        return (t.func, *t.args)
    if isinstance(t, RelayRefType):
        return (t.value,)
    return ()


def _collect_type_vars(node: RelayExpr | Type, mod: IRModule | None) -> _TypeVarCollector:
    col = _TypeVarCollector(mod)
    if isinstance(node, Type):
        col.visit_type(node)
    elif isinstance(node, RelayExpr):
        col.visit_expr(node)
    else:
        raise TypeError(f"relay.analysis: expected a Relay expression or type, "
                        f"got {type(node).__name__}")
    return col


def free_type_vars(expr: RelayExpr | Type, mod: IRModule | None = None) -> list[TypeVar]:
    """Type variables used in ``expr`` (or a type) but not bound inside it."""
    col = _collect_type_vars(expr, mod)
    return [tv for tv in col.every if tv not in col.bound]


def bound_type_vars(expr: RelayExpr | Type, mod: IRModule | None = None) -> list[TypeVar]:
    """Type variables bound inside ``expr``: type params of functions and function types."""
    return list(_collect_type_vars(expr, mod).bound)


def all_type_vars(expr: RelayExpr | Type, mod: IRModule | None = None) -> list[TypeVar]:
    """Every type variable in ``expr``, free or bound."""
    return list(_collect_type_vars(expr, mod).every)


# -- misc -------------------------------------------------------------------------------------
def post_order_visit(expr: RelayExpr, fvisit: Callable[[RelayExpr], Any]) -> None:
    """Call ``fvisit`` on every node of ``expr``, children first, each node once."""
    _require_expr("post_order_visit", expr)
    for e in post_order(expr):
        fvisit(e)


def list_op_freqs(mod: IRModule | RelayExpr) -> dict[str, int]:
    """How many call sites each primitive operator has in ``mod`` (or an expression)."""
    funcs = mod.functions.values() if isinstance(mod, IRModule) else [mod]
    counts: Counter[str] = Counter()
    seen: set[int] = set()
    for func in funcs:
        for e in post_order(func):
            if isinstance(e, Call) and isinstance(e.op, Op) and id(e) not in seen:
                seen.add(id(e))
                counts[e.op.name] += 1
    return dict(counts)


def source_nodes(expr: RelayExpr) -> list[str]:
    """The source-graph nodes (ONNX node names: spans made by ``ir.node_span``) of the calls in
    ``expr``, each once, in the order the calls run; what a fused kernel covers."""
    _require_expr("source_nodes", expr)
    names: dict[str, None] = {}
    for node in post_order(expr):
        span = node.span if isinstance(node, Call) else None
        if span is not None:
            names.update(dict.fromkeys(span.node_names))
    return list(names)
