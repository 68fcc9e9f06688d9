"""DeadCodeElimination: drop ``let`` bindings nobody uses; optionally inline single-use ones.

Liveness is one walk from the function's result: a let's value is walked only once its
variable has been seen in live code, so a chain of dead lets goes in one pass. A binding is
removed only if its value is *pure*: it writes no reference and calls nothing that might
(operators, constructors, fused functions, and functions whose bodies are pure; a call of an
unknown closure counts as impure). ``ignore_impurity=True`` treats every value as pure.

With ``inline_once=True`` a pure binding used exactly once is substituted at its use, unless
the use sits inside a function literal (that would re-run the value at each call).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir.adt import Constructor
from ...ir.expr import Call, Function, GlobalVar, Let, RefWrite, RelayExpr, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import FunctionPass, PassContext, register_pass
from ...ir.visitor import is_primitive, post_order, walk_children
from ._helpers import PassMutator, infer, map_functions

__all__ = ["DeadCodeElimination", "is_pure"]


class Purity:
    """Memoised purity of expressions and of the module's global functions."""

    def __init__(self, mod: IRModule | None, lets: dict[Var, RelayExpr]) -> None:
        self.mod, self.lets = mod, lets
        self.globals: dict[str, bool] = {}
        self.local: dict[Var, bool] = {}
        self.memo: dict[int, bool] = {}  # id(node) -> pure (function literals: pure)
        self.keep: list[RelayExpr] = []  # the memoised nodes stay alive: ids stay unique

    def callee_pure(self, f: RelayExpr) -> bool:
        if isinstance(f, Op):
            return not f.op_def.extra.get("stateful", False)
        if isinstance(f, Constructor) or is_primitive(f):
            return True
        if isinstance(f, Function):
            return self.pure(f.body)
        if isinstance(f, Var) and isinstance(self.lets.get(f), Function):
            if f not in self.local:
                self.local[f] = True  # a recursive closure: assume pure while looking
                self.local[f] = self.pure(self.lets[f].body)  # type: ignore[attr-defined]
            return self.local[f]
        if isinstance(f, GlobalVar) and self.mod is not None and f.name_hint in self.mod:
            name = f.name_hint
            if name not in self.globals:
                self.globals[name] = True  # recursion: assume pure while looking
                body = self.mod[name]
                self.globals[name] = isinstance(body, Function) and self.pure(body.body)
            return self.globals[name]
        return False

    def pure(self, expr: RelayExpr) -> bool:
        """Whether evaluating ``expr`` has no effect. Memoised per node, so asking about every
        let of a program (whose values nest: ifs in ifs) stays linear."""
        # Function literals are values: defining one has no effect, so do not look inside.
        if isinstance(expr, Function):
            return self.pure(expr.body)
        memo = self.memo
        stack: list[tuple[RelayExpr, bool]] = [(expr, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in memo:
                continue
            kids = () if isinstance(e, Function) else walk_children(e)
            if not ready and kids:
                stack.append((e, True))
                stack.extend((c, False) for c in kids if id(c) not in memo)
                continue
            own = not isinstance(e, RefWrite) and not (isinstance(e, Call)
                                                        and not self.callee_pure(e.op))
            memo[id(e)] = own and all(memo[id(c)] for c in kids)
            self.keep.append(e)
        return memo[id(expr)]


def is_pure(expr: RelayExpr, mod: IRModule | None = None) -> bool:
    """Whether evaluating ``expr`` can have no side effect (see the module docstring)."""
    return Purity(mod, {}).pure(expr)


class _Liveness:
    """Which let variables are live, and how often (and where) each is used."""

    def __init__(self, func: Function, purity: Purity, ignore_impurity: bool,
                 owners: dict[Var, Function]) -> None:
        self.live: set[Var] = set()
        self.uses: dict[Var, int] = {}
        self.nested_use: set[Var] = set()  # used inside a function literal below the let
        self.owners = owners
        self.pending: dict[Var, tuple[RelayExpr, Function]] = {}
        self.stack: list[tuple[RelayExpr, Function]] = []
        seen: set[int] = set()
        self.use(func.body, func)
        while self.stack:
            node, owner = self.stack.pop()
            if id(node) in seen or is_primitive(node):
                continue
            seen.add(id(node))
            if isinstance(node, Let):
                self.use(node.body, owner)
                if node.var in self.live or not (ignore_impurity or purity.pure(node.value)):
                    self.live.add(node.var)
                    self.use(node.value, owner)
                else:  # walked once something live reads the variable
                    self.pending[node.var] = (node.value, owner)
                continue
            inner = node if isinstance(node, Function) else owner
            for c in walk_children(node):
                if not (isinstance(node, Function) and c in node.params):
                    self.use(c, inner)

    def use(self, e: RelayExpr, owner: Function) -> None:
        """An edge from live code to ``e`` (inside function literal ``owner``)."""
        while True:
            self.stack.append((e, owner))
            if not isinstance(e, Var):
                return
            self.uses[e] = self.uses.get(e, 0) + 1
            if owner is not self.owners.get(e, owner):
                self.nested_use.add(e)
            self.live.add(e)
            if e not in self.pending:
                return
            e, owner = self.pending.pop(e)  # its value is live now (maybe a variable too)


class LetEliminator(PassMutator):
    """Drop the lets of the ``dead`` variables, and substitute the values of the ``inline``
    ones at their uses (DeadCodeElimination; ToGraphNormalForm inlines only)."""

    def __init__(self, dead: set[Var], inline: set[Var]) -> None:
        super().__init__()
        self.dead, self.inline = dead, inline

    def visit_var(self, orig: Var) -> RelayExpr:
        if orig in self.inline:
            value = self.let_value(orig)
            return orig if value is None else value
        return orig

    def visit_let(self, orig: Let) -> RelayExpr:
        new: Let = super().visit_let(orig)
        return new.body if orig.var in self.dead or orig.var in self.inline else new


def eliminate(func: Function, mod: IRModule | None, inline_once: bool,
              ignore_impurity: bool) -> Function:
    """``func`` without dead (and, with ``inline_once``, single-use) pure let bindings."""
    lets = {e.var: e.value for e in post_order(func, skip=is_primitive, kids=walk_children)
            if isinstance(e, Let)}
    if not lets:
        return func
    purity = Purity(mod, lets)
    info = _Liveness(func, purity, ignore_impurity, _let_owners(func))
    dead = {v for v in lets if v not in info.live}
    inline: set[Var] = set()
    if inline_once:
        inline = {v for v, value in lets.items() if info.uses.get(v) == 1
                  and v not in info.nested_use and not isinstance(value, Function)
                  and (ignore_impurity or purity.pure(value))}
    if not dead and not inline:
        return func
    return LetEliminator(dead, inline).visit(func)  # type: ignore[no-any-return]


def _let_owners(func: Function) -> dict[Var, Function]:
    """The innermost function literal around each let binding."""
    owners: dict[Var, Function] = {}
    stack: list[tuple[RelayExpr, Function]] = [(func, func)]
    seen: set[int] = set()
    while stack:
        node, owner = stack.pop()
        if id(node) in seen or is_primitive(node):
            continue
        seen.add(id(node))
        inner = node if isinstance(node, Function) else owner
        if isinstance(node, Let):
            owners[node.var] = owner
        stack.extend((c, inner) for c in walk_children(node))
    return owners


@dataclass(frozen=True)
class DeadCodeElimination(FunctionPass):
    """Remove unused pure let bindings; ``inline_once`` also inlines single-use ones."""

    name: ClassVar[str] = "DeadCodeElimination"
    opt_level: ClassVar[int] = 1
    inline_once: bool = False
    ignore_impurity: bool = False

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = map_functions(mod, lambda f: eliminate(f, mod, self.inline_once,
                                                      self.ignore_impurity))
        return infer(out)


register_pass("DeadCodeElimination", DeadCodeElimination)
