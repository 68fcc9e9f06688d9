"""ToANormalForm: bind every intermediate value to a ``let``, so evaluation order is explicit.

Each non-atomic expression (call, tuple, projection, constant, if, match, reference op,
closure) gets ``let %x = <expr with atomic operands>;``. Atoms are variables, globals,
operators, constructors, and fused (Primitive) functions, which stay in call position as
TVM's VM pipeline expects after InlinePrimitives. The value of an existing let is bound to
that let's own variable.

Where a shared expression is bound: in the innermost *scope* enclosing all its uses. Scopes
are the function body and each function literal's body, if branch and match clause; a value
used in both branches of an ``if`` is bound before the ``if``, one used in one branch only is
bound inside it. Scopes are computed parents-first over the graph (least common ancestor
in the scope tree), then one depth-first walk emits the bindings, children first, each into
its scope's let list; closing a scope wraps its list around the scope's result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir import scope_tree as ir_scopes
from ...ir.adt import Constructor, Match
from ...ir.expr import Function, GlobalVar, If, Let, RelayExpr, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.visitor import is_primitive, post_order, rebuild, walk_children
from ._helpers import infer, map_functions

__all__ = ["ToANormalForm", "ToANormalFormExpr", "to_a_normal_form"]


class Scope(ir_scopes.Scope):
    """A scope of the converted program and the bindings that go at its start."""

    __slots__ = ("lets",)

    def __init__(self, parent: Scope | None = None) -> None:
        super().__init__(parent)
        self.lets: list[tuple[Var, RelayExpr]] = []

    def child(self) -> Scope:
        return Scope(self)

    def wrap(self, result: RelayExpr) -> RelayExpr:
        for var, value in reversed(self.lets):
            result = Let(var, value, result)
        return result


def _lca(a: Scope | None, b: Scope) -> Scope:
    return b if a is None else ir_scopes.common_scope(a, b)  # type: ignore[return-value]


def _is_atom(e: RelayExpr) -> bool:
    return isinstance(e, (Var, GlobalVar, Op, Constructor)) or is_primitive(e)


def _opens_scope(node: RelayExpr, i: int) -> bool:
    """Whether child ``i`` (in ``walk_children`` order) of ``node`` is evaluated in a scope
    of its own."""
    if isinstance(node, Function):
        return i == len(node.params)
    if isinstance(node, If):
        return i > 0
    return isinstance(node, Match) and i > 0


def _kids_of(node: RelayExpr) -> tuple[RelayExpr, ...]:
    return () if _is_atom(node) else walk_children(node)


class _Converter:
    def __init__(self, root: RelayExpr) -> None:
        self.root_scope = Scope()
        self.scope: dict[int, Scope] = {id(root): self.root_scope}
        self.sub: dict[tuple[int, int], Scope] = {}  # (node, child index) -> its scope
        self.let_var: dict[int, Var] = {}  # a let's value -> the let's variable
        self.atom: dict[int, RelayExpr] = {}
        order = list(post_order(root, skip=_is_atom, kids=walk_children))
        for node in reversed(order):  # parents before children
            here = self.scope[id(node)]
            if isinstance(node, Let):
                self.let_var.setdefault(id(node.value), node.var)
            for i, c in enumerate(_kids_of(node)):
                s = here
                if _opens_scope(node, i):
                    s = self.sub[(id(node), i)] = here.child()
                self.scope[id(c)] = _lca(self.scope.get(id(c)), s)

    def run(self, root: RelayExpr) -> RelayExpr:
        stack: list[tuple[RelayExpr, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            kids = _kids_of(node)
            if i < len(kids):
                child = kids[i]
                if id(child) not in self.atom:
                    stack.append((child, 0))
                    continue
                if isinstance(node, Let) and i == 0:
                    self._bind_let(node)
                stack[-1] = (node, i + 1)
                continue
            stack.pop()
            self.atom[id(node)] = self._finish(node)
        return self.root_scope.wrap(self.atom[id(root)])

    def _bind_let(self, let: Let) -> None:
        # The let's variable names its value: bound already if the value was compound.
        value = self.atom[id(let.value)]
        if value is not let.var:
            self.scope[id(let)].lets.append((let.var, value))

    def _finish(self, node: RelayExpr) -> RelayExpr:
        if _is_atom(node):
            return node
        if isinstance(node, Let):
            return self.atom[id(node.body)]
        kids = [self._in_scope(node, i, c) for i, c in enumerate(_kids_of(node))]
        value = rebuild(node, kids, keep_type=False)
        var = self.let_var.pop(id(node), None) or Var("x")
        self.scope[id(node)].lets.append((var, value))
        return var

    def _in_scope(self, node: RelayExpr, i: int, child: RelayExpr) -> RelayExpr:
        atom = self.atom[id(child)]
        sub = self.sub.get((id(node), i))
        if isinstance(node, Function) and i < len(node.params):
            return child
        return atom if sub is None else sub.wrap(atom)


def to_a_normal_form(expr: RelayExpr) -> RelayExpr:
    """``expr`` in A-normal form (a Function keeps its parameters; its body is converted)."""
    if isinstance(expr, Function) and not is_primitive(expr):
        body = _Converter(expr.body).run(expr.body)
        return Function(expr.params, body, expr.ret_type, expr.type_params, expr.attrs,
                        span=expr.span)
    return _Converter(expr).run(expr)


ToANormalFormExpr = to_a_normal_form  # TVM's name for the expression-level conversion


@dataclass(frozen=True)
class ToANormalForm(ModulePass):
    """Convert every Relay function of the module to A-normal form (see module docstring)."""

    name: ClassVar[str] = "ToANormalForm"
    opt_level: ClassVar[int] = 1

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return infer(map_functions(mod, to_a_normal_form))  # type: ignore[arg-type]


register_pass("ToANormalForm", ToANormalForm)
