"""Elementwise unary math and broadcasting binary operators (numpy broadcasting rules).

Unary ops are tagged ``elemwise``, binary ones ``broadcast``: the schedules inline them and
the anchor templates fuse them into their output loops.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime.errors import OpError
from ..te import tensor as te
from ..tir import op as tir
from ..tir.expr import EQ, NE, IntImm, PrimExpr

ELEMWISE, BROADCAST, INJECTIVE = "elemwise", "broadcast", "injective"


def _dims_equal(a: PrimExpr, b: PrimExpr) -> bool:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    return a is b or str(a) == str(b)


def broadcast_shape(name: str, sa: tuple, sb: tuple) -> tuple:
    """The numpy broadcast of two shapes; raises naming the op and the clashing dimension."""
    n = max(len(sa), len(sb))
    pa = (tir.const(1),) * (n - len(sa)) + tuple(sa)
    pb = (tir.const(1),) * (n - len(sb)) + tuple(sb)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if _dims_equal(x, y) or (isinstance(y, IntImm) and y.value == 1):
            out.append(x)
        elif isinstance(x, IntImm) and x.value == 1:
            out.append(y)
        elif isinstance(x, IntImm) and isinstance(y, IntImm):
            raise OpError(f"{name}: cannot broadcast {_fmt(sa)} with {_fmt(sb)}: dimension "
                          f"{i - n} is {x.value} vs {y.value}")
        else:
            out.append(tir.max(x, y))
    return tuple(out)


def _fmt(shape: tuple) -> str:
    dims = [str(d) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def broadcast_index(t: te.Tensor, out_idx: tuple) -> tuple:
    """Indices into ``t`` for the output point ``out_idx`` (size-1 dims read index 0)."""
    off = len(out_idx) - t.ndim
    return tuple(tir.const(0) if isinstance(d, IntImm) and d.value == 1 else out_idx[off + i]
                 for i, d in enumerate(t.shape))


def _value(x: Any, idx: tuple) -> PrimExpr:
    return x(*broadcast_index(x, idx)) if isinstance(x, te.Tensor) else tir.convert(x)


def broadcast_binary(name: str, fn: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Callable:
    """A topi binary op from a scalar rule; either side may be a tensor or a scalar."""

    def op(a: Any, b: Any) -> Any:
        if not isinstance(a, te.Tensor) and not isinstance(b, te.Tensor):
            return fn(tir.convert(a), tir.convert(b))
        sa = a.shape if isinstance(a, te.Tensor) else ()
        sb = b.shape if isinstance(b, te.Tensor) else ()
        shape = broadcast_shape(name, sa, sb)
        return te.compute(shape, lambda *i: fn(_value(a, i), _value(b, i)), name=f"T_{name}",
                          tag=BROADCAST)

    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` with numpy broadcasting."
    return op


def _div(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return tir.div(a, b)


def _logical(fn: Callable) -> Callable:
    return lambda a, b: fn(tir.cast(a, "bool"), tir.cast(b, "bool"))


add = broadcast_binary("add", lambda a, b: a + b)
subtract = broadcast_binary("subtract", lambda a, b: a - b)
multiply = broadcast_binary("multiply", lambda a, b: a * b)
divide = broadcast_binary("divide", _div)
floor_divide = broadcast_binary("floor_divide", tir.floordiv)
mod = broadcast_binary("mod", tir.truncmod)
floor_mod = broadcast_binary("floor_mod", tir.floormod)
power = broadcast_binary("power", tir.pow)
maximum = broadcast_binary("maximum", tir.max)
minimum = broadcast_binary("minimum", tir.min)
equal = broadcast_binary("equal", lambda a, b: tir.binary(EQ, a, b))
not_equal = broadcast_binary("not_equal", lambda a, b: tir.binary(NE, a, b))
less = broadcast_binary("less", lambda a, b: a < b)
less_equal = broadcast_binary("less_equal", lambda a, b: a <= b)
greater = broadcast_binary("greater", lambda a, b: a > b)
greater_equal = broadcast_binary("greater_equal", lambda a, b: a >= b)
logical_and = broadcast_binary("logical_and", _logical(tir.logical_and))
logical_or = broadcast_binary("logical_or", _logical(tir.logical_or))
logical_xor = broadcast_binary("logical_xor", _logical(lambda a, b: tir.binary(NE, a, b)))


def unary(name: str, fn: Callable[[PrimExpr], PrimExpr]) -> Callable:
    """A topi elementwise op from a scalar rule."""

    def op(x: te.Tensor) -> te.Tensor:
        return te.compute(x.shape, lambda *i: fn(x(*i)), name=f"T_{name}", tag=ELEMWISE)

    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}``."
    return op


def _float_only(name: str, fn: Callable) -> Callable:
    def g(v: PrimExpr) -> PrimExpr:
        if not tir.is_float(v.dtype):
            raise OpError(f"{name}: expected a float tensor, got {v.dtype}")
        return fn(v)
    return g


def _sign(v: PrimExpr) -> PrimExpr:
    zero = tir.const(0, v.dtype)
    return tir.Select_(v > zero, tir.const(1, v.dtype),
                       tir.Select_(v < zero, tir.const(-1, v.dtype), zero))


exp = unary("exp", _float_only("exp", tir.exp))
log = unary("log", _float_only("log", tir.log))
log2 = unary("log2", _float_only("log2", tir.log2))
log10 = unary("log10", _float_only("log10", tir.log10))
sqrt = unary("sqrt", _float_only("sqrt", tir.sqrt))
rsqrt = unary("rsqrt", _float_only("rsqrt", tir.rsqrt))
tanh = unary("tanh", _float_only("tanh", tir.tanh))
erf = unary("erf", _float_only("erf", tir.erf))
sigmoid = unary("sigmoid", _float_only("sigmoid", tir.sigmoid))
sin = unary("sin", _float_only("sin", tir.sin))
cos = unary("cos", _float_only("cos", tir.cos))
floor = unary("floor", lambda v: tir.floor(v) if tir.is_float(v.dtype) else v)
ceil = unary("ceil", lambda v: tir.ceil(v) if tir.is_float(v.dtype) else v)
round = unary("round", lambda v: tir.round(v) if tir.is_float(v.dtype) else v)
trunc = unary("trunc", lambda v: tir.trunc(v) if tir.is_float(v.dtype) else v)
abs = unary("abs", tir.abs)
negative = unary("negative", lambda v: tir.const(0, v.dtype) - v)
sign = unary("sign", _sign)
isnan = unary("isnan", tir.isnan)
isinf = unary("isinf", tir.isinf)
logical_not = unary("logical_not", lambda v: tir.logical_not(tir.cast(v, "bool")))
identity = unary("identity", lambda v: v)


def cast(x: te.Tensor, dtype: str) -> te.Tensor:
    """Convert every element to ``dtype`` (float -> int truncates toward zero, as C)."""
    return te.compute(x.shape, lambda *i: tir.cast(x(*i), dtype), name="T_cast", tag=ELEMWISE)


def clip(x: te.Tensor, a_min: Any, a_max: Any) -> te.Tensor:
    """Limit every element to ``[a_min, a_max]``."""
    lo, hi = tir.const(a_min, x.dtype), tir.const(a_max, x.dtype)
    return te.compute(x.shape, lambda *i: tir.min(tir.max(x(*i), lo), hi), name="T_clip",
                      tag=ELEMWISE)


def where(cond: Any, x: Any, y: Any) -> te.Tensor:
    """``cond ? x : y`` elementwise, all three broadcast together."""
    shapes = [t.shape for t in (cond, x, y) if isinstance(t, te.Tensor)]
    shape: tuple = ()
    for s in shapes:
        shape = broadcast_shape("where", shape, s)
    return te.compute(shape, lambda *i: tir.Select_(
        tir.cast(_value(cond, i), "bool"), _value(x, i), _value(y, i)), name="T_where",
        tag=BROADCAST)


def full(shape: Any, dtype: str, fill_value: Any) -> te.Tensor:
    """A tensor of ``shape`` filled with ``fill_value``."""
    v = tir.const(fill_value, dtype) if not isinstance(fill_value, PrimExpr) else tir.cast(
        fill_value, dtype)
    return te.compute(shape, lambda *i: v, name="T_full", tag=ELEMWISE)


def full_like(x: te.Tensor, fill_value: Any) -> te.Tensor:
    return full(x.shape, x.dtype, fill_value)


def zeros(shape: Any, dtype: str = "float32") -> te.Tensor:
    return full(shape, dtype, 0)


def ones(shape: Any, dtype: str = "float32") -> te.Tensor:
    return full(shape, dtype, 1)


def broadcast_to(x: te.Tensor, shape: Any) -> te.Tensor:
    """Broadcast ``x`` to ``shape`` (numpy rules)."""
    shape = tuple(tir.convert(s) for s in shape)
    out = broadcast_shape("broadcast_to", x.shape, shape)
    return te.compute(out, lambda *i: x(*broadcast_index(x, i)), name="T_broadcast_to",
                      tag=BROADCAST)


def elemwise_sum(xs: Any) -> te.Tensor:
    """The elementwise sum of a list of tensors of one shape and dtype (TVM's elemwise_sum)."""
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    if not xs or not all(isinstance(x, te.Tensor) for x in xs):
        raise OpError("elemwise_sum: expected a non-empty list of te tensors, got "
                      f"{[type(x).__name__ for x in xs]}")
    for k, x in enumerate(xs[1:], 1):
        same = len(x.shape) == len(xs[0].shape) and all(
            _dims_equal(a, b) for a, b in zip(x.shape, xs[0].shape))
        if not same or x.dtype != xs[0].dtype:
            raise OpError(f"elemwise_sum: tensor {k} is {x.dtype}{_fmt(x.shape)}, tensor 0 is "
                          f"{xs[0].dtype}{_fmt(xs[0].shape)}; all must have one shape and dtype")

    def total(*i: Any) -> PrimExpr:
        out = xs[0](*i)
        for x in xs[1:]:
            out = out + x(*i)
        return out
    return te.compute(xs[0].shape, total, name="T_elemwise_sum", tag=ELEMWISE)


__all__ = [n for n, v in list(globals().items()) if callable(v) and not n.startswith("_")
           and getattr(v, "__module__", None) == __name__ and not isinstance(v, type)]
