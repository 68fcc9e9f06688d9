"""Walking and rewriting Relay expressions: the one traversal framework of ember.

- ``post_order(expr)`` yields every node children first, each once, from a loop over an
  explicit stack; the passes and backends that keep state of their own walk with it.
- ``ExprVisitor`` and ``ExprMutator`` (TVM's names and methods: ``visit_call``,
  ``visit_let``, ...) dispatch on the node's class through a table built once per subclass
  and memoise on node identity in ``memo_map``. ``visit(expr)`` first visits everything
  below ``expr`` in post order, iteratively, and only then calls ``visit_<kind>(expr)``: a
  method that calls ``self.visit(child)`` gets the child's memoised result at once, so a
  10,000-long chain of calls or lets never nests Python calls.
- A mutator rebuilds a node only when a child changed and otherwise returns the very same
  object, so "nothing changed" reads as ``new is old``.

Because children come first, a visit method cannot change how its children are visited
(state set in ``visit_let`` is not seen by the let's body); collect such facts in a walk of
their own before mutating. ``skip(expr)`` leaves a node and everything inside it alone.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

from .adt import (
    Clause,
    Constructor,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    pattern_vars,
)
from .expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
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
    """The direct sub-expressions of ``expr`` (pattern-bound vars are not included).

    A let's variable comes before its value and a function's parameters before its body, so
    in ``post_order`` a binder is met before its uses."""
    fn = _CHILDREN.get(type(expr))
    if fn is None:
        fn = _children_fn(type(expr))
    return fn(expr)


def _children_fn(cls: type) -> Callable[[Any], tuple[RelayExpr, ...]]:
    for klass in cls.__mro__:  # a subclass of a node class walks as its base
        if klass in _CHILDREN:
            _CHILDREN[cls] = _CHILDREN[klass]
            return _CHILDREN[klass]
    raise TypeError(f"cannot walk a {cls.__name__}: it is not a Relay expression")


def walk_children(expr: RelayExpr) -> tuple[RelayExpr, ...]:
    """The children the functors visit before ``expr``, in order: as ``children``, except
    that a let's value comes before its variable (``visit_var`` at the binding can look at
    what the value became, see ``ExprMutator.let_value``), and a match clause's pattern
    variables come before its right-hand side."""
    if isinstance(expr, Let):
        return (expr.value, expr.var, expr.body)
    if isinstance(expr, Match):
        out: list[RelayExpr] = [expr.data]
        for c in expr.clauses:
            out += pattern_vars(c.lhs)
            out.append(c.rhs)
        return tuple(out)
    return children(expr)


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


def is_primitive(expr: Any) -> bool:
    """A fused (``Primitive=1``) function: passes before lowering leave its body alone."""
    return isinstance(expr, Function) and bool(int(expr.get_attr("Primitive", 0) or 0))


# -- the functors ---------------------------------------------------------------------------------
_METHODS: dict[type, str] = {
    Var: "visit_var", GlobalVar: "visit_global_var", Constant: "visit_constant",
    Op: "visit_op", Constructor: "visit_constructor", Tuple: "visit_tuple", Call: "visit_call",
    Let: "visit_let", If: "visit_if", TupleGetItem: "visit_tuple_getitem",
    Function: "visit_function", Match: "visit_match", RefCreate: "visit_ref_create",
    RefRead: "visit_ref_read", RefWrite: "visit_ref_write",
}


class ExprFunctor:
    """Dispatch ``visit(expr)`` to ``visit_<kind>`` (``visit_call``, ``visit_let``, ...)
    through a table built once per class, children first and memoised (module docstring).

    ``memo_map`` maps each visited node to its result.
    """

    _table: ClassVar[dict[type, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._table = {node: getattr(cls, name) for node, name in _METHODS.items()
                      if hasattr(cls, name)}

    def __init__(self) -> None:
        self.memo_map: dict[Any, Any] = {}
        self._lets: dict[Var, Let] = {}

    def skip(self, expr: RelayExpr) -> bool:
        """True to leave ``expr`` and everything inside it alone: a mutator keeps it as it
        is, a visitor does not visit it (e.g. fused functions for the passes)."""
        return False

    def visit(self, expr: Any) -> Any:
        """The (memoised) result of ``visit_<kind>(expr)``; everything below ``expr`` is
        visited first, in post order, without recursion."""
        memo = self.memo_map
        if expr in memo:
            return memo[expr]
        stack: list[tuple[Any, bool]] = [(expr, False)]
        while stack:
            node, ready = stack.pop()
            if node in memo:
                continue
            if ready:
                memo[node] = self._dispatch(node)
            elif self.skip(node):
                memo[node] = self._skipped(node)
            else:
                if type(node) is Let:
                    self._lets[node.var] = node
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(walk_children(node))
                             if c not in memo)
        return memo[expr]

    def _dispatch(self, node: Any) -> Any:
        fn = self._table.get(type(node))
        if fn is None:
            fn = self._lookup(type(node))
        return fn(self, node)

    def _lookup(self, cls: type) -> Callable[..., Any]:
        for klass in cls.__mro__:
            name = _METHODS.get(klass)
            if name is not None and hasattr(type(self), name):
                fn: Callable[..., Any] = getattr(type(self), name)
                self._table[cls] = fn
                return fn
        raise TypeError(f"{type(self).__name__}: cannot visit a {cls.__name__} "
                        f"(no {_METHODS.get(cls, 'visit method')} for it)")

    def _skipped(self, node: Any) -> Any:
        return None

    def visit_pattern(self, pat: Pattern) -> Any:
        """Visit the variables a pattern binds (they were visited with the match)."""
        for v in pattern_vars(pat):
            self.visit(v)
        return pat


class ExprVisitor(ExprFunctor):
    """Visit every node once, children first. Override ``visit_<kind>``; the children of a
    node were visited before its method runs, so ``super().visit_call(call)`` or
    ``self.visit(arg)`` costs a memo lookup."""

    def _visit_children(self, expr: RelayExpr) -> None:
        for c in walk_children(expr):
            self.visit(c)

    def visit_leaf(self, expr: RelayExpr) -> None:
        pass

    visit_var = visit_global_var = visit_constant = visit_op = visit_constructor = visit_leaf
    visit_tuple = visit_call = visit_let = visit_if = visit_tuple_getitem = _visit_children
    visit_function = visit_match = visit_ref_create = visit_ref_read = _visit_children
    visit_ref_write = _visit_children


class ExprMutator(ExprFunctor):
    """Rebuild an expression bottom-up; an unchanged node is returned as the same object.

    Override ``visit_<kind>``: call ``super().visit_call(call)`` for the node rebuilt on its
    visited children (or ``self.visit(arg)`` for one child), then return a replacement.
    A replacement is used wherever the node was (sharing is kept).

    ``keep_types``: a rebuilt node keeps the type of the node it replaces, and so does a
    replacement that has none yet (the passes keep every node's type; fresh nodes inside a
    replacement stay untyped until InferType runs again). Off by default, as in TVM, where a
    rebuilt node has no type.
    """

    keep_types: ClassVar[bool] = False

    def _dispatch(self, node: Any) -> Any:
        out = super()._dispatch(node)
        if self.keep_types and out not in self.memo_map:  # not a node of the input
            out = set_type(out, node.checked_type_)
        return out

    def _skipped(self, node: Any) -> Any:
        return node

    def let_value(self, var: Var) -> RelayExpr | None:
        """What the value of the let binding ``var`` became, once the walk has passed it
        (a let's value is visited before its variable)."""
        let = self._lets.get(var)
        return None if let is None else self.memo_map.get(let.value)

    def rebuild(self, expr: RelayExpr, kids: list[Any]) -> RelayExpr:
        """``expr`` on new children (in ``walk_children`` order); ``expr`` itself if none
        changed. Binding occurrences stay variables when their uses became values."""
        return rebuild(expr, kids, keep_type=self.keep_types)

    def _rebuild_children(self, expr: RelayExpr) -> RelayExpr:
        return self.rebuild(expr, [self.visit(c) for c in walk_children(expr)])

    def visit_leaf(self, expr: RelayExpr) -> RelayExpr:
        return expr

    visit_var = visit_global_var = visit_constant = visit_op = visit_constructor = visit_leaf
    visit_tuple = visit_call = visit_let = visit_if = visit_tuple_getitem = _rebuild_children
    visit_function = visit_match = visit_ref_create = visit_ref_read = _rebuild_children
    visit_ref_write = _rebuild_children

    def visit_pattern(self, pat: Pattern) -> Pattern:
        """``pat`` with its variables replaced by what they were visited to (if Vars)."""
        return _map_pattern(pat, lambda v: _binder(v, self.visit(v)))

    def visit_clause(self, clause: Clause) -> Clause:
        lhs = self.visit_pattern(clause.lhs)
        rhs = self.visit(clause.rhs)
        return clause if lhs is clause.lhs and rhs is clause.rhs else Clause(lhs, rhs)


def set_type(expr: Any, ty: Any) -> Any:
    """``expr`` with the type ``ty`` if it has none: a typed copy, as no node is ever edited.
    Variables, globals, ops and constructors come back as they are (their identity is what
    binds them), and so does a node that has a type already."""
    if ty is None or not isinstance(expr, RelayExpr) or expr.checked_type_ is not None:
        return expr
    if isinstance(expr, (Var, GlobalVar, Op, Constructor)):
        return expr
    return dataclasses.replace(expr, checked_type_=ty)


# -- rebuilding -----------------------------------------------------------------------------------
def _binder(old: Var, new: Any) -> Var:
    # A binding occurrence stays a variable even when its uses were replaced by values.
    return new if isinstance(new, Var) else old


def _match_changes(e: Match, kids: list[Any]) -> dict[str, Any]:
    it = iter(kids[1:])
    clauses = []
    for c in e.clauses:
        new_vars = {id(v): _binder(v, next(it)) for v in pattern_vars(c.lhs)}
        lhs = _map_pattern(c.lhs, lambda v, vs=new_vars: vs[id(v)])
        rhs = next(it)
        clauses.append(c if lhs is c.lhs and rhs is c.rhs else Clause(lhs, rhs))
    return {"data": kids[0], "clauses": tuple(clauses)}


_CHANGES: dict[type, Callable[[Any, list[Any]], dict[str, Any]]] = {
    Tuple: lambda e, k: {"fields": tuple(k)},
    Call: lambda e, k: {"op": k[0], "args": tuple(k[1:])},
    Let: lambda e, k: {"value": k[0], "var": _binder(e.var, k[1]), "body": k[2]},
    If: lambda e, k: {"cond": k[0], "true_branch": k[1], "false_branch": k[2]},
    TupleGetItem: lambda e, k: {"tuple_value": k[0]},
    Function: lambda e, k: {"params": tuple(map(_binder, e.params, k)), "body": k[-1]},
    Match: _match_changes,
    RefCreate: lambda e, k: {"value": k[0]},
    RefRead: lambda e, k: {"ref": k[0]},
    RefWrite: lambda e, k: {"ref": k[0], "value": k[1]},
}


def rebuild(expr: RelayExpr, kids: list[Any], keep_type: bool = True) -> RelayExpr:
    """``expr`` with its children (in ``walk_children`` order) replaced; ``expr`` itself if
    none changed. The span is kept; the type too when ``keep_type``."""
    old = walk_children(expr)
    if len(old) == len(kids) and all(a is b for a, b in zip(old, kids)):
        return expr
    ty = expr.checked_type_ if keep_type else None
    changes = _CHANGES[type(expr)](expr, kids)
    new: RelayExpr = dataclasses.replace(expr, checked_type_=ty, **changes)  # type: ignore
    return new


def typed_copy(expr: RelayExpr, kids: list[Any], ty: Any) -> RelayExpr:
    """A new node like ``expr``, on the children ``kids`` (``walk_children`` order), whose
    type is ``ty``: how InferType gives a module its types without editing its input."""
    change = _CHANGES.get(type(expr))
    changes = change(expr, kids) if change is not None else {}
    names = _PLAIN_FIELDS.get(type(expr))
    if names is None:  # a subclass: its own __init__ runs
        new: RelayExpr = dataclasses.replace(expr, checked_type_=ty, **changes)  # type: ignore
        return new
    # The node classes' __post_init__ only normalise (lists to tuples, arrays to NDArrays,
    # attrs to Attrs): ``expr`` is normalised and so is what ``_CHANGES`` gives, so the copy
    # is made without __init__ (dataclasses.replace is most of InferType's last step).
    out = object.__new__(type(expr))
    for name in names:
        object.__setattr__(out, name, changes[name] if name in changes else getattr(expr, name))
    object.__setattr__(out, "checked_type_", ty)
    return out


_PLAIN_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls) if f.name != "checked_type_")
    for cls in (Var, GlobalVar, Constant, Tuple, Call, Let, If, TupleGetItem, Function, Match,
                RefCreate, RefRead, RefWrite)
}


def _map_pattern(pat: Pattern, fn: Callable[[Var], Var]) -> Pattern:
    """``pat`` with each bound variable ``v`` replaced by ``fn(v)`` (rebuilt only where
    something changed). Iterative: patterns may nest deeply."""
    done: dict[int, Pattern] = {}
    stack: list[tuple[Pattern, bool]] = [(pat, False)]
    while stack:
        p, ready = stack.pop()
        subs = getattr(p, "patterns", ())
        if not ready and subs:
            stack.append((p, True))
            stack.extend((s, False) for s in reversed(subs))
            continue
        if isinstance(p, PatternVar):
            v = fn(p.var)
            done[id(p)] = p if v is p.var else PatternVar(v)
        elif isinstance(p, (PatternConstructor, PatternTuple)):
            new = tuple(done[id(s)] for s in subs)
            if all(a is b for a, b in zip(new, subs)):
                done[id(p)] = p
            elif isinstance(p, PatternTuple):
                done[id(p)] = PatternTuple(new)
            else:
                done[id(p)] = PatternConstructor(p.constructor, new)
        else:
            done[id(p)] = p
    return done[id(pat)]


# -- analyses -------------------------------------------------------------------------------------
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

    def visit_var(self, e: RelayExpr) -> RelayExpr:
        return self.binds.get(e, e)


def bind(expr: RelayExpr, binds: dict[Var, RelayExpr]) -> RelayExpr:
    """Substitute variables. For a Function, bound parameters are removed from its params."""
    if isinstance(expr, Function):
        body = _Binder(binds).visit(expr.body)
        params = tuple(p for p in expr.params if p not in binds)
        return Function(params, body, expr.ret_type, expr.type_params, expr.attrs, span=expr.span)
    out: RelayExpr = _Binder(binds).visit(expr)
    return out
