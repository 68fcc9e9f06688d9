"""ember.ir: types, expressions, IRModule, attributes, visitors, structural equality and the
text format (printer and parser)."""
from __future__ import annotations

from ..runtime.errors import DiagnosticError  # noqa: F401
from .adt import (Clause, Constructor, Match, Pattern, PatternConstructor, PatternTuple,  # noqa: F401
                  PatternVar, PatternWildcard, TypeData)
from .attrs import Attrs, DictAttrs, make_attrs  # noqa: F401
from .base import Node, SequentialSpan, SourceName, Span, merge_spans, node_span  # noqa: F401
from .expr import (BaseExpr, BaseFunc, Call, Constant, Expr, Function, GlobalVar, If, Let,  # noqa: F401
                   RefCreate, RefRead, RefWrite, RelayExpr, Tuple, TupleGetItem, Var, bind, const,
                   var)
from .module import IRModule  # noqa: F401
from .op import Op, OpDef, OpPattern, register_op, register_op_attr  # noqa: F401
from .types import (Any, FuncType, GlobalTypeVar, IncompleteType, RelayRefType, ShapeVar,  # noqa: F401
                    TensorType, TupleType, Type, TypeCall, TypeConstraint, TypeKind, TypeVar,
                    scalar_type)
from .visitor import (ExprFunctor, ExprMutator, ExprVisitor, bound_vars, free_vars,  # noqa: F401
                      post_order)
from .structural import assert_structural_equal, structural_equal, structural_hash  # noqa: F401
from ..runtime.serialization import load_json, save_json  # noqa: F401
from . import instrument, transform  # noqa: F401,E402  (tvm.ir.transform, tvm.ir.instrument)
