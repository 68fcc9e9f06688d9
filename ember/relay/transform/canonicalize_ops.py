"""CanonicalizeOps: rewrite ops into the simpler ops lowering handles anyway.

Today one rule, as in TVM: ``nn.bias_add(x, b, axis)`` becomes ``add(x, b')`` with ``b'`` the
bias reshaped to broadcast along ``axis`` (``expand_dims(b, axis=1, num_newaxis=k)`` for the
``k`` axes after it). With a constant bias, FoldConstant then leaves a ``(C, 1, 1)`` constant,
so fused kernels need only the broadcasting ``add``. ``topi.nn.bias_add`` still exists for
programs compiled below opt level 3, where this pass does not run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir.expr import Call, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ._helpers import PassMutator, expand_to_axis, op_call, rewrite_functions

__all__ = ["CanonicalizeOps"]


class _Canonicalizer(PassMutator):
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        if not (isinstance(new.op, Op) and new.op.name == "nn.bias_add"):
            return new
        ty = orig.args[0].checked_type_
        if not isinstance(ty, TensorType):
            return new
        ndim = len(ty.shape)
        axis = new.attrs.axis % ndim  # type: ignore[union-attr]
        return op_call("add", new.args[0], expand_to_axis(new.args[1], ndim, axis))


@dataclass(frozen=True)
class CanonicalizeOps(ModulePass):
    """``nn.bias_add`` -> ``add`` of the bias expanded along its axis."""

    name: ClassVar[str] = "CanonicalizeOps"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return rewrite_functions(mod, lambda f: _Canonicalizer().visit(f))


register_pass("CanonicalizeOps", CanonicalizeOps)
