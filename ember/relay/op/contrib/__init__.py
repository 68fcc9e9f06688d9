"""``relay.op.contrib``: what external compilers (BYOC) register about the operators they take.

- ``register_pattern_table(compiler)`` decorates a function returning that compiler's pattern
  table: ``[(name, pattern), (name, pattern, check), ...]`` with names ``"<compiler>.<what>"``
  (MergeComposite turns each match into a ``Composite=<name>`` function);
  ``get_pattern_table(compiler)`` gives the table back (None if none is registered).
- Per-operator support is an op attribute ``target.<compiler>``, set with
  ``tvm.ir.register_op_attr(op, "target.<compiler>")`` (see :mod:`.ccompiler`, the built-in C
  codegen's rules); AnnotateTarget reads it.
"""
from __future__ import annotations

from .ccompiler import ccompiler_supported  # noqa: F401 (registers target.ccompiler)
from .register import get_pattern_table, register_pattern_table

__all__ = ["get_pattern_table", "register_pattern_table"]
