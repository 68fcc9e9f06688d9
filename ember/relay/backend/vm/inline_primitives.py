"""InlinePrimitives: put every fused (``Primitive=1``) function back in call position.

After ToANormalForm a primitive function may still be reached through a variable::

    let %f = fn (%p0, Primitive=1) { ... };   ...   %f(%x)

The VM calls kernels with ``invoke_packed``, which needs the callee at the call site, so this
pass substitutes such let-bound primitive functions into their calls and drops the let.
A call of a *global* primitive function (PartitionGraph's ``@tvmgen_<mod>_<compiler>_main_<n>``)
gets the function too, so the VM calls its kernel like any fused one. A primitive function
used as a value (not called) cannot run on the VM and is reported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ....ir.expr import Call, Function, GlobalVar, Let, RelayExpr, Var
from ....ir.module import IRModule
from ....ir.transform import ModulePass, PassContext
from ....ir.visitor import ExprMutator, is_primitive, post_order
from ....runtime.errors import TVMError


class _Inliner(ExprMutator):
    """Calls of the let-bound primitive functions ``prims`` get the function itself."""

    def __init__(self, prims: dict[Var, Function],
                 global_prims: dict[str, Function] | None = None) -> None:
        super().__init__()
        self.prims = prims
        self.global_prims = global_prims or {}

    def skip(self, expr: RelayExpr) -> bool:
        return is_primitive(expr)

    def visit_let(self, e: Let) -> RelayExpr:
        if e.var in self.prims:
            return self.visit(e.body)  # the binding goes: its calls get the function
        return super().visit_let(e)

    def visit_call(self, e: Call) -> RelayExpr:
        if isinstance(e.op, Var) and e.op in self.prims:
            return Call(self.prims[e.op], tuple(self.visit(a) for a in e.args), e.attrs,
                        e.type_args, span=e.span, checked_type_=e.checked_type_)
        if isinstance(e.op, GlobalVar) and e.op.name_hint in self.global_prims:
            return Call(self.global_prims[e.op.name_hint], tuple(self.visit(a) for a in e.args),
                        e.attrs, e.type_args, span=e.span, checked_type_=e.checked_type_)
        return super().visit_call(e)


def inline_primitives(func: Function, global_prims: dict[str, Function] | None = None
                      ) -> Function:
    """``func`` with its let-bound primitive functions (and the global ones of
    ``global_prims``, by name) substituted into their calls."""
    prims: dict[Var, Function] = {e.var: e.value for e in post_order(func, skip=is_primitive)
                                  if isinstance(e, Let) and is_primitive(e.value)}
    calls_global = global_prims and any(
        isinstance(e, Call) and isinstance(e.op, GlobalVar) and e.op.name_hint in global_prims
        for e in post_order(func, skip=is_primitive))
    if not prims and not calls_global:
        return func
    out: Function = _Inliner(prims, global_prims).visit(func)
    for e in post_order(out, skip=is_primitive):
        if isinstance(e, Var) and e in prims:
            raise TVMError(f"InlinePrimitives: the fused function %{e.name_hint} is used as a "
                           "value; the VM can only call fused functions directly")
    return out


@dataclass(frozen=True)
class InlinePrimitives(ModulePass):
    """Substitute let-bound primitive functions into their call sites."""

    name: ClassVar[str] = "InlinePrimitives"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        global_prims = {gv.name_hint: f for gv, f in mod.functions.items() if is_primitive(f)}
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and not is_primitive(func):
                new = inline_primitives(func, global_prims)
                if new is not func:
                    out.add(gv, new)
        return out
