"""Compute rules of the elementwise and broadcasting ops (tensor.py): math, comparison,
logical and bitwise ops, where, clip, cast.

Unary math goes through ``topi``'s elementwise ops. Binary ops build their own broadcast
stage (tag ``broadcast``, as topi's) for two reasons: a symbolic dimension broadcast against
another may be 1 at run time (topi assumes it is not), and integer division or remainder by
zero yields 0 as in the numpy reference instead of trapping. The loop IR has no bitwise
operators, so bitwise and/or/xor are spelled bit by bit with integer arithmetic.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .... import topi
from ....ir.types import Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import EQ, NE, PrimExpr
from ._common import broadcast_dims, cast_to, register_compute, value_of

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


_UNARY: dict[str, Callable[[te.Tensor], te.Tensor]] = {
    "negative": topi.negative, "abs": topi.abs, "exp": topi.exp, "log": topi.log,
    "log2": topi.log2, "log10": topi.log10, "sqrt": topi.sqrt, "rsqrt": topi.rsqrt,
    "tanh": topi.tanh, "sigmoid": topi.sigmoid, "erf": topi.erf, "sin": topi.sin,
    "cos": topi.cos, "floor": topi.floor, "ceil": topi.ceil, "trunc": topi.trunc,
    "round": topi.round, "isnan": topi.isnan, "isinf": topi.isinf, "nn.relu": topi.nn.relu,
    "logical_not": topi.logical_not, "copy": topi.identity,
    "annotation.stop_fusion": topi.identity,
    "sign": topi.sign, "tan": _unary("tan", tir.tan), "isfinite": _unary("isfinite", _isfinite),
    "bitwise_not": _unary("bitwise_not", _bitwise_not),
}


def _unary_rule(fn: Callable[[te.Tensor], te.Tensor]) -> Callable[..., list[te.Tensor]]:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        return [cast_to(fn(inputs[0]), out_type.dtype)]  # type: ignore[attr-defined]
    return rule


for _name, _fn in _UNARY.items():
    register_compute(_name)(_unary_rule(_fn))


# ---------------------------------------------------------------- binary
def _int_guard(fn: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Callable:
    """Integer x / 0 and x % 0 give 0 (numpy's answer) instead of a SIGFPE."""
    def rule(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if tir.is_float(a.dtype):
            return fn(a, b)
        zero = tir.const(0, b.dtype)
        safe = tir.Select_(tir.binary(EQ, b, zero), tir.const(1, b.dtype), b)
        return tir.Select_(tir.binary(EQ, b, zero), tir.const(0, a.dtype), fn(a, safe))
    return rule


def _power(a: PrimExpr, b: PrimExpr) -> PrimExpr:
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


_BINARY: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    "add": _bool_aware(lambda a, b: a + b, tir.logical_or),
    "subtract": lambda a, b: a - b,
    "multiply": _bool_aware(lambda a, b: a * b, tir.logical_and),
    "divide": _int_guard(tir.div),
    "floor_divide": _int_guard(tir.floordiv),
    "mod": _int_guard(tir.truncmod),
    "floor_mod": _int_guard(tir.floormod),
    "power": _power,
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
    fn = _BINARY[name]

    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        return [broadcast_compute(name, inputs, fn, out_type.dtype)]  # type: ignore[attr-defined]
    return rule


for _name in _BINARY:
    register_compute(_name)(_binary_rule(_name))


@register_compute("where")
def where(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """``cond ? x : y``, the three broadcast together."""
    return [broadcast_compute("where", inputs, lambda c, x, y: tir.Select_(
        tir.cast(c, "bool"), x, y), out_type.dtype)]  # type: ignore[attr-defined]


@register_compute("clip")
def clip(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
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


@register_compute("cast", "cast_like")
def cast(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Convert to the output dtype (float to int truncates, as C does)."""
    return [topi.cast(inputs[0], out_type.dtype)]  # type: ignore[attr-defined]


@register_compute("nn.leaky_relu")
def leaky_relu(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.nn.leaky_relu(inputs[0], attrs.alpha)]


@register_compute("nn.prelu")
def prelu(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.nn.prelu(inputs[0], inputs[1], attrs.axis)]


@register_compute("nn.bias_add")
def bias_add(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.nn.bias_add(inputs[0], inputs[1], attrs.axis)]
