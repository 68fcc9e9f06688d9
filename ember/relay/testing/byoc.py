"""``relay.testing.byoc``: a hand-written annotator for the built-in ``ccompiler`` codegen.

``CcompilerAnnotator().visit(func)`` offloads each chain ``multiply(subtract(add(a, b), c),
d)`` (the subtract may be either operand of the multiply, the add either operand of the
subtract) to ``ccompiler``::

         |
    -- begin --
         |
        add
         |
      subtract
         |
      multiply
         |
     -- end --
         |

Every operand from outside the chain gets a ``compiler_begin``, the multiply a
``compiler_end``; the rest of the program is left alone (so it stays with ember's own
compiler once PartitionGraph has run). It is the Relay-era test helper, made iterative and
with the chain shape stated exactly.
"""
from __future__ import annotations

from ...ir.expr import Call, Function, RelayExpr
from ...ir.op import Op
from ...ir.visitor import ExprMutator
from ..op.annotation import compiler_begin, compiler_end

__all__ = ["CcompilerAnnotator"]

COMPILER = "ccompiler"


def _is(node: RelayExpr, name: str) -> bool:
    return isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == name


def _inner(node: Call, name: str) -> Call | None:
    """The first operand of ``node`` that is a call of ``name``."""
    return next((a for a in node.args if _is(a, name)), None)  # type: ignore[misc]


class CcompilerAnnotator(ExprMutator):
    """Annotate add -> subtract -> multiply chains for ``ccompiler`` (see the module)."""

    def skip(self, expr: RelayExpr) -> bool:
        return isinstance(expr, Function) and expr.get_attr("Primitive") is not None

    def _enter(self, node: Call, inside: RelayExpr | None, new_inside: RelayExpr) -> Call:
        """``node`` rebuilt with ``inside`` (the chain) as ``new_inside`` and every other
        operand entering the region."""
        args = tuple(new_inside if a is inside else compiler_begin(self.visit(a), COMPILER)
                     for a in node.args)
        return Call(node.op, args, node.attrs, node.type_args, span=node.span)

    def visit_call(self, e: Call) -> RelayExpr:
        sub = _inner(e, "subtract") if _is(e, "multiply") else None
        add = _inner(sub, "add") if sub is not None else None
        if add is None:
            return super().visit_call(e)
        new_add = self._enter(add, None, add)
        new_sub = self._enter(sub, add, new_add)  # type: ignore[arg-type]
        return compiler_end(self._enter(e, sub, new_sub), COMPILER)
