"""LambdaLift: every local function literal becomes a global function.

A literal with free variables ``%a, %b`` becomes a *closure global*::

    def @main_lifted_0(%a, %b, Closure=1) { fn (%x) { ... } }

and the literal is replaced by ``@main_lifted_0(%a, %b)``, which the code generator emits as
``alloc_closure`` capturing ``%a, %b``. The VM calls a closure's function with the captured
values first, then its own arguments, so the generated function's parameters are ``(%a, %b,
%x)``. A literal without free variables becomes an ordinary global, and the literal the bare
``@main_lifted_0`` (a closure with nothing captured when used as a value).

A let-bound literal may call itself (``let %loop = fn (...) { ... %loop(...) }``, as
``relay.loops.while_loop`` builds): inside the lifted function its own name stands for
``@lifted(%a, %b)``, so a self call becomes ``@lifted(%a, %b)(...)``, which the code generator
turns into a direct ``invoke`` of the lifted function with the captured values prepended.

Inner literals are lifted first, so a closure nested in a closure captures what it needs
through its parent. Primitive (fused) functions are left where they are. The pass runs after
ManifestAlloc in the VM pipeline (see ``compiler.py``), so it needs and keeps no types.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ....ir.attrs import DictAttrs
from ....ir.expr import Call, Function, GlobalVar, Let, RelayExpr, Var
from ....ir.module import IRModule
from ....ir.transform import ModulePass, PassContext
from ....ir.visitor import ExprMutator, bind, free_vars, is_primitive, post_order

CLOSURE_ATTR = "Closure"


def is_closure_global(func: Any) -> bool:
    """A lifted function whose parameters are the captured variables, returning a function."""
    return isinstance(func, Function) and bool(int(func.get_attr(CLOSURE_ATTR, 0) or 0))


class _Lifter(ExprMutator):
    def __init__(self, base: str, taken: set[str], root: RelayExpr) -> None:
        super().__init__()
        self.base, self.taken = base, taken
        self.lifted: list[tuple[GlobalVar, Function]] = []
        # id(let-bound literal) -> its let variable (a literal may call itself through it)
        self.rec_var: dict[int, Var] = {
            id(e.value): e.var for e in post_order(root, skip=is_primitive)
            if isinstance(e, Let) and isinstance(e.value, Function)}

    def skip(self, expr: RelayExpr) -> bool:
        return is_primitive(expr)

    def _name(self) -> str:
        k = 0
        while f"{self.base}_lifted_{k}" in self.taken:
            k += 1
        name = f"{self.base}_lifted_{k}"
        self.taken.add(name)
        return name

    def visit_function(self, fn: Function) -> RelayExpr:
        body = self.visit(fn.body)  # the literals inside were lifted first
        self_var = self.rec_var.get(id(fn))
        fvs = [v for v in free_vars(Function(fn.params, body)) if v is not self_var]
        gv = GlobalVar(self._name())
        fresh = [Var(v.name_hint, _type_of(v)) for v in fvs]
        inside: RelayExpr = Call(gv, tuple(fresh)) if fvs else gv
        binds: dict[Var, RelayExpr] = dict(zip(fvs, fresh))
        if self_var is not None:
            binds[self_var] = inside
        body = bind(body, binds) if binds else body
        fn_ty = fn.checked_type_
        ret = fn.ret_type or getattr(fn_ty, "ret_type", None)
        inner = Function(fn.params, body, ret, fn.type_params, fn.attrs)
        lifted = inner
        if fvs:
            lifted = Function(tuple(fresh), inner, fn_ty, (),
                              DictAttrs({CLOSURE_ATTR: 1}))
        self.lifted.append((gv, lifted))
        return Call(gv, tuple(fvs)) if fvs else gv


def _type_of(v: Var) -> Any:
    return v.checked_type_ if v.checked_type_ is not None else v.type_annotation


def lift_function(func: Function, base: str, taken: set[str]
                  ) -> tuple[Function, list[tuple[GlobalVar, Function]]]:
    """``func`` with its local literals replaced, and the new globals."""
    lifter = _Lifter(base, taken, func.body)
    body = lifter.visit(func.body)
    if body is func.body:
        return func, lifter.lifted
    new = Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    return new, lifter.lifted


@dataclass(frozen=True)
class LambdaLift(ModulePass):
    """Lift local functions to globals (closures take their captured values first)."""

    name: ClassVar[str] = "LambdaLift"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        taken = {gv.name_hint for gv in mod.functions}
        for gv, func in list(mod.functions.items()):
            if not isinstance(func, Function) or is_primitive(func):
                continue
            new, lifted = lift_function(func, gv.name_hint, taken)
            if new is not func:
                out.add(gv, new)
            for lgv, lfunc in lifted:
                out.add(lgv, lfunc)
        return out
