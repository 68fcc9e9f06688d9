"""``relay.expr``: the Relay expression classes under TVM's module name (they live in
``ember.ir.expr``; ``relay.Call`` and ``relay.expr.Call`` are the same class).
``ExprWithOp`` (the class Relay's operator sugar hangs on) is ``RelayExpr`` here: every
expression has the sugar; ``TupleWrapper`` is what multi-output ops such as ``relay.split``
return."""
from __future__ import annotations

from ..ir.expr import (BaseFunc, Call, Constant, Expr, GlobalVar, If, Let, RefCreate, RefRead,
                       RefWrite, RelayExpr, Tuple, TupleGetItem, Var, bind, const, var)
from .op._tuple import TupleWrapper

ExprWithOp = RelayExpr

__all__ = ["BaseFunc", "Call", "Constant", "Expr", "ExprWithOp", "GlobalVar", "If", "Let",
           "RefCreate", "RefRead", "RefWrite", "RelayExpr", "Tuple", "TupleGetItem",
           "TupleWrapper", "Var", "bind", "const", "var"]
