"""FastMath: swap exp, tanh and erf for their fast approximations.

Every call of ``exp``, ``tanh`` and ``erf`` becomes a call of ``fast_exp``, ``fast_tanh`` and
``fast_erf`` on the same argument (``ember.relay.op.fast_math`` documents the formulas and
their error: about 2e-7 relative for exp, 6e-7 absolute for erf). Nothing else changes, and
fused (Primitive) functions are left alone. Its opt_level is 4, as in TVM: a build runs it only
under ``PassContext(opt_level=4)`` or when it is named in ``required_pass``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir.expr import Call, Function, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import FunctionPass, PassContext, register_pass
from ._helpers import PassMutator

__all__ = ["FAST_OPS", "FastMath"]

FAST_OPS = {"exp": "fast_exp", "tanh": "fast_tanh", "erf": "fast_erf"}


class _FastMath(PassMutator):
    def visit_call(self, call: Call) -> RelayExpr:
        new: Call = super().visit_call(call)
        if isinstance(new.op, Op) and new.op.name in FAST_OPS:
            return Call(Op.get(FAST_OPS[new.op.name]), new.args, span=new.span)
        return new


@dataclass(frozen=True)
class FastMath(FunctionPass):
    """Replace exp, tanh and erf by fast_exp, fast_tanh and fast_erf (module docstring)."""

    name: ClassVar[str] = "FastMath"
    opt_level: ClassVar[int] = 4

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return _FastMath().visit(func)  # type: ignore[no-any-return]


register_pass("FastMath", FastMath)
