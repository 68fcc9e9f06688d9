"""Gradient rules: ``register_gradient`` and one rule per differentiable operator.

A rule is ``rule(orig, grad) -> [grad of each argument]``: ``orig`` is the forward call (its
arguments are the forward values, and its and their ``checked_type_`` are set), ``grad`` the
gradient of the call's result. ``relay.transform.gradient`` and ``FirstOrderGradient`` read
the rules from the op registry (``FPrimalGradient``, TVM's attribute name), so a user adds or
overrides one with ``register_gradient(op_name, level=11)``, as in TVM. Broadcasting ops sum
their gradients back to each argument's shape with ``collapse_sum_like``. Ops whose result does
not vary smoothly with their inputs (comparisons, rounding, ``sign``, ``zeros_like``) give
zero gradients.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.expr import Call, RelayExpr, const
from ...ir.op import Op
from ...ir.types import TensorType
from ...runtime.errors import OpNotImplemented
from ._op_attr import get_rule, register_rule
from ._reg import resolve_attrs
from .reduce import reduce_axes

__all__ = ["get_gradient", "register_gradient"]

KEY = "FPrimalGradient"
Rule = Callable[[Call, RelayExpr], list[RelayExpr]]


def register_gradient(op_name: str, fgradient: Rule | None = None, level: int = 10) -> Any:
    """Register ``fgradient(orig, grad)`` as the gradient rule of ``op_name`` (a decorator when
    ``fgradient`` is omitted). A higher ``level`` overrides a rule; the same level again is an
    error, a lower one is ignored."""
    return register_rule("register_gradient", op_name, KEY, fgradient, level,
                         "(orig, grad) -> list of gradients")


def get_gradient(op_name: str) -> Rule | None:
    """The gradient rule of ``op_name``, or None."""
    return get_rule(op_name, KEY)


# -- building blocks ----------------------------------------------------------------------------
def _op(name: str, *args: RelayExpr, **attrs: Any) -> Call:
    op = Op.get(name)
    return Call(op, args, op.make_attrs(**attrs) if attrs else None)


def _attrs(orig: Call) -> Any:
    """The call's attrs record, with the op's defaults when the call has none."""
    op = orig.op
    return resolve_attrs(op.name, op.op_def.attrs_type, orig.attrs)  # type: ignore[union-attr]


def _ty(e: RelayExpr) -> TensorType:
    ty = e.checked_type_
    if not isinstance(ty, TensorType):
        raise OpNotImplemented(f"gradient: expected a typed tensor argument, got {ty}")
    return ty


def _c(value: float, like: RelayExpr) -> RelayExpr:
    return const(value, _ty(like).dtype)


def _csl(g: RelayExpr, x: RelayExpr, orig: Call) -> RelayExpr:
    """``g`` summed back to ``x``'s shape (left alone where no broadcasting happened)."""
    if tuple(_ty(x).shape) == tuple(_ty(orig).shape):
        return g
    return _op("collapse_sum_like", g, x)


def _zeros(orig: Call) -> list[RelayExpr]:
    return [_op("zeros_like", a) for a in orig.args]


def _unary(name: str, fn: Callable[[Call, RelayExpr, RelayExpr], RelayExpr]) -> None:
    register_gradient(name, lambda orig, grad: [fn(orig, orig.args[0], grad)])


# -- elementwise --------------------------------------------------------------------------------
for _name in ("floor", "ceil", "round", "trunc", "sign", "zeros_like", "ones_like",
              "full_like", "less", "less_equal", "greater", "greater_equal", "equal",
              "not_equal", "logical_not", "logical_and", "logical_or", "isnan", "isinf",
              "isfinite", "shape_of"):
    register_gradient(_name, lambda orig, grad: _zeros(orig))

_unary("negative", lambda o, x, g: _op("negative", g))
_unary("copy", lambda o, x, g: g)
_unary("cast", lambda o, x, g: _op("cast_like", g, x))
_unary("exp", lambda o, x, g: _op("multiply", g, o))
_unary("fast_exp", lambda o, x, g: _op("multiply", g, o))
_unary("log", lambda o, x, g: _op("divide", g, x))
_unary("log2", lambda o, x, g: _op("divide", g, _op("multiply", x, _c(math.log(2), x))))
_unary("log10", lambda o, x, g: _op("divide", g, _op("multiply", x, _c(math.log(10), x))))
_unary("sqrt", lambda o, x, g: _op("divide", _op("multiply", g, _c(0.5, x)), o))
_unary("rsqrt", lambda o, x, g: _op("multiply", _op("multiply", g, _c(-0.5, x)),
                                    _op("divide", o, x)))
_unary("sin", lambda o, x, g: _op("multiply", g, _op("cos", x)))
_unary("cos", lambda o, x, g: _op("negative", _op("multiply", g, _op("sin", x))))
_unary("tan", lambda o, x, g: _op("divide", g, _op("multiply", _op("cos", x), _op("cos", x))))
_unary("abs", lambda o, x, g: _op("multiply", g, _op("sign", x)))


def _one_minus(a: RelayExpr, like: RelayExpr) -> RelayExpr:
    return _op("subtract", _c(1.0, like), a)


def _tanh_grad(o: Call, x: RelayExpr, g: RelayExpr) -> RelayExpr:
    return _op("multiply", g, _one_minus(_op("multiply", o, o), x))


def _sigmoid_grad(o: Call, x: RelayExpr, g: RelayExpr) -> RelayExpr:
    return _op("multiply", g, _op("multiply", o, _one_minus(o, x)))


def _erf_grad(o: Call, x: RelayExpr, g: RelayExpr) -> RelayExpr:
    slope = _op("exp", _op("negative", _op("multiply", x, x)))
    return _op("multiply", g, _op("multiply", slope, _c(2 / math.sqrt(math.pi), x)))


for _name, _fn in (("tanh", _tanh_grad), ("fast_tanh", _tanh_grad), ("sigmoid", _sigmoid_grad),
                   ("erf", _erf_grad), ("fast_erf", _erf_grad)):
    _unary(_name, _fn)


def _where_positive(x: RelayExpr, g: RelayExpr, other: RelayExpr) -> RelayExpr:
    return _op("where", _op("greater", x, _c(0.0, x)), g, other)


_unary("nn.relu", lambda o, x, g: _where_positive(x, g, _op("zeros_like", g)))
_unary("nn.leaky_relu", lambda o, x, g: _where_positive(
    x, g, _op("multiply", g, _c(_attrs(o).alpha, x))))  # type: ignore[union-attr]


@register_gradient("clip")
def _clip_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    x, attrs = orig.args[0], _attrs(orig)
    inside = _op("logical_and", _op("greater_equal", x, _c(attrs.a_min, x)),  # type: ignore
                 _op("less_equal", x, _c(attrs.a_max, x)))  # type: ignore[union-attr]
    return [_op("where", inside, grad, _op("zeros_like", grad))]


# -- broadcasting binary ops --------------------------------------------------------------------
def _binary(name: str, fn: Callable[..., tuple[RelayExpr, RelayExpr]]) -> None:
    def rule(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
        x, y = orig.args
        gx, gy = fn(orig, x, y, grad)
        return [_csl(gx, x, orig), _csl(gy, y, orig)]
    register_gradient(name, rule)


_binary("add", lambda o, x, y, g: (g, g))
_binary("subtract", lambda o, x, y, g: (g, _op("negative", g)))
_binary("multiply", lambda o, x, y, g: (_op("multiply", g, y), _op("multiply", g, x)))
_binary("divide", lambda o, x, y, g: (
    _op("divide", g, y), _op("negative", _op("divide", _op("multiply", g, o), y))))
_binary("power", lambda o, x, y, g: (
    _op("multiply", _op("multiply", g, y), _op("power", x, _op("subtract", y, _c(1.0, y)))),
    _op("multiply", _op("multiply", g, o), _op("log", x))))


def _select(mask: RelayExpr, g: RelayExpr) -> tuple[RelayExpr, RelayExpr]:
    zero = _op("zeros_like", g)
    return _op("where", mask, g, zero), _op("where", mask, zero, g)


_binary("maximum", lambda o, x, y, g: _select(_op("greater_equal", x, y), g))
_binary("minimum", lambda o, x, y, g: _select(_op("less_equal", x, y), g))


@register_gradient("where")
def _where_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    cond, x, y = orig.args
    gx, gy = _select(cond, grad)
    return [_op("zeros_like", cond), _csl(gx, x, orig), _csl(gy, y, orig)]


# -- shape and layout ---------------------------------------------------------------------------
for _name in ("reshape", "squeeze", "expand_dims", "nn.batch_flatten"):
    register_gradient(_name, lambda orig, grad: [_op("reshape_like", grad, orig.args[0])])
register_gradient("reshape_like", lambda orig, grad: [
    _op("reshape_like", grad, orig.args[0]), _op("zeros_like", orig.args[1])])
register_gradient("broadcast_to", lambda orig, grad: [
    _op("collapse_sum_like", grad, orig.args[0])])
register_gradient("broadcast_to_like", lambda orig, grad: [
    _op("collapse_sum_like", grad, orig.args[0]), _op("zeros_like", orig.args[1])])
register_gradient("collapse_sum_like", lambda orig, grad: [
    _op("broadcast_to_like", grad, orig.args[0]), _op("zeros_like", orig.args[1])])


@register_gradient("transpose")
def _transpose_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    ndim = len(_ty(orig.args[0]).shape)
    axes = _attrs(orig).axes  # type: ignore[union-attr]
    perm = list(range(ndim))[::-1] if axes is None else [a % ndim for a in axes]
    return [_op("transpose", grad, axes=tuple(int(i) for i in np.argsort(perm)))]


# -- reductions ---------------------------------------------------------------------------------
def _spread(orig: Call, grad: RelayExpr) -> RelayExpr:
    """The gradient of a reduction's result spread back over the reduced axes."""
    x, attrs = orig.args[0], _attrs(orig)
    shape = list(_ty(x).shape)
    axes = reduce_axes(orig.op.name, len(shape), attrs)  # type: ignore[union-attr]
    if not attrs.keepdims:  # type: ignore[union-attr]
        kept = [1 if i in axes else d for i, d in enumerate(shape)]
        grad = _op("reshape", grad, newshape=tuple(int(d) for d in kept))
    return _op("broadcast_to_like", grad, x)


@register_gradient("sum")
def _sum_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    return [_spread(orig, grad)]


@register_gradient("mean")
def _mean_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    x = orig.args[0]
    shape = _ty(x).shape
    axes = reduce_axes("mean", len(shape), _attrs(orig))
    count = int(np.prod([shape[a] for a in axes])) if axes else 1
    return [_op("divide", _spread(orig, grad), _c(float(count), x))]


@register_gradient("nn.global_avg_pool2d")
def _global_avg_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    x = orig.args[0]
    layout = _attrs(orig).layout  # type: ignore[union-attr]
    shape = _ty(x).shape
    count = shape[layout.index("H")] * shape[layout.index("W")]
    return [_op("divide", _op("broadcast_to_like", grad, x), _c(float(count), x))]


# -- nn -----------------------------------------------------------------------------------------
@register_gradient("nn.bias_add")
def _bias_add_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    axis = _attrs(orig).axis  # type: ignore[union-attr]
    return [grad, _op("sum", grad, axis=(axis,), exclude=True)]


@register_gradient("nn.softmax")
def _softmax_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    axis = _attrs(orig).axis  # type: ignore[union-attr]
    dot = _op("sum", _op("multiply", grad, orig), axis=(axis,), keepdims=True)
    return [_op("multiply", _op("subtract", grad, dot), orig)]


@register_gradient("nn.log_softmax")
def _log_softmax_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    axis = _attrs(orig).axis  # type: ignore[union-attr]
    total = _op("sum", grad, axis=(axis,), keepdims=True)
    return [_op("subtract", grad, _op("multiply", total, _op("exp", orig)))]


@register_gradient("nn.dense")
def _dense_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    x, w = orig.args
    n, k = (int(d) for d in _ty(w).shape)
    dx = _op("nn.dense", grad, _op("transpose", w, axes=(1, 0)))
    g2, x2 = grad, x
    if len(_ty(x).shape) != 2:
        g2, x2 = _op("reshape", grad, newshape=(-1, n)), _op("reshape", x, newshape=(-1, k))
    dw = _op("nn.dense", _op("transpose", g2, axes=(1, 0)), _op("transpose", x2, axes=(1, 0)))
    return [dx, dw]


def _matmul_grads(name: str, orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    """out = op(a) @ op(b): d op(a) = grad @ op(b)^T, d op(b) = op(a)^T @ grad."""
    a, b = orig.args
    ta, tb = _attrs(orig).transpose_a, _attrs(orig).transpose_b  # type: ignore[union-attr]

    def mm(p: RelayExpr, q: RelayExpr, tp: bool, tq: bool) -> Call:
        return _op(name, p, q, transpose_a=tp, transpose_b=tq)

    da = mm(b, grad, tb, True) if ta else mm(grad, b, False, not tb)
    db = mm(grad, a, True, ta) if tb else mm(a, grad, not ta, False)
    fix = (lambda g, x: _op("collapse_sum_like", g, x)) if name == "nn.batch_matmul" else (
        lambda g, x: g)
    return [fix(da, a), fix(db, b)]


register_gradient("nn.batch_matmul", lambda o, g: _matmul_grads("nn.batch_matmul", o, g))
register_gradient("nn.matmul", lambda o, g: _matmul_grads("nn.matmul", o, g))


@register_gradient("nn.conv2d")
def _conv2d_grad(orig: Call, grad: RelayExpr) -> list[RelayExpr]:
    """NCHW/OIHW, groups=1: the data gradient is a transposed convolution of ``grad`` with the
    weight; the weight gradient is a convolution of the data (batch and channel axes
    swapped) with ``grad`` as the kernel, strides and dilation exchanged."""
    x, w = orig.args
    a = _attrs(orig)
    if (a.groups != 1 or a.data_layout != "NCHW" or a.kernel_layout != "OIHW"  # type: ignore
            or a.out_layout not in ("", "NCHW")):  # type: ignore[union-attr]
        raise OpNotImplemented(f"nn.conv2d gradient: only groups=1 with NCHW data and OIHW "
                               f"kernel is supported, got groups={a.groups}, "  # type: ignore
                               f"{a.data_layout}/{a.kernel_layout}")  # type: ignore[union-attr]
    _, c, h, wd = (int(d) for d in _ty(x).shape)
    o, _, kh, kw = (int(d) for d in _ty(w).shape)
    oh, ow = (int(d) for d in _ty(orig).shape[2:])
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a.strides, a.dilation, a.padding  # type: ignore
    extra_h = h - ((oh - 1) * sh - pt - pb + dh * (kh - 1) + 1)
    extra_w = wd - ((ow - 1) * sw - pl - pr + dw * (kw - 1) + 1)
    dx = _op("nn.conv2d_transpose", grad, w, strides=a.strides, padding=a.padding,  # type: ignore
             dilation=a.dilation, output_padding=(extra_h, extra_w),  # type: ignore
             channels=c, kernel_size=(kh, kw))
    swapped = _op("nn.conv2d", _op("transpose", x, axes=(1, 0, 2, 3)),
                  _op("transpose", grad, axes=(1, 0, 2, 3)), strides=a.dilation,  # type: ignore
                  padding=a.padding, dilation=a.strides)  # type: ignore[union-attr]
    dwt = _op("transpose", swapped, axes=(1, 0, 2, 3))
    dwt = _op("strided_slice", dwt, begin=(0, 0), end=(kh, kw), axes=(2, 3))
    return [dx, dwt]
