"""``relay.ty``: the Relay type classes under TVM's module name (they live in
``ember.ir.types``)."""
from __future__ import annotations

from ..ir.types import (Any, FuncType, GlobalTypeVar, IncompleteType, RelayRefType, ShapeVar,
                        TensorType, TupleType, Type, TypeCall, TypeConstraint, TypeKind, TypeVar,
                        is_dynamic, scalar_type)

RefType = RelayRefType  # TVM's name in relay.ty

__all__ = ["Any", "FuncType", "GlobalTypeVar", "IncompleteType", "RefType", "RelayRefType",
           "ShapeVar", "TensorType", "TupleType", "Type", "TypeCall", "TypeConstraint",
           "TypeKind", "TypeVar", "is_dynamic", "scalar_type"]
