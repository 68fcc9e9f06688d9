"""Well-formedness of Relay programs: every variable bound once and used only in its scope.

The pass manager checks it after each pass under ``EMBER_VERIFY=1``; ``relay.analysis``
exposes it as ``well_formed`` / ``check_well_formed``. The walk is iterative.
"""
from __future__ import annotations

from typing import Any

from ..runtime.errors import DiagnosticError
from .adt import Clause, Match, pattern_vars
from .expr import Function, GlobalVar, Let, RelayExpr, Var
from .module import IRModule
from .visitor import children

_VISIT, _BIND, _UNBIND, _DEFINE, _UNDEFINE = range(5)


class _WellFormed:
    """Scope checker: every variable is bound once, used only inside its scope, a non-function
    let value does not refer to its own variable, and (in a global function) none is free."""

    def __init__(self, where: str, allow_free: bool, mod: IRModule | None) -> None:
        self.where, self.allow_free = where, allow_free
        self.globals = None if mod is None else {gv.name_hint for gv in mod.functions}
        self.in_scope: set[Var] = set()
        self.ever_bound: set[Var] = set()
        self.used_free: set[Var] = set()
        self.defining: set[Var] = set()
        self.done: set[int] = set()  # composite nodes already checked (shared subexpressions)

    def error(self, node: RelayExpr, what: str) -> DiagnosticError:
        span = getattr(node, "span", None)
        prefix = f"{span}: " if span is not None else ""
        return DiagnosticError(f"{prefix}{what}{self.where}")

    def run(self, expr: RelayExpr) -> None:
        stack: list[tuple[int, Any]] = [(_VISIT, expr)]
        while stack:
            action, x = stack.pop()
            if action == _VISIT:
                self.visit(x, stack)
            elif action == _BIND:
                self.bind(x)
            elif action == _UNBIND:
                self.in_scope.difference_update(x)
            elif action == _DEFINE:
                self.defining.add(x)
            else:
                self.defining.discard(x)

    def bind(self, v: Var) -> None:
        if v in self.ever_bound:
            raise self.error(v, f"%{v.name_hint} is bound twice")
        if v in self.used_free:
            raise self.error(v, f"%{v.name_hint} is used outside its scope")
        self.ever_bound.add(v)
        self.in_scope.add(v)

    def use(self, v: Var) -> None:
        if v in self.defining:
            raise self.error(v, f"%{v.name_hint} is used in its own definition (only a "
                                "function bound by a let may refer to itself)")
        if v in self.in_scope:
            return
        if v in self.ever_bound:
            raise self.error(v, f"%{v.name_hint} is used outside its scope")
        if not self.allow_free:
            raise self.error(v, f"free variable %{v.name_hint}")
        self.used_free.add(v)

    def visit(self, e: Any, stack: list[tuple[int, Any]]) -> None:
        if isinstance(e, Var):
            return self.use(e)
        if id(e) in self.done:
            return None
        self.done.add(id(e))
        if isinstance(e, GlobalVar) and self.globals is not None \
                and e.name_hint not in self.globals:
            raise self.error(e, f"undefined global function @{e.name_hint}")
        stack.extend(reversed(self.plan(e)))
        return None

    def plan(self, e: RelayExpr) -> list[tuple[int, Any]]:
        """The actions that check ``e``, in execution order."""
        if isinstance(e, Function):
            return [*((_BIND, p) for p in e.params), (_VISIT, e.body), (_UNBIND, e.params)]
        if isinstance(e, Let):
            return self.plan_let(e)
        if isinstance(e, Match):
            return [(_VISIT, e.data), *(a for c in e.clauses for a in self.plan_clause(c))]
        return [(_VISIT, c) for c in children(e)]

    def plan_let(self, e: RelayExpr) -> list[tuple[int, Any]]:
        # Iterative over the chain; the let vars stay in scope until the chain's end.
        todo: list[tuple[int, Any]] = []
        bound: list[Var] = []
        while isinstance(e, Let) and (not bound or id(e) not in self.done):
            self.done.add(id(e))
            bound.append(e.var)
            todo.append((_BIND, e.var))
            if isinstance(e.value, Function):  # a recursive function may call itself
                todo.append((_VISIT, e.value))
            else:
                todo += [(_DEFINE, e.var), (_VISIT, e.value), (_UNDEFINE, e.var)]
            e = e.body
        return todo + [(_VISIT, e), (_UNBIND, bound)]

    def plan_clause(self, c: Clause) -> list[tuple[int, Any]]:
        bound = pattern_vars(c.lhs)
        return [*((_BIND, v) for v in bound), (_VISIT, c.rhs), (_UNBIND, bound)]


def check_well_formed(node: RelayExpr | IRModule, mod: IRModule | None = None) -> None:
    """Raise DiagnosticError naming the first scoping problem in ``node``.

    Problems: a variable bound twice, used outside its scope, used in its own (non-function)
    let value, a free variable in a global function of a module, or a call to a global
    function the module does not define. A bare expression may have free variables.
    """
    if isinstance(node, IRModule):
        for gv, func in sorted(node.relay_part().functions.items(),
                               key=lambda kv: kv[0].name_hint):
            _WellFormed(f" in @{gv.name_hint}", False, node).run(func)
        return
    if not isinstance(node, RelayExpr):
        raise TypeError(f"relay.analysis.check_well_formed: expected a Relay expression, "
                        f"got {type(node).__name__}")
    _WellFormed("", True, mod).run(node)


def well_formed(node: RelayExpr | IRModule, mod: IRModule | None = None) -> bool:
    """True if ``check_well_formed`` finds no problem."""
    try:
        check_well_formed(node, mod)
    except DiagnosticError:
        return False
    return True
