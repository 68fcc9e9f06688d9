"""Elementwise and broadcasting operators: math, comparison, logical, where, clip, cast.

The plain unary and binary ops are declared as tables (name, numpy rule, what dtypes they
accept): each row is one registry entry and one API function (``relay.exp``, ``relay.add``),
like TVM's lists of ``register_broadcast_schedule`` calls.

Numeric semantics follow the C kernels TVM generates: integer ``divide`` truncates toward zero,
``mod`` is C ``fmod`` (sign of the dividend), ``floor_divide``/``floor_mod`` round toward
negative infinity, ``round`` rounds half away from zero (C ``round``; numpy's ``round`` rounds
half to even), and every result stays in the input dtype (float32 math stays float32).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import topi
from ...ir.expr import Call
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import EQ, NE, PrimExpr
from ._compute_common import broadcast_dims, cast_to, value_of
from ._reg import BROADCAST, ELEMWISE, call, defop
from ._shape import broadcast_shapes, fail, is_float, same_dtype, tensor_of
from .attrs import CastAttrs, ClipAttrs

__all__: list[str] = []

# Which dtypes an op accepts: its name in messages and the predicate.
ANY = ("any", lambda dt: True)
FLOAT = ("a floating-point", is_float)
INTEGER = ("an integer or bool", lambda dt: dt.startswith(("int", "uint", "bool")))
NUMERIC = ("a numeric (not bool)", lambda dt: dt != "bool")


def _check_dtype(op: str, dtype: str, kind: tuple[str, Callable[[str], bool]]) -> None:
    if not kind[1](dtype):
        raise fail(op, f"requires {kind[0]} tensor, got {dtype}")


def _api(name: str, params: tuple[str, ...], doc: str) -> None:
    """Define the module-level function ``name(*params)`` building a call of op ``name``."""

    def api(*args: Any) -> Call:
        if len(args) != len(params):
            raise TypeError(f"relay.{name}() takes {len(params)} argument(s) "
                            f"({', '.join(params)}), got {len(args)}")
        return call(name, *args)

    api.__name__ = api.__qualname__ = name
    api.__doc__ = f"{doc}\n\n``relay.{name}({', '.join(params)})``"
    globals()[name] = api
    __all__.append(name)


# ---------------------------------------------------------------- unary elementwise ops
def _round_half_away(x: np.ndarray) -> np.ndarray:
    # trunc + (|frac| >= 0.5) is exact; floor(x + 0.5) is not (0.49999997f + 0.5f == 1.0f).
    t = np.trunc(x)
    return t + np.sign(x) * (np.abs(x - t) >= 0.5)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(np.sqrt(x))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


_UNARY: dict[str, tuple[Callable[[np.ndarray], Any], tuple[str, Any], str]] = {
    "negative": (np.negative, NUMERIC, "Elementwise -x."),
    "abs": (np.abs, ANY, "Elementwise |x|."),
    "sign": (np.sign, NUMERIC, "Elementwise sign: -1, 0 or 1."),
    "exp": (np.exp, FLOAT, "Elementwise e**x."),
    "log": (np.log, FLOAT, "Elementwise natural logarithm."),
    "log2": (np.log2, FLOAT, "Elementwise base-2 logarithm."),
    "log10": (np.log10, FLOAT, "Elementwise base-10 logarithm."),
    "sqrt": (np.sqrt, FLOAT, "Elementwise square root."),
    "rsqrt": (_rsqrt, FLOAT, "Elementwise 1 / sqrt(x)."),
    "tanh": (np.tanh, FLOAT, "Elementwise hyperbolic tangent."),
    "sigmoid": (_sigmoid, FLOAT, "Elementwise 1 / (1 + exp(-x))."),
    "erf": (_erf, FLOAT, "Elementwise Gauss error function."),
    "sin": (np.sin, FLOAT, "Elementwise sine."),
    "cos": (np.cos, FLOAT, "Elementwise cosine."),
    "tan": (np.tan, FLOAT, "Elementwise tangent."),
    "asin": (np.arcsin, FLOAT, "Elementwise arcsine."),
    "acos": (np.arccos, FLOAT, "Elementwise arccosine."),
    "atan": (np.arctan, FLOAT, "Elementwise arctangent."),
    "sinh": (np.sinh, FLOAT, "Elementwise hyperbolic sine."),
    "cosh": (np.cosh, FLOAT, "Elementwise hyperbolic cosine."),
    "floor": (np.floor, ANY, "Elementwise floor (identity on integers)."),
    "ceil": (np.ceil, ANY, "Elementwise ceiling (identity on integers)."),
    "trunc": (np.trunc, ANY, "Elementwise rounding toward zero (identity on integers)."),
    "round": (_round_half_away, NUMERIC, "Elementwise rounding, halves away from zero as C round."),
    "logical_not": (np.logical_not, ANY, "Elementwise logical not (in the input dtype)."),
    "bitwise_not": (np.invert, INTEGER, "Elementwise bitwise not."),
    "copy": (np.copy, ANY, "A copy of the tensor."),
}


def _unary_rel(name: str, kind: tuple[str, Any]) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        _check_dtype(name, args[0].dtype, kind)
        return args[0]

    return rel


def _unary_ref(fn: Callable[[np.ndarray], Any]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: Any) -> np.ndarray:
        if np.issubdtype(x.dtype, np.integer) and fn in (np.floor, np.ceil, np.trunc):
            return x.copy()  # numpy would return float64 here
        return np.asarray(fn(x)).astype(x.dtype, copy=False)

    return ref


# compute rules (te): the topi function of each unary op, or one written here
Scalar = Callable[[PrimExpr], PrimExpr]


def _unary(name: str, fn: Scalar) -> Callable[[te.Tensor], te.Tensor]:
    def op(x: te.Tensor) -> te.Tensor:
        return te.compute(x.shape, lambda *i: fn(x(*i)), name=f"T_{name}", tag="elemwise")
    return op


def _bitwise_not(v: PrimExpr) -> PrimExpr:
    # Two's complement: ~v == -1 - v (no overflow even at the minimum); unsigned: MAX - v.
    if v.dtype == "bool":
        return tir.logical_not(v)
    if v.dtype.startswith("uint"):
        return tir.max_value(v.dtype) - v
    return tir.const(-1, v.dtype) - v


def _isfinite(v: PrimExpr) -> PrimExpr:
    if not tir.is_float(v.dtype):
        return tir.const(True)
    return tir.logical_not(tir.logical_or(tir.isnan(v), tir.isinf(v)))


_UNARY_TE: dict[str, Callable[[te.Tensor], te.Tensor]] = {
    "negative": topi.negative, "abs": topi.abs, "exp": topi.exp, "log": topi.log,
    "log2": topi.log2, "log10": topi.log10, "sqrt": topi.sqrt, "rsqrt": topi.rsqrt,
    "tanh": topi.tanh, "sigmoid": topi.sigmoid, "erf": topi.erf, "sin": topi.sin,
    "cos": topi.cos, "floor": topi.floor, "ceil": topi.ceil, "trunc": topi.trunc,
    "round": topi.round, "isnan": topi.isnan, "isinf": topi.isinf,
    "logical_not": topi.logical_not, "copy": topi.identity,
    "sign": topi.sign, "tan": _unary("tan", tir.tan), "isfinite": _unary("isfinite", _isfinite),
    "bitwise_not": _unary("bitwise_not", _bitwise_not),
    **{n: _unary(n, getattr(tir, n)) for n in ("asin", "acos", "atan", "sinh", "cosh")},
}


def _unary_rule(fn: Callable[[te.Tensor], te.Tensor]) -> Callable[..., list[te.Tensor]]:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        return [cast_to(fn(inputs[0]), out_type.dtype)]  # type: ignore[attr-defined]
    return rule


for _name, (_fn, _kind, _doc) in _UNARY.items():
    defop(_name, _unary_rel(_name, _kind), _unary_ref(_fn), ELEMWISE, doc=_doc,
          compute=_unary_rule(_UNARY_TE[_name]))
    _api(_name, ("data",), _doc)
_api("isnan", ("data",), "Elementwise test for NaN (bool result).")
_api("isinf", ("data",), "Elementwise test for +-inf (bool result).")
_api("isfinite", ("data",), "Elementwise test for finite values (bool result).")


def _predicate_rel(name: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        return tensor_of(args[0].shape, "bool")

    return rel


for _name, _fn in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
    defop(_name, _predicate_rel(_name), lambda x, attrs, f=_fn: f(x), ELEMWISE,
          doc=f"Elementwise {_name} test (bool result).", compute=_unary_rule(_UNARY_TE[_name]))


# ---------------------------------------------------------------- binary broadcasting ops
def _int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.floor_divide(a, b)
    # floor and truncation differ when the division is inexact and the signs differ.
    fix = (np.mod(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(q.dtype)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b) if np.issubdtype(a.dtype, np.floating) else _int_divide(a, b)


def _floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.floor(a / b) if np.issubdtype(a.dtype, np.floating) else np.floor_divide(a, b)


def _floor_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating):
        return a - np.floor(a / b) * b  # the formula the kernel evaluates
    return np.mod(a, b)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating):
        return np.power(a, b)
    # numpy refuses negative integer exponents; C computes pow in double and truncates.
    exact = np.power(a, np.maximum(b, 0))
    approx = np.trunc(np.power(a.astype(np.float64), b.astype(np.float64)))
    return np.where(b >= 0, exact, np.nan_to_num(approx).astype(a.dtype))


_BINARY: dict[str, tuple[Callable[..., Any], tuple[str, Any], bool, str]] = {
    # name: (numpy rule, accepted dtypes, returns bool, doc)
    "add": (np.add, ANY, False, "Elementwise lhs + rhs with numpy broadcasting."),
    "subtract": (np.subtract, NUMERIC, False, "Elementwise lhs - rhs with broadcasting."),
    "multiply": (np.multiply, ANY, False, "Elementwise lhs * rhs with broadcasting."),
    "divide": (_divide, ANY, False, "Elementwise lhs / rhs; integers truncate toward zero."),
    "floor_divide": (_floor_divide, ANY, False, "Elementwise floor(lhs / rhs)."),
    "mod": (np.fmod, ANY, False, "Elementwise C fmod: the result has the sign of lhs."),
    "floor_mod": (_floor_mod, ANY, False, "Elementwise lhs - floor(lhs / rhs) * rhs."),
    "power": (_power, ANY, False, "Elementwise lhs ** rhs."),
    "maximum": (np.maximum, ANY, False, "Elementwise maximum."),
    "minimum": (np.minimum, ANY, False, "Elementwise minimum."),
    "logical_and": (np.logical_and, ANY, False, "Elementwise logical and."),
    "logical_or": (np.logical_or, ANY, False, "Elementwise logical or."),
    "logical_xor": (np.logical_xor, ANY, False, "Elementwise logical xor."),
    "bitwise_and": (np.bitwise_and, INTEGER, False, "Elementwise bitwise and."),
    "bitwise_or": (np.bitwise_or, INTEGER, False, "Elementwise bitwise or."),
    "bitwise_xor": (np.bitwise_xor, INTEGER, False, "Elementwise bitwise xor."),
    "equal": (np.equal, ANY, True, "Elementwise lhs == rhs (bool result)."),
    "not_equal": (np.not_equal, ANY, True, "Elementwise lhs != rhs (bool result)."),
    "less": (np.less, ANY, True, "Elementwise lhs < rhs (bool result)."),
    "less_equal": (np.less_equal, ANY, True, "Elementwise lhs <= rhs (bool result)."),
    "greater": (np.greater, ANY, True, "Elementwise lhs > rhs (bool result)."),
    "greater_equal": (np.greater_equal, ANY, True, "Elementwise lhs >= rhs (bool result)."),
}


def _binary_rel(name: str, kind: tuple[str, Any], to_bool: bool) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        lhs, rhs = args
        dtype = same_dtype(name, args, ("lhs", "rhs"))
        _check_dtype(name, dtype, kind)
        shape = broadcast_shapes(name, lhs.shape, rhs.shape)
        return tensor_of(shape, "bool" if to_bool else dtype)

    return rel


def _binary_ref(fn: Callable[..., Any], to_bool: bool) -> Callable[..., np.ndarray]:
    def ref(a: np.ndarray, b: np.ndarray, attrs: Any) -> np.ndarray:
        out = np.asarray(fn(a, b))
        return out.astype(bool if to_bool else a.dtype, copy=False)

    return ref


# compute rules (te): the scalar rule of each binary op, which broadcast_compute applies
def _int_guard(fn: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Callable:
    """Integer x / 0 and x % 0 give 0 (numpy's answer), and a signed x / -1 is -x computed
    modulo 2**bits (x % -1 is 0), instead of a SIGFPE: C traps on both, and the smallest
    value divided by -1 overflows."""
    def rule(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if tir.is_float(a.dtype):
            return fn(a, b)
        zero, one = tir.const(0, b.dtype), tir.const(1, b.dtype)
        by_zero = tir.binary(EQ, b, zero)
        if not a.dtype.startswith("int"):
            return tir.Select_(by_zero, tir.const(0, a.dtype), fn(a, tir.Select_(by_zero, one, b)))
        by_minus_one = tir.binary(EQ, b, tir.const(-1, b.dtype))
        # the divisor the division sees is never 0 or -1, whichever way C evaluates selects
        out = fn(a, tir.Select_(tir.logical_or(by_zero, by_minus_one), one, b))
        unsigned = "u" + a.dtype
        negated = tir.cast(tir.const(0, unsigned) - tir.cast(a, unsigned), a.dtype)
        out = tir.Select_(by_minus_one, negated if fn in (tir.div, tir.floordiv)
                          else tir.const(0, a.dtype), out)
        return tir.Select_(by_zero, tir.const(0, a.dtype), out)
    return rule


def _pow_scalar(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if tir.is_float(a.dtype):
        return tir.pow(a, b)
    # C: pow in double, truncated to the integer type (numpy's integer power for b >= 0).
    return tir.cast(tir.pow(tir.cast(a, "float64"), tir.cast(b, "float64")), a.dtype)


def _bool_aware(arith: Callable, logic: Callable) -> Callable:
    """On bool tensors + and * are logical (numpy), not uint8 arithmetic."""
    return lambda a, b: logic(a, b) if a.dtype == "bool" else arith(a, b)


def _bitwise(combine: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Callable:
    """A bitwise op as a sum over bits: sum_k combine(bit_k(a), bit_k(b)) * 2**k.

    The operands are reinterpreted as uint64 (C's conversion is modulo 2**64, so the low bits
    are the two's complement bits); bit_k is (u / 2**k) % 2 in unsigned arithmetic, which the C
    compiler turns into a shift and a mask; the sum converts back to the dtype's low bits.
    """
    def rule(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        dtype = a.dtype
        if dtype == "bool":
            return tir.binary(NE, combine(tir.cast(a, "int32"), tir.cast(b, "int32")),
                              tir.const(0))
        x, y = tir.cast(a, "uint64"), tir.cast(b, "uint64")
        two = tir.const(2, "uint64")
        terms = []
        for k in range(tir.bits(dtype)):
            p = tir.const(2**k, "uint64")
            bx, by = tir.truncmod(tir.div(x, p), two), tir.truncmod(tir.div(y, p), two)
            terms.append(combine(bx, by) * p)
        while len(terms) > 1:  # a balanced sum keeps the expression shallow
            terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
        return tir.cast(terms[0], dtype)
    return rule


_BINARY_TE: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    "add": _bool_aware(lambda a, b: a + b, tir.logical_or),
    "subtract": lambda a, b: a - b,
    "multiply": _bool_aware(lambda a, b: a * b, tir.logical_and),
    "divide": _int_guard(tir.div),
    "floor_divide": _int_guard(tir.floordiv),
    "mod": _int_guard(tir.truncmod),
    "floor_mod": _int_guard(tir.floormod),
    "power": _pow_scalar,
    "maximum": _bool_aware(tir.max, tir.logical_or),
    "minimum": _bool_aware(tir.min, tir.logical_and),
    "logical_and": lambda a, b: tir.logical_and(tir.cast(a, "bool"), tir.cast(b, "bool")),
    "logical_or": lambda a, b: tir.logical_or(tir.cast(a, "bool"), tir.cast(b, "bool")),
    "logical_xor": lambda a, b: tir.binary(NE, tir.cast(a, "bool"), tir.cast(b, "bool")),
    "bitwise_and": _bitwise(lambda x, y: x * y),
    "bitwise_or": _bitwise(lambda x, y: x + y - x * y),
    "bitwise_xor": _bitwise(lambda x, y: tir.floormod(x + y, tir.const(2, x.dtype))),
    "equal": lambda a, b: tir.binary(EQ, a, b),
    "not_equal": lambda a, b: tir.binary(NE, a, b),
    "less": lambda a, b: a < b,
    "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
}


def broadcast_compute(name: str, args: list[Any], fn: Callable[..., PrimExpr],
                      dtype: str) -> te.Tensor:
    """``fn`` of the broadcast ``args`` (tensors or scalars) as one stage tagged broadcast."""
    shape = broadcast_dims(*[a.shape for a in args if isinstance(a, te.Tensor)])
    return te.compute(shape, lambda *i: tir.cast(fn(*[value_of(a, i, shape) for a in args]),
                                                 dtype), name=f"T_{name}", tag="broadcast")


def _binary_rule(name: str) -> Callable[..., list[te.Tensor]]:
    fn = _BINARY_TE[name]

    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        return [broadcast_compute(name, inputs, fn, out_type.dtype)]  # type: ignore[attr-defined]
    return rule


for _name, (_fn, _kind, _to_bool, _doc) in _BINARY.items():
    defop(_name, _binary_rel(_name, _kind, _to_bool), _binary_ref(_fn, _to_bool), BROADCAST,
          args=("lhs", "rhs"), doc=_doc, compute=_binary_rule(_name))
    _api(_name, ("lhs", "rhs"), _doc)


# ---------------------------------------------------------------- where, clip, cast
def _where_rel(args: list[TensorType], attrs: Any) -> TensorType:
    cond, x, y = args
    dtype = same_dtype("where", [x, y], ("x", "y"))
    shape = broadcast_shapes("where", cond.shape, broadcast_shapes("where", x.shape, y.shape))
    return tensor_of(shape, dtype)


def _where_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """``cond ? x : y``, the three broadcast together."""
    return [broadcast_compute("where", inputs, lambda c, x, y: tir.Select_(
        tir.cast(c, "bool"), x, y), out_type.dtype)]  # type: ignore[attr-defined]


defop("where", _where_rel, lambda c, x, y, attrs: np.where(c.astype(bool), x, y), BROADCAST,
      args=("condition", "x", "y"), doc="Pick x where condition is true, else y.",
      compute=_where_compute)
_api("where", ("condition", "x", "y"), "Elementwise select: x where condition, else y "
     "(the three shapes broadcast).")


def _clip_ref(x: np.ndarray, attrs: ClipAttrs) -> np.ndarray:
    lo, hi = attrs.a_min, attrs.a_max
    if np.issubdtype(x.dtype, np.integer):  # the bounds are cast to the tensor's dtype
        info = np.iinfo(x.dtype)
        lo, hi = max(lo, info.min), min(hi, info.max)
    return np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))


def _clip_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Clamp into [a_min, a_max]; for integers the bounds are first clamped to the dtype."""
    x = inputs[0]
    lo, hi = attrs.a_min, attrs.a_max
    if not tir.is_float(x.dtype):
        info = np.iinfo(x.dtype) if x.dtype != "bool" else None
        lo_i, hi_i = (0, 1) if info is None else (int(info.min), int(info.max))
        lo = int(max(lo, lo_i)) if lo != float("-inf") else lo_i
        hi = int(min(hi, hi_i)) if hi != float("inf") else hi_i
    a, b = tir.const(lo, x.dtype), tir.const(hi, x.dtype)
    return [te.compute(x.shape, lambda *i: tir.min(tir.max(x(*i), a), b), name="T_clip",
                       tag="elemwise")]


defop("clip", lambda args, attrs: args[0], _clip_ref, ELEMWISE, attrs=ClipAttrs,
      doc="Clamp every element into [a_min, a_max].", compute=_clip_compute)


def clip(a: Any, a_min: float, a_max: float) -> Call:
    """Clamp every element of ``a`` into ``[a_min, a_max]``."""
    return call("clip", a, attrs=ClipAttrs(a_min, a_max))


def _cast_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Convert to the output dtype (float to int truncates, as C does)."""
    return [topi.cast(inputs[0], out_type.dtype)]  # type: ignore[attr-defined]


defop("cast", lambda args, attrs: tensor_of(args[0].shape, attrs.dtype),
      lambda x, attrs: x.astype(attrs.dtype), ELEMWISE, attrs=CastAttrs,
      doc="Convert to another dtype.", compute=_cast_compute)
defop("cast_like", lambda args, attrs: tensor_of(args[0].shape, args[1].dtype),
      lambda x, like, attrs: x.astype(like.dtype), ELEMWISE, args=("data", "dtype_like"),
      doc="Convert to the dtype of a second tensor.", compute=_cast_compute)


def cast(data: Any, dtype: str) -> Call:
    """``data`` converted to ``dtype`` (any pair of dtypes; float to int truncates)."""
    return call("cast", data, attrs=CastAttrs(dtype))


def cast_like(data: Any, dtype_like: Any) -> Call:
    """``data`` converted to the dtype of ``dtype_like``."""
    return call("cast_like", data, dtype_like)


__all__ += ["cast", "cast_like", "clip"]
