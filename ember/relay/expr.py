"""``relay.expr``: the Relay expression classes under TVM's module name (they live in
``ember.ir.expr``; ``relay.Call`` and ``relay.expr.Call`` are the same class)."""
from __future__ import annotations

from ..ir.expr import (BaseFunc, Call, Constant, Expr, GlobalVar, If, Let, RefCreate, RefRead,
                       RefWrite, RelayExpr, Tuple, TupleGetItem, Var, bind, const)

__all__ = ["BaseFunc", "Call", "Constant", "Expr", "GlobalVar", "If", "Let", "RefCreate",
           "RefRead", "RefWrite", "RelayExpr", "Tuple", "TupleGetItem", "Var", "bind", "const"]
