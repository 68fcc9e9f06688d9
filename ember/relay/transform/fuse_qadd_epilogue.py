"""FuseQAddEpilogue: a quantized residual add folded into the int8 conv before it.

quantize_static writes a residual block's add (ResNet's, MobileNetV2's) as a QLinearAdd of a
QLinearConv's output and the block's input: ``nn.contrib_qadd(nn.contrib_qconv2d(...), r)``
(or with the operands the other way round). Where nothing else reads the conv, and the add's
zero point for it is the conv's own output zero point, the pair becomes one
``nn.contrib_qconv2d_add(..., r)``: the conv kernel adds each block of its outputs, as it
writes them, with the qadd kernel's arithmetic (``ember/kernels/qconv.h``), so the values are
the two kernels' exactly and the conv's output never makes the round trip through memory
(resnet8's three adds were a tenth of its time). The add is a sum of two float32 products,
so the operands' order does not matter: the conv's operand becomes the first.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from ...ir.expr import Call, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ..op.nn.qconv import ADD_OP, OP as QCONV, QConv2DAddAttrs
from ._helpers import UsesMutator, fusion_bounded, op_name, rewrite_functions, use_counts

__all__ = ["FuseQAddEpilogue"]
QADD = "nn.contrib_qadd"



class _Fuser(UsesMutator):
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        if op_name(new) != QADD:
            return new
        for i in (0, 1):
            conv = new.args[i]
            if self.uses.get(id(orig.args[i]), 0) == 1 and op_name(conv) == QCONV:
                fused = _fused(conv, new, i)
                if fused is not None:
                    return fused
        return new


def _fused(conv: Call, add: Call, i: int) -> Call | None:
    """The fused call of ``add`` whose operand i is ``conv``, or None where the add reads the
    conv with another zero point than the conv writes."""
    a = add.attrs
    ra, rb, c_zp, r_zp = (a.ra, a.rb, a.a_zp, a.b_zp) if i == 0 else (a.rb, a.ra, a.b_zp, a.a_zp)
    if c_zp != conv.attrs.y_zp:
        return None
    conv_attrs = {f.name: getattr(conv.attrs, f.name) for f in fields(conv.attrs)}
    attrs = QConv2DAddAttrs(**conv_attrs, ra=ra, rb=rb, r_zp=r_zp, s_zp=a.y_zp,
                            s_dtype=a.out_dtype, s_min=a.y_min, s_max=a.y_max)
    return Call(Op.get(ADD_OP), (*conv.args, add.args[1 - i]), attrs)


@dataclass(frozen=True)
class FuseQAddEpilogue(ModulePass):
    """Rewrite ``nn.contrib_qadd`` of a single-use ``nn.contrib_qconv2d`` into
    ``nn.contrib_qconv2d_add``."""

    name: ClassVar[str] = "FuseQAddEpilogue"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # a user who bounds fusion groups to one op (relay.FuseOps.max_depth=1) keeps them apart
        if fusion_bounded(ctx):
            return mod
        return rewrite_functions(mod, lambda func: _Fuser(use_counts(func)).visit(func))


register_pass("FuseQAddEpilogue", FuseQAddEpilogue)
