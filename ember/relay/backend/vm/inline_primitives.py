"""InlinePrimitives: put every fused (``Primitive=1``) function back in call position.

After ToANormalForm a primitive function may still be reached through a variable::

    let %f = fn (%p0, Primitive=1) { ... };   ...   %f(%x)

The VM calls kernels with ``invoke_packed``, which needs the callee at the call site, so this
pass substitutes such let-bound primitive functions into their calls and drops the let.
A primitive function used as a value (not called) cannot run on the VM and is reported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ....ir.expr import Call, Function, Let, RelayExpr, Var
from ....ir.module import IRModule
from ....ir.transform import ModulePass, PassContext
from ....ir.visitor import ExprMutator
from ....runtime.errors import TVMError
from ...transform._rewrite import is_primitive


class _Inliner(ExprMutator):
    def __init__(self) -> None:
        super().__init__()
        self.prims: dict[Var, Function] = {}

    def visit_Let(self, e: Let) -> RelayExpr:
        node: RelayExpr = e
        while isinstance(node, Let) and is_primitive(node.value):
            self.prims[node.var] = node.value  # type: ignore[assignment]
            node = node.body
        return super().visit_Let(e) if node is e else self.visit(node)

    def visit_Call(self, e: Call) -> RelayExpr:
        if isinstance(e.op, Var) and e.op in self.prims:
            return Call(self.prims[e.op], tuple(self.visit(a) for a in e.args), e.attrs,
                        e.type_args, span=e.span, checked_type_=e.checked_type_)
        return super().visit_Call(e)

    def visit_Var(self, e: RelayExpr) -> RelayExpr:
        if isinstance(e, Var) and e in self.prims:
            raise TVMError(f"InlinePrimitives: the fused function %{e.name_hint} is used as a "
                           "value; the VM can only call fused functions directly")
        return e

    def visit_Function(self, e: Function) -> RelayExpr:
        return e if is_primitive(e) else super().visit_Function(e)


@dataclass(frozen=True)
class InlinePrimitives(ModulePass):
    """Substitute let-bound primitive functions into their call sites."""

    name: ClassVar[str] = "InlinePrimitives"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and not is_primitive(func):
                new = _Inliner().visit(func)
                if new is not func:
                    out.add(gv, new)
        return out
