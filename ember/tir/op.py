"""Building expressions: constants, dtype promotion, arithmetic, and the math intrinsics.

Binary operators promote their operands (a Python number takes the other side's dtype; int with
float gives the float; two ints or two floats give the wider) and fold constants.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..runtime.errors import OpError
from .expr import (
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
    Div,
    EqualOp,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
)


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint")) or dtype == "bool"


@functools.cache
def bits(dtype: str) -> int:
    return 8 if dtype == "bool" else int("".join(c for c in dtype if c.isdigit()) or 32)


def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """A constant; the dtype defaults to int32 for ints/bools and float32 for floats."""
    if isinstance(value, PrimExpr):
        return value if dtype is None else cast(value, dtype)
    if dtype is None:
        if isinstance(value, (bool, np.bool_)):
            dtype = "bool"
        elif isinstance(value, (int, np.integer)):
            dtype = "int32" if -(2**31) <= int(value) < 2**31 else "int64"
        else:
            dtype = "float32"
    if is_float(dtype):
        return FloatImm(dtype, float(value))
    if dtype == "bool":
        return IntImm("bool", int(bool(value)))
    return IntImm(dtype, int(value))


def convert(value: Any) -> PrimExpr:
    """Turn a Python number, an ``a == b`` result or a te tensor slice into an expression."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, EqualOp):
        return value.asobject()
    if hasattr(value, "asobject"):
        return value.asobject()
    if isinstance(value, str):
        return StringImm(value)
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return const(value)
    raise TypeError(f"cannot convert {value!r} ({type(value).__name__}) to a tir expression")


def _promote(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    a_py, b_py = _is_python(a), _is_python(b)
    if a_py and not b_py:
        b = convert(b)
        return _python_const(a, b.dtype), b
    if b_py and not a_py:
        a = convert(a)
        return a, _python_const(b, a.dtype)
    a, b = convert(a), convert(b)
    if a.dtype == b.dtype:
        return a, b
    target = _wider(a.dtype, b.dtype)
    return cast(a, target), cast(b, target)


def _is_python(v: Any) -> bool:
    return not isinstance(v, (PrimExpr, EqualOp)) and not hasattr(v, "asobject")


def _python_const(v: Any, other: str) -> PrimExpr:
    if isinstance(v, float) and not is_float(other):
        return const(v, "float32")
    return const(v, "int32" if other == "bool" and not isinstance(v, bool) else other)


def _wider(x: str, y: str) -> str:
    if is_float(x) != is_float(y):
        return x if is_float(x) else y
    if x == "bool":
        return y
    if y == "bool":
        return x
    return x if bits(x) >= bits(y) else y


def _fold(cls: type, a: Any, b: Any, dtype: str) -> PrimExpr | None:
    x, y = a.value, b.value
    if cls in (Div, Mod, FloorDiv, FloorMod) and y == 0:
        return None
    if cls is Div:
        v = x / y if is_float(dtype) else int(x / y) if abs(x) < 2**52 else None
    elif cls is Mod:
        v = math.fmod(x, y) if is_float(dtype) else x - int(x / y) * y
    elif cls is FloorDiv:
        v = math.floor(x / y) if is_float(dtype) else x // y
    elif cls is FloorMod:
        v = x - math.floor(x / y) * y if is_float(dtype) else x % y
    else:
        v = _FOLD[cls](x, y)
    return None if v is None else const(v, dtype)


_FOLD = {Add: lambda x, y: x + y, Sub: lambda x, y: x - y, Mul: lambda x, y: x * y,
         Min: min, Max: max, EQ: lambda x, y: x == y, NE: lambda x, y: x != y,
         LT: lambda x, y: x < y, LE: lambda x, y: x <= y, GT: lambda x, y: x > y,
         GE: lambda x, y: x >= y, And: lambda x, y: bool(x and y), Or: lambda x, y: bool(x or y)}


def binary(cls: type, a: Any, b: Any) -> PrimExpr:
    """Build ``cls(a, b)`` with dtype promotion and constant folding."""
    a, b = _promote(a, b)
    compare = cls in (EQ, NE, LT, LE, GT, GE, And, Or)
    dtype = "bool" if compare else a.dtype
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        folded = _fold(cls, a, b, dtype)
        if folded is not None:
            return folded
    return cls(a, b, dtype)


def add(a: Any, b: Any) -> PrimExpr:
    return binary(Add, a, b)


def sub(a: Any, b: Any) -> PrimExpr:
    return binary(Sub, a, b)


def mul(a: Any, b: Any) -> PrimExpr:
    return binary(Mul, a, b)


def div(a: Any, b: Any) -> PrimExpr:
    """``a / b``: true division for floats, C (truncating) division for integers."""
    return binary(Div, a, b)


truncdiv = div


def truncmod(a: Any, b: Any) -> PrimExpr:
    """C remainder (sign of the dividend)."""
    return binary(Mod, a, b)


def floordiv(a: Any, b: Any) -> PrimExpr:
    """Division rounding toward minus infinity (Python's ``//``)."""
    return binary(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> PrimExpr:
    """Remainder with the sign of the divisor (Python's ``%``)."""
    return binary(FloorMod, a, b)


indexdiv, indexmod = floordiv, floormod


def min(a: Any, b: Any) -> PrimExpr:
    """Elementwise minimum of two expressions."""
    return binary(Min, a, b)


def max(a: Any, b: Any) -> PrimExpr:
    """Elementwise maximum of two expressions."""
    return binary(Max, a, b)


def logical_and(a: Any, b: Any) -> PrimExpr:
    return binary(And, a, b)


def logical_or(a: Any, b: Any) -> PrimExpr:
    return binary(Or, a, b)


def logical_not(a: Any) -> PrimExpr:
    a = convert(a)
    if isinstance(a, IntImm):
        return const(not a.value, "bool")
    return Not(a)


def all(*conds: Any) -> PrimExpr:
    """The conjunction of ``conds`` (true when empty)."""
    out: PrimExpr = const(True)
    for c in conds:
        out = logical_and(out, c) if not (isinstance(out, IntImm) and out.value) else convert(c)
    return out


def any(*conds: Any) -> PrimExpr:
    """The disjunction of ``conds`` (false when empty)."""
    out: PrimExpr = const(False)
    for c in conds:
        out = logical_or(out, c) if not (isinstance(out, IntImm) and not out.value) else convert(c)
    return out


def cast(value: Any, dtype: str) -> PrimExpr:
    """Convert ``value`` to ``dtype``; constants are converted at once."""
    value = convert(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, (IntImm, FloatImm)):
        v = value.value
        if is_float(dtype):
            return FloatImm(dtype, float(v))
        if dtype == "bool":
            return IntImm("bool", int(bool(v)))
        if isinstance(v, float) and not math.isfinite(v):
            return Cast(dtype, value)
        return IntImm(dtype, int(v))
    return Cast(dtype, value)


def Select_(cond: Any, t: Any, f: Any) -> PrimExpr:
    """``cond ? t : f`` with promotion; folds a constant condition."""
    cond = convert(cond)
    t, f = _promote(t, f)
    if isinstance(cond, IntImm):
        return t if cond.value else f
    return Select(cond, t, f, t.dtype)


def if_then_else(cond: Any, t: Any, f: Any) -> PrimExpr:
    """``cond ? t : f`` where only the taken side is evaluated (safe for guarded loads)."""
    cond = convert(cond)
    t, f = _promote(t, f)
    if isinstance(cond, IntImm):
        return t if cond.value else f
    return Call(t.dtype, "if_then_else", (cond, t, f))


def call_intrin(dtype: str, name: str, *args: Any) -> PrimExpr:
    """A call of the intrinsic ``name`` (rendered by the C emitter's table). TVM's names of
    the math intrinsics (``"tir.log"``, ``"tir.exp"``...) are ember's bare ones (``"log"``)."""
    bare = name[4:] if name.startswith("tir.") else name
    if bare not in _MATH_INTRINSICS | {"if_then_else"}:
        raise OpError(f"tir.call_intrin: ember has no intrinsic {name!r}; its intrinsics are "
                      f"{', '.join(sorted(_MATH_INTRINSICS))} and if_then_else (also spelled "
                      "'tir.<name>'); call another C function with tir.call_extern or "
                      "tir.call_pure_extern")
    return Call(dtype, bare, tuple(convert(a) for a in args))


def call_extern(dtype: str, name: str, *args: Any, header: str = "") -> PrimExpr:
    """A call of the C function ``name``, declared in ``header`` (a path under ember's include
    directory, e.g. ``"ember/kernels/gemm.h"``, that the generated C includes). Pass buffers
    as ``buf.data`` or ``address_of(buf[i, j])``; ``Evaluate`` the call when ``dtype`` is
    ``"void"``-like and only its effect matters."""
    if not name.isidentifier():
        raise OpError(f"tir.call_extern: {name!r} is not a C identifier")
    return Call(dtype, "tir.call_extern",
                (StringImm(name), StringImm(header), *(convert(a) for a in args)))


def call_pure_extern(dtype: str, func_name: str, *args: Any) -> PrimExpr:
    """TVM's pure extern call (``call_pure_extern("float32", "expf", x)``): ember's C emitter
    treats every extern call alike, so this is :func:`call_extern` with no extra header (the
    generated C includes ``<math.h>``)."""
    return call_extern(dtype, func_name, *args)


def address_of(load: Any) -> PrimExpr:
    """``&buf[i]``: a pointer to the element a ``BufferLoad`` reads (for extern kernels)."""
    if not isinstance(load, BufferLoad):
        raise OpError(f"tir.address_of: expected a buffer element, got {type(load).__name__}")
    if load.buffer.dtype == "float16":
        raise OpError("tir.address_of: float16 buffers are stored as uint16 bits; pass "
                      "buffer.data and an offset instead")
    return Call("handle", "tir.address_of", (load,))


def _float_arg(name: str, x: Any) -> PrimExpr:
    x = convert(x)
    if not is_float(x.dtype):
        raise OpError(f"tir.{name}: expected a float expression, got {x.dtype} ({x})")
    return x


def _unary(name: str) -> Any:
    def fn(x: Any) -> PrimExpr:
        x = _float_arg(name, x)
        return Call(x.dtype, name, (x,))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of a float expression."
    return fn


exp, exp2, log, log2, log10, sqrt, rsqrt, tanh, erf, sigmoid = (
    _unary(n) for n in ("exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "erf",
                        "sigmoid"))
sin, cos, tan, floor, ceil, round, trunc = (
    _unary(n) for n in ("sin", "cos", "tan", "floor", "ceil", "round", "trunc"))
atan, asin, acos, sinh, cosh, log1p, expm1 = (
    _unary(n) for n in ("atan", "asin", "acos", "sinh", "cosh", "log1p", "expm1"))


# The math intrinsics by their ember names (TVM spells them "tir.<name>" in call_intrin).
_MATH_INTRINSICS = frozenset((
    "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "sin", "cos",
    "tan", "floor", "ceil", "round", "trunc", "atan", "asin", "acos", "sinh", "cosh", "log1p",
    "expm1", "abs", "isnan", "isinf", "pow", "fmod"))


def abs(x: Any) -> PrimExpr:
    """Absolute value (ints and floats)."""
    x = convert(x)
    if x.dtype.startswith("uint") or x.dtype == "bool":
        return x
    return Call(x.dtype, "abs", (x,))


fabs = abs


def isnan(x: Any) -> PrimExpr:
    """True where ``x`` is NaN (always false for ints)."""
    x = convert(x)
    return Call("bool", "isnan", (x,)) if is_float(x.dtype) else const(False)


def isinf(x: Any) -> PrimExpr:
    x = convert(x)
    return Call("bool", "isinf", (x,)) if is_float(x.dtype) else const(False)


def pow(x: Any, y: Any) -> PrimExpr:
    """``x ** y`` for floats."""
    x, y = _promote(x, y)
    return Call(x.dtype, "pow", (x, y))


power = pow


def fmod(x: Any, y: Any) -> PrimExpr:
    x, y = _promote(x, y)
    return Call(x.dtype, "fmod", (x, y))


def max_value(dtype: str) -> PrimExpr:
    """The largest finite value of ``dtype``."""
    if dtype == "bool":
        return const(True)
    info = np.finfo(dtype) if is_float(dtype) else np.iinfo(dtype)
    return const(float(info.max) if is_float(dtype) else int(info.max), dtype)


def min_value(dtype: str) -> PrimExpr:
    """The smallest (most negative) finite value of ``dtype``."""
    if dtype == "bool":
        return const(False)
    info = np.finfo(dtype) if is_float(dtype) else np.iinfo(dtype)
    return const(float(info.min) if is_float(dtype) else int(info.min), dtype)


def infinity(dtype: str) -> PrimExpr:
    return FloatImm(dtype, math.inf)


def call_packed(name: str, *args: Any) -> PrimExpr:
    """Call the runtime packed function ``name`` (looked up with TVMBackendGetFuncFromEnv).

    Buffer arguments are passed as DLTensor handles, scalars as int64/float64.
    """
    return Call("int32", "tir.call_packed", (StringImm(name),) + tuple(
        a if not isinstance(a, (int, float)) else convert(a) for a in args))


def is_binary(e: Any) -> bool:
    return isinstance(e, BinaryOp)
