"""Converters of the elementwise operators: arithmetic, comparison and logic, activations
(decomposed as Relay-era TVM did: Gelu through erf, HardSwish, Softplus, Elu, ...), Clip,
Cast, Where and the variadic Min/Max/Sum/Mean."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from ...op.bitcast import WIDTH
from ._node import Node
from ._util import scalar

Converter = Callable[[Node], Any]


def _float_input(node: Node, i: int = 0) -> tuple[RelayExpr, str]:
    x, dtype = node.input(i), node.dtype(i)
    if not dtype.startswith("float"):
        raise node.fail(f"input {i} must be a floating-point tensor, got {dtype}")
    return x, dtype


# ---------------------------------------------------------------- plain unary and binary
def unary(relay_name: str) -> Converter:
    """``op(x)`` for the Relay op ``relay_name`` (``relay.exp``, ``relay.nn.relu``, ...)."""
    fn = _op.nn.relu if relay_name == "nn.relu" else getattr(_op, relay_name)

    def convert(node: Node) -> RelayExpr:
        return fn(node.input(0))

    convert.__name__ = f"convert_{relay_name.replace('.', '_')}"
    return convert


def binary(relay_name: str) -> Converter:
    """``op(a, b)`` with numpy broadcasting (every ONNX binary op since version 7; before,
    ``legacy_broadcast``)."""
    fn = getattr(_op, relay_name)

    def convert(node: Node) -> RelayExpr:
        return fn(node.input(0), legacy_broadcast(node))

    convert.__name__ = f"convert_{relay_name}"
    return convert


def legacy_broadcast(node: Node) -> RelayExpr:
    """Input 1 of a binary op, aligned for numpy broadcasting against input 0. Before version
    7, ``broadcast=1`` with ``axis`` placed B's axes at A's axis ``axis`` (B of shape (3,)
    against A of shape (2, 3, 4) at axis 1): B gets trailing unit axes. Without ``axis`` the
    alignment is numpy's (trailing axes); without ``broadcast`` the shapes must be equal,
    which numpy broadcasting accepts as well."""
    b = node.input(1)
    if node.version >= 7 or not node.attr("broadcast", 0) or not node.has_attr("axis"):
        return b
    rank_a, rank_b = node.ndim(0), node.ndim(1)
    axis = node.attr("axis")
    axis = axis + rank_a if axis < 0 else axis
    if not 0 <= axis <= rank_a - rank_b:
        raise node.fail(f"axis {node.attr('axis')} does not place B (rank {rank_b}) inside A "
                        f"(rank {rank_a})")
    trailing = rank_a - rank_b - axis
    return _op.expand_dims(b, rank_b, trailing) if trailing and rank_b else b


def identity(node: Node) -> RelayExpr:
    node.set_sym(node.sym(0))
    return node.input(0)


def reciprocal(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    return _op.divide(scalar(1.0, dtype), x)


def pow_(node: Node) -> RelayExpr:
    """Pow: the exponent may have another dtype (opset 12+); it is cast to the base's."""
    base, exp = node.input(0), legacy_broadcast(node)
    if node.dtype(1) != node.dtype(0):
        exp = _op.cast(exp, node.dtype(0))
    return _op.power(base, exp)


def mod(node: Node) -> RelayExpr:
    """Mod: fmod=1 is C fmod (sign of the dividend), fmod=0 integer floor modulo."""
    fmod = node.attr("fmod", 0)
    if not fmod and node.dtype(0).startswith("float"):
        raise node.fail("fmod=0 is only defined for integer inputs (use fmod=1 for floats)")
    return (_op.mod if fmod else _op.floor_mod)(node.input(0), node.input(1))


def round_half_even(node: Node) -> RelayExpr:
    """Round: ties to even (Relay's round breaks ties away from zero, C's round)."""
    x, dtype = _float_input(node)
    return round_half_even_expr(x, dtype)


def round_half_even_expr(x: RelayExpr, dtype: str) -> RelayExpr:
    """``x`` (floating ``dtype``) rounded to the nearest integer, ties to even: one
    ``round_half_even`` (C ``nearbyint``) for float32/64; for float16, round (ties away from
    zero) with the ties moved back to even."""
    if dtype in ("float32", "float64"):
        return _op.round_half_even(x)
    r = _op.round(x)
    tie = _op.equal(_op.abs(_op.subtract(x, _op.trunc(x))), scalar(0.5, dtype))
    odd = _op.not_equal(_op.floor_mod(r, scalar(2.0, dtype)), scalar(0.0, dtype))
    fix = _op.where(_op.logical_and(tie, odd), _op.sign(x), scalar(0.0, dtype))
    return _op.subtract(r, fix)


def swish(node: Node) -> RelayExpr:
    """x * sigmoid(alpha * x)."""
    x, dtype = _float_input(node)
    return _op.multiply(x, _op.sigmoid(_op.multiply(x, scalar(node.attr("alpha", 1.0), dtype))))


def asinh(node: Node) -> RelayExpr:
    """log(x + sqrt(x^2 + 1))."""
    x, dtype = _float_input(node)
    return _op.log(_op.add(x, _op.sqrt(_op.add(_op.multiply(x, x), scalar(1.0, dtype)))))


def acosh(node: Node) -> RelayExpr:
    """log(x + sqrt(x^2 - 1)) (NaN below 1)."""
    x, dtype = _float_input(node)
    return _op.log(_op.add(x, _op.sqrt(_op.subtract(_op.multiply(x, x), scalar(1.0, dtype)))))


def atanh(node: Node) -> RelayExpr:
    """log((1 + x) / (1 - x)) / 2."""
    x, dtype = _float_input(node)
    one = scalar(1.0, dtype)
    ratio = _op.divide(_op.add(one, x), _op.subtract(one, x))
    return _op.multiply(_op.log(ratio), scalar(0.5, dtype))


def is_inf(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    inf = _op.isinf(x)
    if pos and neg:
        return inf
    if not pos and not neg:
        return _op.zeros_like(_op.cast(x, "bool"))
    side = _op.greater(x, scalar(0, dtype)) if pos else _op.less(x, scalar(0, dtype))
    return _op.logical_and(inf, side)


# ---------------------------------------------------------------- variadic
def variadic(relay_name: str) -> Converter:
    """Max/Min/Sum over any number of broadcast inputs."""
    fn = getattr(_op, relay_name)

    def convert(node: Node) -> RelayExpr:
        xs = node.inputs()
        if not xs:
            raise node.fail("needs at least one input")
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out

    convert.__name__ = f"convert_{relay_name}"
    return convert


def mean(node: Node) -> RelayExpr:
    xs = node.inputs()
    if not xs:
        raise node.fail("needs at least one input")
    out = xs[0]
    for x in xs[1:]:
        out = _op.add(out, x)
    return _op.divide(out, scalar(len(xs), node.dtype(0)))


# ---------------------------------------------------------------- activations
def leaky_relu(node: Node) -> RelayExpr:
    return _op.nn.leaky_relu(node.input(0), node.attr("alpha", 0.01))


def prelu(node: Node) -> RelayExpr:
    """PRelu: the slope broadcasts to x (unidirectionally), so it is any shape, not only
    per channel: ``x < 0 ? x * slope : x``; before version 7, a vector is per channel."""
    x, slope = node.input(0), node.input(1)
    dtype = node.dtype(0)
    if node.version < 7 and node.ndim(1) == 1 and node.ndim(0) > 2:
        # before version 7 a vector of slopes is one per channel (axis 1), as torch wrote it
        slope = _op.reshape(slope, [-1] + [1] * (node.ndim(0) - 2))
    return _op.where(_op.less(x, scalar(0, dtype)), _op.multiply(x, slope), x)


def elu(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    alpha = node.attr("alpha", 1.0)
    neg = _op.multiply(scalar(alpha, dtype), _op.subtract(_op.exp(x), scalar(1, dtype)))
    return _op.where(_op.greater(x, scalar(0, dtype)), x, neg)


def selu(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    alpha = node.attr("alpha", 1.67326319217681884765625)
    gamma = node.attr("gamma", 1.05070102214813232421875)
    neg = _op.multiply(scalar(alpha, dtype), _op.subtract(_op.exp(x), scalar(1, dtype)))
    return _op.multiply(scalar(gamma, dtype),
                        _op.where(_op.greater(x, scalar(0, dtype)), x, neg))


def celu(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    alpha = node.attr("alpha", 1.0)
    neg = _op.multiply(scalar(alpha, dtype), _op.subtract(
        _op.exp(_op.divide(x, scalar(alpha, dtype))), scalar(1, dtype)))
    return _op.add(_op.nn.relu(x), _op.minimum(scalar(0, dtype), neg))


def thresholded_relu(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    alpha = node.attr("alpha", 1.0)
    return _op.where(_op.greater(x, scalar(alpha, dtype)), x, scalar(0, dtype))


def hard_sigmoid(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    alpha, beta = node.attr("alpha", 0.2), node.attr("beta", 0.5)
    return _clip01(_op.add(_op.multiply(x, scalar(alpha, dtype)), scalar(beta, dtype)))


def hard_swish(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    gate = _clip01(_op.add(_op.multiply(x, scalar(1 / 6, dtype)), scalar(0.5, dtype)))
    return _op.multiply(x, gate)


def _clip01(x: RelayExpr) -> RelayExpr:
    return _op.clip(x, 0.0, 1.0)


def softplus_expr(x: RelayExpr, dtype: str) -> RelayExpr:
    """log(1 + exp(x)) without overflow: relu(x) + log(1 + exp(-|x|))."""
    tail = _op.log(_op.add(scalar(1, dtype), _op.exp(_op.negative(_op.abs(x)))))
    return _op.add(_op.nn.relu(x), tail)


def softplus(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    return softplus_expr(x, dtype)


def softsign(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    return _op.divide(x, _op.add(scalar(1, dtype), _op.abs(x)))


def mish(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    return _op.multiply(x, _op.tanh(softplus_expr(x, dtype)))


def gelu(node: Node) -> RelayExpr:
    """Gelu (opset 20): exact through erf, or the tanh approximation."""
    x, dtype = _float_input(node)
    return gelu_expr(x, dtype, node.choice("approximate", "none", ("none", "tanh")))


def gelu_expr(x: RelayExpr, dtype: str, approx: str) -> RelayExpr:
    """0.5 x (1 + erf(x / sqrt(2))), or with ``approx`` "tanh" the tanh approximation."""
    half, one = scalar(0.5, dtype), scalar(1.0, dtype)
    if approx == "none":
        inner = _op.erf(_op.multiply(x, scalar(1 / math.sqrt(2), dtype)))
    else:
        cube = _op.multiply(_op.multiply(x, x), x)
        poly = _op.add(x, _op.multiply(scalar(0.044715, dtype), cube))
        inner = _op.tanh(_op.multiply(scalar(math.sqrt(2 / math.pi), dtype), poly))
    return _op.multiply(_op.multiply(half, x), _op.add(one, inner))


def shrink(node: Node) -> RelayExpr:
    x, dtype = node.input(0), node.dtype(0)
    lambd, bias = node.attr("lambd", 0.5), node.attr("bias", 0.0)
    low = _op.add(x, scalar(bias, dtype))
    high = _op.subtract(x, scalar(bias, dtype))
    zero = _op.zeros_like(x)
    return _op.where(_op.less(x, scalar(-lambd, dtype)), low,
                     _op.where(_op.greater(x, scalar(lambd, dtype)), high, zero))


# ---------------------------------------------------------------- clip, cast, where
def clip(node: Node) -> RelayExpr:
    """Clip: min and max are optional inputs (opset 11+). Constant float bounds give
    ``relay.clip``; others maximum then minimum (so min > max gives max everywhere, as in
    ONNX)."""
    x, dtype = node.input(0), node.dtype(0)
    lo, hi = node.value(1), node.value(2)
    dynamic = (node.has_input(1) and lo is None) or (node.has_input(2) and hi is None)
    if dtype.startswith("float") and not dynamic:
        a_min = -np.inf if lo is None else float(np.asarray(lo).reshape(-1)[0])
        a_max = np.inf if hi is None else float(np.asarray(hi).reshape(-1)[0])
        if a_min <= a_max:
            return _op.clip(x, a_min, a_max)
    out = x
    if node.has_input(1):
        out = _op.maximum(out, node.input(1))
    if node.has_input(2):
        out = _op.minimum(out, node.input(2))
    return out


def cast(node: Node) -> RelayExpr:
    from ._proto import dtype_of, type_code

    to = node.attr("to")
    if isinstance(to, str):  # Cast-1 names the type ("FLOAT")
        to = type_code(to, f"{node.label}: attribute to")
    dtype = dtype_of(to, f"{node.label}: attribute to")
    sym = node.sym(0)
    if sym is not None and dtype.startswith(("int", "uint")):
        node.set_sym(sym)
    if to == 10:  # float16 is computed in float32 (_narrow.py): round, then widen again
        return _op.cast(_op.cast(node.input(0), "float16"), dtype)
    return _op.cast(node.input(0), dtype)


def cast_like(node: Node) -> RelayExpr:
    return _op.cast(node.input(0), node.dtype(1))


def where(node: Node) -> RelayExpr:
    return _op.where(node.input(0), node.input(1), node.input(2))


def bit_cast(node: Node) -> RelayExpr:
    """BitCast: relay ``reinterpret`` (the same bits read as ``to``, of the same width)."""
    from ._proto import dtype_of

    src, to = node.dtype(0), dtype_of(node.attr("to"), f"{node.label}: attribute to")
    narrow = node.attr("to") in (10, 16)  # float16, bfloat16: carried as float32 here
    if narrow or src not in WIDTH or to not in WIDTH:
        raise node.unsupported(f"bit casts of {src} to element type {node.attr('to')} are not "
                               f"supported (supported: {', '.join(WIDTH)})")
    if WIDTH[src] != WIDTH[to]:
        raise node.fail(f"input is {src} ({WIDTH[src]} bits) but 'to' is {to} "
                        f"({WIDTH[to]} bits); BitCast needs the same width")
    return _op.reinterpret(node.input(0), to)
