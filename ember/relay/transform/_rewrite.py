"""The bottom-up rewriter the optimisation passes share, and small helpers around it.

``PostOrderRewriter.rewrite(expr)`` walks ``expr`` children first with an explicit stack (a
10,000-op chain cannot hit the recursion limit, which a recursive ``ExprMutator`` does at
about 500), rebuilds each node from its rewritten children, and hands both the original
node and the rebuilt one to ``rewrite_<Class>(orig, new)``. What that returns replaces the
node everywhere it is used (sharing is kept: each node is rewritten once).

Two details the passes rely on:

- A ``let``'s value is walked before its variable, so a rewrite of a let variable can look
  at its already rewritten value (``self.let_value(var)``): constant lets fold, and graph
  normal form substitutes values for variables in one walk.
- The passes here all keep the type of every node, so a rebuilt node, or a replacement that
  has no type yet, takes the type of the node it replaces. Only nodes that a rewrite builds
  fresh inside its replacement are untyped until the pass re-runs InferType.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from ...ir.adt import Clause, Match
from ...ir.expr import (
    Call,
    Function,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.visitor import children
from ...ir.visitor import post_order as ir_post_order
from .type_infer import InferType


def _kids(e: RelayExpr) -> tuple[RelayExpr, ...]:
    # As ir.visitor.children, but a let's value comes before its variable.
    if isinstance(e, Let):
        return (e.value, e.var, e.body)
    return children(e)


def post_order(expr: RelayExpr, skip: Callable[[RelayExpr], bool] | None = None,
               on_enter: Callable[[RelayExpr], None] | None = None) -> Iterator[RelayExpr]:
    """``ir.visitor.post_order`` in the passes' child order (a let's value before its
    variable): children first, each once; ``skip``ped nodes are yielded without their
    insides; ``on_enter(node)`` runs when a node is first reached, before its children."""
    return ir_post_order(expr, skip, on_enter, kids=_kids)


def _binder(old: Var, new: Any) -> Var:
    # A binding occurrence stays a variable even when its uses were replaced by values.
    return new if isinstance(new, Var) else old


def rebuild(e: RelayExpr, kids: list[Any], keep_type: bool = True) -> RelayExpr:
    """``e`` with its children (in ``_kids`` order) replaced; ``e`` itself if none changed."""
    old = _kids(e)
    if all(a is b for a, b in zip(old, kids)):
        return e
    ty = e.checked_type_ if keep_type else None
    changes: dict[str, Any]
    if isinstance(e, Call):
        changes = {"op": kids[0], "args": tuple(kids[1:])}
    elif isinstance(e, Tuple):
        changes = {"fields": tuple(kids)}
    elif isinstance(e, Let):
        changes = {"value": kids[0], "var": _binder(e.var, kids[1]), "body": kids[2]}
    elif isinstance(e, Function):
        params = tuple(_binder(p, k) for p, k in zip(e.params, kids))
        changes = {"params": params, "body": kids[-1]}
    elif isinstance(e, TupleGetItem):
        changes = {"tuple_value": kids[0]}
    elif isinstance(e, Match):
        clauses = tuple(c if c.rhs is k else Clause(c.lhs, k)
                        for c, k in zip(e.clauses, kids[1:]))
        changes = {"data": kids[0], "clauses": clauses}
    elif isinstance(e, (RefCreate, RefRead, RefWrite)):
        names = {RefCreate: ("value",), RefRead: ("ref",), RefWrite: ("ref", "value")}[type(e)]
        changes = dict(zip(names, kids))
    else:  # If
        changes = {"cond": kids[0], "true_branch": kids[1], "false_branch": kids[2]}
    return dataclasses.replace(e, checked_type_=ty, **changes)  # type: ignore[type-var]


def set_type(expr: RelayExpr, ty: Any) -> RelayExpr:
    """Give ``expr`` the type ``ty`` unless it has one (the cache InferType also fills)."""
    if ty is not None and expr.checked_type_ is None:
        object.__setattr__(expr, "checked_type_", ty)
    return expr


def is_primitive(e: RelayExpr) -> bool:
    """A fused (``Primitive=1``) function: passes before lowering leave its body alone."""
    return isinstance(e, Function) and bool(e.get_attr("Primitive", 0))


class PostOrderRewriter:
    """Rewrite an expression bottom-up; override ``rewrite_<Class>(orig, new)``.

    ``orig`` is the input node (typed when the input was), ``new`` the node rebuilt from the
    rewritten children. Set ``skip_primitive`` to leave fused functions untouched.
    """

    keep_types = True
    skip_primitive = True
    _tables: ClassVar[dict[type, dict[type, Callable[..., RelayExpr] | None]]] = {}

    def __init__(self) -> None:
        self.memo: dict[int, RelayExpr] = {}
        self._let_of: dict[Var, Let] = {}

    def _handler(self, node: RelayExpr) -> Callable[..., RelayExpr] | None:
        table = PostOrderRewriter._tables.setdefault(type(self), {})
        cls = type(node)
        if cls not in table:
            table[cls] = getattr(type(self), f"rewrite_{cls.__name__}", None)
        return table[cls]

    def rewrite(self, expr: RelayExpr) -> RelayExpr:
        skip = is_primitive if self.skip_primitive else None
        for node in post_order(expr, skip, self._enter):
            if skip is not None and skip(node):
                self.memo[id(node)] = node
                continue
            new = rebuild(node, [self.memo[id(c)] for c in _kids(node)], self.keep_types)
            fn = self._handler(node)
            out = new if fn is None else fn(self, node, new)
            if self.keep_types:
                set_type(out, node.checked_type_)
            self.memo[id(node)] = out
        return self.memo[id(expr)]

    def _enter(self, node: RelayExpr) -> None:
        if isinstance(node, Let):
            self._let_of[node.var] = node

    def let_value(self, var: Var) -> RelayExpr | None:
        """The rewritten value bound to ``var`` by a let, once the walk has passed it."""
        let = self._let_of.get(var)
        return None if let is None else self.memo.get(id(let.value))


def infer(mod: IRModule) -> IRModule:
    """Run InferType (passes start with it when they read types, and end with it)."""
    return InferType()(mod)


def map_functions(mod: IRModule, fn: Callable[[Function], Function],
                  skip_primitive: bool = True) -> IRModule:
    """A copy of ``mod`` with ``fn`` applied to each Relay function (fused ones left alone)."""
    out = mod.copy()
    for gv, func in mod.functions.items():
        if not isinstance(func, Function) or (skip_primitive and is_primitive(func)):
            continue
        if func.get_attr("Compiler"):
            continue
        new = fn(func)
        if new is not func:
            out.add(gv, new)
    return out


def rewrite_functions(mod: IRModule, rewrite: Callable[[Function], RelayExpr]) -> IRModule:
    """The body of most rewriting passes: type ``mod``, ``rewrite`` each Relay function
    (fused ones left alone, see ``map_functions``), and type the result."""
    return infer(map_functions(infer(mod), rewrite))  # type: ignore[arg-type]


def op_call(name: str, *args: RelayExpr, **attrs: Any) -> Call:
    """``name(*args, **attrs)`` as a Call of the registered op (attrs built by the op)."""
    op = Op.get(name)
    return Call(op, args, op.make_attrs(**attrs) if attrs else None)


def expand_to_axis(vec: RelayExpr, ndim: int, axis: int) -> RelayExpr:
    """A 1-D ``vec`` running along ``axis`` of an ``ndim``-D tensor, shaped to broadcast
    against it: (C,) -> (C, 1, 1) for axis 1 of 4-D (nothing to do for the last axis)."""
    trailing = ndim - 1 - axis
    return vec if trailing == 0 else op_call("expand_dims", vec, axis=1, num_newaxis=trailing)
