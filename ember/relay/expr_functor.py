"""``tvm.relay.expr_functor``: the visitor and mutator classes (defined in ember.ir.visitor)."""
from ..ir.visitor import ExprFunctor, ExprMutator, ExprVisitor

__all__ = ["ExprFunctor", "ExprMutator", "ExprVisitor"]
