"""HoistActivations: an activation after layout-only ops moves before them, onto the values
they rearrange, where the producers' epilogues absorb it.

Detector heads end in a conv per pyramid level, each followed by
``reshape(transpose(conv, (0, 2, 3, 1)), (N, -1, k))``, then one ``concatenate`` of the
levels and an activation over it (EfficientDet, RetinaNet and SSD exports: ``sigmoid`` of the
class scores). The activation computed after the concatenation is one more pass over the
whole (often tens of MB) result, and it keeps the concatenation and the layout copies in one
kernel, so none of them can be written in place. An elementwise op of one operand commutes
with any rearrangement of its elements, so

    sigmoid(concatenate((reshape(transpose(a)), reshape(transpose(b)))))
    -> concatenate((reshape(transpose(sigmoid(a))), reshape(transpose(sigmoid(b)))))

and AlterOpLayout then puts ``sigmoid(conv)`` into the blocked conv's epilogue, computed in
registers. The ops passed through are ``transpose``, the reshape-like ops and
``concatenate`` (into every field); the activations are those the conv and GEMM epilogues
take (``EPILOGUE_ACTIVATIONS``). A move happens only when every value on the way, and each
value the activation lands on, has no other reader (another reader would need the value
without the activation), and each landing value is computed by an elementwise or
conv-like op (``OpPattern`` up to ``OUT_ELEMWISE_FUSABLE``: a function parameter, a constant
or another rearrangement would gain nothing).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ...ir.expr import Call, Function, RelayExpr, Tuple
from ...ir.module import IRModule
from ...ir.op import OpPattern
from ...ir.transform import ModulePass, PassContext, register_pass
from ._helpers import PassMutator, op_name, rewrite_functions, use_counts
from .fuse_gemm_epilogue import EPILOGUE_ACTIVATIONS

__all__ = ["HoistActivations"]

# ops that only rearrange their first argument's elements (one reader each, typed the same
# whatever their elements are)
REARRANGING = frozenset({"transpose", "reshape", "squeeze", "expand_dims", "nn.batch_flatten"})



class _Hoister(PassMutator):
    def __init__(self, counts: dict[int, int]) -> None:
        super().__init__()
        self.counts = counts

    def visit_call(self, orig: Call) -> RelayExpr:
        if op_name(orig) in EPILOGUE_ACTIVATIONS and len(orig.args) == 1 and \
                op_name(orig.args[0]) in REARRANGING | {"concatenate"}:
            moved = self._push(orig, orig.args[0])
            if moved is not None:
                return moved
        return super().visit_call(orig)

    def _push(self, act: Call, e: RelayExpr) -> RelayExpr | None:
        """``act`` applied to ``e`` with ``act`` moved under ``e``'s rearrangements (``e``
        rebuilt on the visited arguments), or None when some part cannot take it. Iterative:
        a chain of rearrangements may be as long as the program."""
        order: list[RelayExpr] = []  # the rearrangements and landing values, parents first
        stack = [e]
        while stack:
            node = stack.pop()
            if self.counts.get(id(node), 0) != 1:
                return None
            order.append(node)
            name = op_name(node)
            if name in REARRANGING:
                stack.append(node.args[0])  # type: ignore[attr-defined]
            elif name == "concatenate":
                tup = node.args[0]  # type: ignore[attr-defined]
                if not isinstance(tup, Tuple) or self.counts.get(id(tup), 0) != 1:
                    return None
                stack.extend(tup.fields)
            else:
                pattern = OpPattern(node.op.op_def.pattern) if name is not None else None  # type: ignore
                if pattern is None or pattern > OpPattern.OUT_ELEMWISE_FUSABLE:
                    return None
        new: dict[int, RelayExpr] = {}
        for node in reversed(order):  # children before parents
            name = op_name(node)
            if name in REARRANGING:
                args = node.args  # type: ignore[attr-defined]
                new[id(node)] = replace(node, args=(new[id(args[0])],  # type: ignore[arg-type]
                                                    *map(self.visit, args[1:])))
            elif name == "concatenate":
                tup = node.args[0]  # type: ignore[attr-defined]
                fields = tuple(new[id(f)] for f in tup.fields)
                new[id(node)] = replace(node, args=(replace(tup, fields=fields),))  # type: ignore
            else:
                new[id(node)] = Call(act.op, (self.visit(node),), act.attrs, span=act.span)
        return new[id(e)]


@dataclass(frozen=True)
class HoistActivations(ModulePass):
    """Move activations after rearrangements onto the values rearranged (module docstring)."""

    name: ClassVar[str] = "HoistActivations"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        def run(func: Function) -> RelayExpr:
            return _Hoister(use_counts(func)).visit(func)

        return rewrite_functions(mod, run)


register_pass("HoistActivations", HoistActivations)
