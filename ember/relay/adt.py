"""``relay.adt``: algebraic data types (constructors, type definitions, patterns, ``match``)
under TVM's module name (they live in ``ember.ir.adt``)."""
from __future__ import annotations

from ..ir.adt import (Clause, Constructor, Match, Pattern, PatternConstructor, PatternTuple,
                      PatternVar, PatternWildcard, TypeData)

__all__ = ["Clause", "Constructor", "Match", "Pattern", "PatternConstructor", "PatternTuple",
           "PatternVar", "PatternWildcard", "TypeData"]
