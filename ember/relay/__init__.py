"""ember.relay: the Relay-style IR API (re-exported from ember.ir), the operator library,
passes, backends and the build driver."""
from __future__ import annotations

import importlib

from ..ir import (  # noqa: F401
    Any,
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    FuncType,
    GlobalTypeVar,
    GlobalVar,
    If,
    IncompleteType,
    IRModule,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    ShapeVar,
    SourceName,
    Span,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeKind,
    TypeVar,
    Var,
    bind,
    const,
    scalar_type,
    var,
)
from ..ir import RelayRefType as RefType  # noqa: F401
from ..ir.visitor import ExprFunctor, ExprMutator, ExprVisitor  # noqa: F401
from . import op  # noqa: F401
from .op import *

# Submodules loaded on first use: keeps `import ember.relay` light. Every name is a module of
# ember.relay (tests/test_namespace.py imports each one).
_LAZY_MODULES = ("transform", "analysis", "prelude", "scope_builder", "backend", "testing",
                 "frontend", "vm", "build_module", "loops", "expr_functor", "expr", "ty", "adt",
                 "function", "dataflow_pattern")
_LAZY_ATTRS = {
    "ScopeBuilder": ("ember.relay.scope_builder", "ScopeBuilder"),
    "create_executor": ("ember.relay.build_module", "create_executor"),
    "build": ("ember.relay.build_module", "build"),
    "optimize": ("ember.relay.build_module", "optimize"),
    "build_config": ("ember.relay.transform", "build_config"),
    "save_param_dict": ("ember.runtime.params", "save_param_dict"),
    "load_param_dict": ("ember.runtime.params", "load_param_dict"),
    "Prelude": ("ember.relay.prelude", "Prelude"),
    "export_model_library_format": ("ember.micro", "export_model_library_format"),
}


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        return importlib.import_module(f"ember.relay.{name}")
    if name in _LAZY_ATTRS:
        mod, attr = _LAZY_ATTRS[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'ember.relay' has no attribute {name!r}")
