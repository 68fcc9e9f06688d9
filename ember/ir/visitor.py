"""Walking and rewriting expressions.

``ExprFunctor`` dispatches on the node's class through a table built once per class.
``ExprVisitor`` and ``ExprMutator`` memoize on node identity (a shared subexpression is
visited once) and walk ``let`` chains iteratively so long chains cannot hit the recursion
limit. A mutator returns the very same node when nothing below it changed.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Iterator, TypeVar, cast

from .adt import (Clause, Constructor, Match, Pattern, PatternConstructor, PatternTuple,
                  PatternVar, PatternWildcard, pattern_vars)
from .expr import (Call, Constant, Function, GlobalVar, If, Let, RefCreate, RefRead, RefWrite,
                   RelayExpr, Tuple, TupleGetItem, Var)
from .op import Op

_CHILDREN: dict[type, Callable[[Any], tuple[RelayExpr, ...]]] = {
    Var: lambda e: (), GlobalVar: lambda e: (), Constant: lambda e: (), Op: lambda e: (),
    Constructor: lambda e: (),
    Tuple: lambda e: e.fields,
    Call: lambda e: (e.op, *e.args),
    Let: lambda e: (e.var, e.value, e.body),
    If: lambda e: (e.cond, e.true_branch, e.false_branch),
    TupleGetItem: lambda e: (e.tuple_value,),
    Function: lambda e: (*e.params, e.body),
    Match: lambda e: (e.data, *(c.rhs for c in e.clauses)),
    RefCreate: lambda e: (e.value,), RefRead: lambda e: (e.ref,),
    RefWrite: lambda e: (e.ref, e.value),
}


def children(expr: RelayExpr) -> tuple[RelayExpr, ...]:
    """The direct sub-expressions of ``expr`` (pattern-bound vars are not included)."""
    return _CHILDREN[type(expr)](expr)


def post_order(expr: RelayExpr, skip: Callable[[RelayExpr], bool] | None = None,
               on_enter: Callable[[RelayExpr], None] | None = None, *,
               kids: Callable[[RelayExpr], tuple[RelayExpr, ...]] = children,
               done: Iterable[int] = ()) -> Iterator[RelayExpr]:
    """Every node reachable from ``expr``, children before parents, each once. Iterative.

    The passes and backends walk with variations of their own, all served here: ``skip(node)``
    yields a node without its insides (e.g. Primitive functions); ``on_enter(node)`` runs when
    a node is first reached, before its children; ``kids`` replaces ``children`` (another
    order, or fewer edges); ``done`` holds ids of nodes already handled, which are left out.
    """
    seen: set[int] = set(done)
    stack: list[tuple[RelayExpr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded or (skip is not None and skip(node)):
            seen.add(id(node))
            yield node
            continue
        if on_enter is not None:
            on_enter(node)
        stack.append((node, True))
        for c in reversed(kids(node)):
            if id(c) not in seen:
                stack.append((c, False))


class ExprFunctor:
    """Dispatch ``visit(expr)`` to ``visit_<ClassName>`` through a per-class table."""

    _table_cache: dict[type, dict[type, Callable[..., Any]]] = {}

    def _method(self, expr: Any) -> Callable[..., Any]:
        cls = type(self)
        table = ExprFunctor._table_cache.get(cls)
        if table is None:
            table = ExprFunctor._table_cache[cls] = {}
        fn = table.get(type(expr))
        if fn is None:
            for klass in type(expr).__mro__:
                fn = getattr(cls, f"visit_{klass.__name__}", None)
                if fn is not None:
                    break
            if fn is None:
                raise TypeError(f"{cls.__name__}: cannot visit a {type(expr).__name__}")
            table[type(expr)] = fn
        return fn

    def visit(self, expr: Any) -> Any:
        return self._method(expr)(self, expr)


class ExprVisitor(ExprFunctor):
    """Visit every node once (memoized by identity). Override ``visit_<Class>``."""

    def __init__(self) -> None:
        self._visited: set[int] = set()

    def visit(self, expr: Any) -> None:
        if id(expr) in self._visited:
            return
        self._visited.add(id(expr))
        self._method(expr)(self, expr)

    def visit_leaf(self, expr: RelayExpr) -> None:
        pass

    visit_Var = visit_GlobalVar = visit_Constant = visit_Op = visit_Constructor = visit_leaf

    def visit_Tuple(self, e: Tuple) -> None:
        for f in e.fields:
            self.visit(f)

    def visit_Call(self, e: Call) -> None:
        self.visit(e.op)
        for a in e.args:
            self.visit(a)

    def visit_Let(self, e: Let) -> None:
        # Walk the chain iteratively: deep let-nests are common after ANF.
        while True:
            self.visit(e.var)
            self.visit(e.value)
            if not isinstance(e.body, Let) or id(e.body) in self._visited:
                break
            self._visited.add(id(e.body))
            e = e.body
        self.visit(e.body)

    def visit_If(self, e: If) -> None:
        self.visit(e.cond)
        self.visit(e.true_branch)
        self.visit(e.false_branch)

    def visit_TupleGetItem(self, e: TupleGetItem) -> None:
        self.visit(e.tuple_value)

    def visit_Function(self, e: Function) -> None:
        for p in e.params:
            self.visit(p)
        self.visit(e.body)

    def visit_Match(self, e: Match) -> None:
        self.visit(e.data)
        for c in e.clauses:
            self.visit_pattern(c.lhs)
            self.visit(c.rhs)

    def visit_pattern(self, p: Pattern) -> None:
        for v in pattern_vars(p):
            self.visit(v)

    def visit_RefCreate(self, e: RefCreate) -> None:
        self.visit(e.value)

    def visit_RefRead(self, e: RefRead) -> None:
        self.visit(e.ref)

    def visit_RefWrite(self, e: RefWrite) -> None:
        self.visit(e.ref)
        self.visit(e.value)


_N = TypeVar("_N")


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _rebuild(e: _N, **changes: Any) -> _N:
    """A copy of ``e`` with ``changes``, keeping its span but dropping its (stale) type."""
    new: _N = dataclasses.replace(cast(Any, e), checked_type_=None, **changes)
    return new


class ExprMutator(ExprFunctor):
    """Rebuild an expression bottom-up; unchanged subtrees are returned as the same object."""

    def __init__(self) -> None:
        self.memo: dict[int, Any] = {}
        self._keep: list[Any] = []  # keep visited nodes alive so ids stay unique

    def visit(self, expr: Any) -> Any:
        key = id(expr)
        if key in self.memo:
            return self.memo[key]
        out = self._method(expr)(self, expr)
        self.memo[key] = out
        self._keep.append(expr)
        return out

    def visit_leaf(self, e: RelayExpr) -> RelayExpr:
        return e

    visit_Var = visit_GlobalVar = visit_Constant = visit_Op = visit_Constructor = visit_leaf

    def visit_Tuple(self, e: Tuple) -> RelayExpr:
        fields = tuple(self.visit(f) for f in e.fields)
        return e if _same(fields, e.fields) else _rebuild(e, fields=fields)

    def visit_Call(self, e: Call) -> RelayExpr:
        op = self.visit(e.op)
        args = tuple(self.visit(a) for a in e.args)
        if op is e.op and _same(args, e.args):
            return e
        return _rebuild(e, op=op, args=args)

    def visit_Let(self, e: Let) -> RelayExpr:
        # Iterative over the chain: visit bindings top-down, rebuild bottom-up.
        chain: list[tuple[Let, Any, Any]] = []
        node: RelayExpr = e
        while isinstance(node, Let) and id(node) not in self.memo:
            chain.append((node, self.visit(node.var), self.visit(node.value)))
            node = node.body
        body: RelayExpr = self.visit(node)
        for let, v, val in reversed(chain):
            if v is let.var and val is let.value and body is let.body:
                new = let
            else:
                new = _rebuild(let, var=v, value=val, body=body)
            self.memo[id(let)] = new
            self._keep.append(let)
            body = new
        return body

    def visit_If(self, e: If) -> RelayExpr:
        c, t, f = self.visit(e.cond), self.visit(e.true_branch), self.visit(e.false_branch)
        if c is e.cond and t is e.true_branch and f is e.false_branch:
            return e
        return _rebuild(e, cond=c, true_branch=t, false_branch=f)

    def visit_TupleGetItem(self, e: TupleGetItem) -> RelayExpr:
        t = self.visit(e.tuple_value)
        return e if t is e.tuple_value else _rebuild(e, tuple_value=t)

    def visit_Function(self, e: Function) -> RelayExpr:
        params = tuple(self.visit(p) for p in e.params)
        body = self.visit(e.body)
        if _same(params, e.params) and body is e.body:
            return e
        return _rebuild(e, params=params, body=body)

    def visit_Match(self, e: Match) -> RelayExpr:
        data = self.visit(e.data)
        clauses = tuple(self.visit_clause(c) for c in e.clauses)
        if data is e.data and _same(clauses, e.clauses):
            return e
        return _rebuild(e, data=data, clauses=clauses)

    def visit_clause(self, c: Clause) -> Clause:
        lhs = self.visit_pattern(c.lhs)
        rhs = self.visit(c.rhs)
        return c if lhs is c.lhs and rhs is c.rhs else Clause(lhs, rhs)

    def visit_pattern(self, p: Pattern) -> Pattern:
        if isinstance(p, PatternVar):
            v = self.visit(p.var)
            return p if v is p.var else PatternVar(v)
        if isinstance(p, PatternConstructor):
            subs = tuple(self.visit_pattern(s) for s in p.patterns)
            return p if _same(subs, p.patterns) else PatternConstructor(p.constructor, subs)
        if isinstance(p, PatternTuple):
            subs = tuple(self.visit_pattern(s) for s in p.patterns)
            return p if _same(subs, p.patterns) else PatternTuple(subs)
        return p

    def visit_RefCreate(self, e: RefCreate) -> RelayExpr:
        v = self.visit(e.value)
        return e if v is e.value else _rebuild(e, value=v)

    def visit_RefRead(self, e: RefRead) -> RelayExpr:
        r = self.visit(e.ref)
        return e if r is e.ref else _rebuild(e, ref=r)

    def visit_RefWrite(self, e: RefWrite) -> RelayExpr:
        r, v = self.visit(e.ref), self.visit(e.value)
        return e if r is e.ref and v is e.value else _rebuild(e, ref=r, value=v)


# -- analyses ---------------------------------------------------------------------------------
def _binders(e: RelayExpr) -> list[Var]:
    if isinstance(e, Function):
        return list(e.params)
    if isinstance(e, Let):
        return [e.var]
    if isinstance(e, Match):
        return [v for c in e.clauses for v in pattern_vars(c.lhs)]
    return []


def bound_vars(expr: RelayExpr) -> list[Var]:
    """Variables bound inside ``expr`` (parameters, lets, pattern variables), in order."""
    out: list[Var] = []
    seen: set[int] = set()
    for e in post_order(expr):
        for v in _binders(e):
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def free_vars(expr: RelayExpr) -> list[Var]:
    """Variables used in ``expr`` but not bound in it, in order of first use."""
    bound = {id(v) for v in bound_vars(expr)}
    out: list[Var] = []
    seen: set[int] = set()
    for e in post_order(expr):
        if isinstance(e, Var) and id(e) not in bound and id(e) not in seen:
            seen.add(id(e))
            out.append(e)
    return out


def all_vars(expr: RelayExpr) -> list[Var]:
    return [e for e in post_order(expr) if isinstance(e, Var)]


def global_vars(expr: RelayExpr) -> list[GlobalVar]:
    """GlobalVars referenced in ``expr``, in order of first use."""
    return [e for e in post_order(expr) if isinstance(e, GlobalVar)]


class _Binder(ExprMutator):
    def __init__(self, binds: dict[Var, RelayExpr]) -> None:
        super().__init__()
        self.binds: dict[Any, RelayExpr] = binds  # looked up with any leaf (always a Var)

    def visit_Var(self, e: RelayExpr) -> RelayExpr:
        return self.binds.get(e, e)


def bind(expr: RelayExpr, binds: dict[Var, RelayExpr]) -> RelayExpr:
    """Substitute variables. For a Function, bound parameters are removed from its params."""
    if isinstance(expr, Function):
        body = _Binder(binds).visit(expr.body)
        params = tuple(p for p in expr.params if p not in binds)
        return Function(params, body, expr.ret_type, expr.type_params, expr.attrs, span=expr.span)
    out: RelayExpr = _Binder(binds).visit(expr)
    return out
