"""Reductions over axes: sum, mean, max, min, prod, all, any, argmax, argmin, variance, std.

Every reduction takes ``axis`` (int, list or None for all), ``keepdims`` and ``exclude``
(reduce over the axes *not* listed), as Relay's reduce ops do. Tag: ``comm_reduce``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..runtime.errors import OpError
from ..te import tensor as te
from ..tir import op as tir
from ..tir.expr import PrimExpr
from .broadcast import ELEMWISE

REDUCE = "comm_reduce"


def reduce_axes(name: str, ndim: int, axis: Any, exclude: bool = False) -> list[int]:
    """Normalised, sorted reduction axes."""
    if axis is None:
        axes = list(range(ndim))
    else:
        raw = [axis] if isinstance(axis, int) else list(axis)
        axes = []
        for a in raw:
            if not -ndim <= a < ndim:
                raise OpError(f"{name}: axis {a} is out of range for rank {ndim}")
            axes.append(a % ndim)
    axes = sorted(set(axes))
    return [i for i in range(ndim) if i not in axes] if exclude else axes


def _reduce(name: str, x: te.Tensor, axis: Any, keepdims: bool, exclude: bool,
            body: Callable[[PrimExpr, list], Any]) -> Any:
    axes = reduce_axes(name, x.ndim, axis, exclude)
    shape = tuple(tir.const(1) if i in axes else d for i, d in enumerate(x.shape)
                  if keepdims or i not in axes)

    def f(*idx: PrimExpr) -> Any:
        rvs = [te.reduce_axis((0, x.shape[a]), f"k{a}") for a in axes]
        it, rit = iter(idx), iter(rvs)
        src = []
        for i in range(x.ndim):
            if i in axes:
                if keepdims:
                    next(it)
                src.append(next(rit).var)
            else:
                src.append(next(it))
        return body(x(*src), rvs)

    return te.compute(shape, f, name=f"T_{name}", tag=REDUCE)


def sum(x: te.Tensor, axis: Any = None, keepdims: bool = False,
        exclude: bool = False) -> te.Tensor:
    """Sum over ``axis``."""
    return _reduce("sum", x, axis, keepdims, exclude, lambda v, k: te.sum(v, axis=k))


def max(x: te.Tensor, axis: Any = None, keepdims: bool = False,
        exclude: bool = False) -> te.Tensor:
    """Maximum over ``axis``."""
    return _reduce("max", x, axis, keepdims, exclude, lambda v, k: te.max(v, axis=k))


def min(x: te.Tensor, axis: Any = None, keepdims: bool = False,
        exclude: bool = False) -> te.Tensor:
    """Minimum over ``axis``."""
    return _reduce("min", x, axis, keepdims, exclude, lambda v, k: te.min(v, axis=k))


def prod(x: te.Tensor, axis: Any = None, keepdims: bool = False,
         exclude: bool = False) -> te.Tensor:
    """Product over ``axis``."""
    return _reduce("prod", x, axis, keepdims, exclude, lambda v, k: te.prod(v, axis=k))


_all = te.comm_reducer(lambda a, b: tir.logical_and(a, b), lambda t: tir.const(True, t), "all")
_any = te.comm_reducer(lambda a, b: tir.logical_or(a, b), lambda t: tir.const(False, t), "any")


def all(x: te.Tensor, axis: Any = None, keepdims: bool = False,
        exclude: bool = False) -> te.Tensor:
    """Logical AND over ``axis``."""
    return _reduce("all", x, axis, keepdims, exclude,
                   lambda v, k: _all(tir.cast(v, "bool"), axis=k))


def any(x: te.Tensor, axis: Any = None, keepdims: bool = False,
        exclude: bool = False) -> te.Tensor:
    """Logical OR over ``axis``."""
    return _reduce("any", x, axis, keepdims, exclude,
                   lambda v, k: _any(tir.cast(v, "bool"), axis=k))


def _count(x: te.Tensor, axes: Sequence[int]) -> PrimExpr:
    n: PrimExpr = tir.const(1)
    for a in axes:
        n = n * x.shape[a]
    return n


def mean(x: te.Tensor, axis: Any = None, keepdims: bool = False,
         exclude: bool = False) -> te.Tensor:
    """Arithmetic mean over ``axis`` (same dtype as ``x``)."""
    s = sum(x, axis, keepdims, exclude)
    n = tir.cast(_count(x, reduce_axes("mean", x.ndim, axis, exclude)), x.dtype)
    return te.compute(s.shape, lambda *i: s(*i) / n, name="T_mean", tag=ELEMWISE)


def variance(x: te.Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False,
             unbiased: bool = False, mean_value: te.Tensor | None = None) -> te.Tensor:
    """Mean squared deviation over ``axis`` (divided by n - 1 when ``unbiased``)."""
    axes = reduce_axes("variance", x.ndim, axis, exclude)
    m = mean_value if mean_value is not None else mean(x, axes, keepdims=True)
    from .broadcast import broadcast_index

    sq = te.compute(x.shape, lambda *i: _square(x(*i) - m(*broadcast_index(m, i))),
                    name="T_sq_diff", tag=ELEMWISE)
    s = sum(sq, axes, keepdims)
    n = tir.cast(_count(x, axes) - (1 if unbiased else 0), x.dtype)
    return te.compute(s.shape, lambda *i: s(*i) / n, name="T_variance", tag=ELEMWISE)


def _square(v: PrimExpr) -> PrimExpr:
    return v * v


def std(x: te.Tensor, axis: Any = None, keepdims: bool = False, exclude: bool = False,
        unbiased: bool = False) -> te.Tensor:
    """Standard deviation over ``axis``."""
    v = variance(x, axis, keepdims, exclude, unbiased)
    return te.compute(v.shape, lambda *i: tir.sqrt(v(*i)), name="T_std", tag=ELEMWISE)


def _arg_reducer(better: Callable[[PrimExpr, PrimExpr], PrimExpr], name: str) -> Callable:
    def fcombine(x: tuple, y: tuple) -> tuple:
        take_y = tir.logical_or(x[0] < 0, better(y[1], x[1]))
        return tir.Select_(take_y, y[0], x[0]), tir.Select_(take_y, y[1], x[1])

    def fidentity(t0: str, t1: str) -> tuple:
        return tir.const(-1, t0), tir.const(0, t1)

    return te.comm_reducer(fcombine, fidentity, name)


_argmax = _arg_reducer(lambda a, b: a > b, "argmax")
_argmin = _arg_reducer(lambda a, b: a < b, "argmin")


def _arg(name: str, red: Callable, x: te.Tensor, axis: Any, keepdims: bool, exclude: bool
         ) -> te.Tensor:
    axes = reduce_axes(name, x.ndim, axis, exclude)
    if len(axes) != 1:
        flat_needed = len(axes) == x.ndim
        if not flat_needed:
            raise OpError(f"{name}: reduces over one axis or all of them, got axes {axes}")
        from .transform import reshape

        out = _arg(name, red, reshape(x, [_count(x, axes)]), 0, False, False)
        return reshape(out, [1] * x.ndim) if keepdims else out
    a = axes[0]

    def body(v: PrimExpr, k: list) -> Any:
        return red((k[0].var, v), axis=k)

    outs = _reduce(name, x, a, keepdims, False, body)
    return outs[0]


def argmax(x: te.Tensor, axis: Any = None, keepdims: bool = False,
           exclude: bool = False) -> te.Tensor:
    """Index (int32) of the first maximum along ``axis`` (over the flattened tensor if None)."""
    return _arg("argmax", _argmax, x, axis, keepdims, exclude)


def argmin(x: te.Tensor, axis: Any = None, keepdims: bool = False,
           exclude: bool = False) -> te.Tensor:
    """Index (int32) of the first minimum along ``axis``."""
    return _arg("argmin", _argmin, x, axis, keepdims, exclude)
