"""``relay.function``: ``Function`` under TVM's module name (it lives in ``ember.ir.expr``)."""
from __future__ import annotations

from ..ir.expr import BaseFunc, Function

__all__ = ["BaseFunc", "Function"]
