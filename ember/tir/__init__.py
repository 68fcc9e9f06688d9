"""ember.tir: the loop-level IR (expressions, statements, buffers, PrimFunc), its simplifier,
printer and C code generator, and ``build``.
"""
from __future__ import annotations

from ..ir.types import Any  # noqa: F401  (tvm.tir.Any: a dimension unknown until run time)
from .expr import (  # noqa: F401
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    CommReducer,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    ProducerLoad,
    Reduce,
    Select,
    SizeVar,
    StringImm,
    Sub,
    Var,
)
from . import stmt_functor, transform  # noqa: F401  (tir.transform is the pass module)
from .functor import post_order, substitute  # noqa: F401
from .op import (  # noqa: F401
    abs,
    acos,
    all,
    any,
    asin,
    address_of,
    atan,
    call_extern,
    call_intrin,
    call_packed,
    call_pure_extern,
    cast,
    ceil,
    const,
    cos,
    cosh,
    div,
    erf,
    exp,
    exp2,
    expm1,
    fabs,
    floor,
    floordiv,
    floormod,
    fmod,
    if_then_else,
    indexdiv,
    indexmod,
    infinity,
    isinf,
    isnan,
    log,
    log1p,
    log2,
    log10,
    max,
    max_value,
    min,
    min_value,
    pow,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)
from .simplify import simplify  # noqa: F401
from .stmt import (  # noqa: F401
    Allocate,
    AssertStmt,
    Buffer,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    decl_buffer,
)


def structural_equal(a: object, b: object) -> bool:
    """True when two loop-IR nodes print the same (vars compared by name)."""
    return str(a) == str(b)


def lower(*args, **kwargs):  # type: ignore[no-untyped-def]
    """``lower(schedule, args, name="main")`` -> IRModule holding the PrimFunc under ``name``
    (``tvm.lower``; see ember.tir.build_module). ``ember.te.lower`` returns the bare PrimFunc."""
    from .build_module import lower as _lower

    return _lower(*args, **kwargs)


def build(*args, **kwargs):  # type: ignore[no-untyped-def]
    """``build(schedule_or_primfunc, args, target="c", name=...)`` -> Module (ember.tir.build_module)."""
    from .build_module import build as _build

    return _build(*args, **kwargs)
