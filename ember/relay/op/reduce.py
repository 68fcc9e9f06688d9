"""Reductions: sum, mean, max, min, prod, all, any, argmax, argmin, variance (and std).

All share one axis rule: ``axis=None`` reduces every axis, ``exclude=True`` reduces every axis
*not* listed, ``keepdims=True`` keeps reduced axes with size 1. Results stay in the input dtype
(integer ``mean`` truncates, as the kernel's integer division does); arg-reductions give int32.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import topi
from ...ir.expr import Call
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._compute_common import cast_to, identity
from ._reg import COMM_REDUCE, call, defop
from ._shape import dim_prod, fail, known, norm_axes, same_dtype, tensor_of
from .attrs import ArgReduceAttrs, ReduceAttrs, VarianceAttrs

__all__ = [  # noqa: F822 (most are defined by the loop over _REDUCERS)
    "all",
    "any",
    "argmax",
    "argmin",
    "max",
    "mean",
    "mean_std",
    "mean_variance",
    "min",
    "prod",
    "std",
    "sum",
    "variance",
]


def reduce_axes(op: str, ndim: int, attrs: Any) -> list[int]:
    """The sorted, non-negative axes that ``attrs`` (axis, exclude) reduce on rank ``ndim``."""
    if attrs.axis is None:
        return list(range(ndim))
    axes = norm_axes(op, attrs.axis, ndim)
    return [i for i in range(ndim) if (i in axes) != attrs.exclude]


def _reduced_shape(shape: Sequence[Any], axes: list[int], keepdims: bool) -> list[Any]:
    if keepdims:
        return [1 if i in axes else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in axes]


def _reduce_rel(name: str, out_dtype: str | None = None) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        data = args[0]
        axes = reduce_axes(name, data.ndim, attrs)
        shape = _reduced_shape(data.shape, axes, attrs.keepdims)
        # (builtins.any: this module's own `any` is the reduction)
        if name in ("max", "min", "argmax", "argmin") and builtins.any(
                known(data.shape[i]) and data.shape[i] == 0 for i in axes):
            raise fail(name, f"cannot reduce an axis of size 0 (shape {data.shape})")
        return tensor_of(shape, out_dtype or data.dtype)

    return rel


def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool, dtype: Any) -> np.ndarray:
    total = np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
    count = int(np.prod([x.shape[a] for a in axis]))
    if np.issubdtype(x.dtype, np.integer):
        return np.trunc(total / count).astype(x.dtype)
    return total / x.dtype.type(count)


_REDUCERS: dict[str, tuple[Callable[..., Any], Callable[..., te.Tensor], str]] = {
    # name: (numpy reference, topi compute, doc)
    "sum": (np.sum, topi.sum, "Sum over the reduced axes."),
    "mean": (_mean, topi.mean, "Mean over the reduced axes (integer inputs truncate)."),
    "max": (np.max, topi.max, "Maximum over the reduced axes."),
    "min": (np.min, topi.min, "Minimum over the reduced axes."),
    "prod": (np.prod, topi.prod, "Product over the reduced axes."),
    "all": (np.all, topi.all, "Logical and over the reduced axes."),
    "any": (np.any, topi.any, "Logical or over the reduced axes."),
}


def _reduce_ref(name: str, fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: ReduceAttrs) -> np.ndarray:
        axes = tuple(reduce_axes(name, x.ndim, attrs))
        if name in ("sum", "prod", "mean"):  # accumulate in the input dtype, as the kernel does
            out = fn(x, axis=axes, keepdims=attrs.keepdims, dtype=x.dtype)
        else:
            out = fn(x, axis=axes, keepdims=attrs.keepdims)
        return np.asarray(out).astype(x.dtype, copy=False)

    return ref


def _reduce_api(name: str, doc: str) -> None:
    def api(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False) -> Call:
        return call(name, data, attrs=ReduceAttrs(axis, keepdims, exclude))

    api.__name__ = api.__qualname__ = name
    api.__doc__ = f"{doc}\n\n``relay.{name}(data, axis=None, keepdims=False, exclude=False)``"
    globals()[name] = api


def _reduce_compute(name: str, fn: Callable[..., te.Tensor]) -> Any:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        axes = reduce_axes(name, x.ndim, attrs)
        if not axes:  # nothing to reduce: the input (all/any: as truth values)
            out = cast_to(x, "bool") if name in ("all", "any") else identity(x, f"T_{name}")
        else:
            out = fn(x, axes, attrs.keepdims)
        return [cast_to(out, out_type.dtype)]  # type: ignore[attr-defined]

    return rule


for _name, (_fn, _topi_fn, _doc) in _REDUCERS.items():
    defop(_name, _reduce_rel(_name), _reduce_ref(_name, _fn), COMM_REDUCE, attrs=ReduceAttrs,
          doc=_doc, compute=_reduce_compute(_name, _topi_fn))
    _reduce_api(_name, _doc)


# ---------------------------------------------------------------- argmax / argmin
def _arg_ref(pick: Callable[..., np.ndarray], name: str) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: ArgReduceAttrs) -> np.ndarray:
        axes = reduce_axes(name, x.ndim, attrs)
        kept = [i for i in range(x.ndim) if i not in axes]
        # Flatten the reduced axes (row-major) into one trailing axis and pick along it.
        flat = x.transpose(kept + axes).reshape([x.shape[i] for i in kept] + [-1])
        if attrs.select_last_index:
            idx = flat.shape[-1] - 1 - pick(flat[..., ::-1], axis=-1)
        else:
            idx = pick(flat, axis=-1)
        if attrs.keepdims:
            idx = idx.reshape([1 if i in axes else x.shape[i] for i in range(x.ndim)])
        return idx.astype("int32")

    return ref


def _arg_reducer(name: str, last: bool) -> Any:
    better = {("argmax", False): lambda a, b: a > b, ("argmax", True): lambda a, b: a >= b,
              ("argmin", False): lambda a, b: a < b, ("argmin", True): lambda a, b: a <= b}[
        (name, last)]

    def fcombine(x: tuple, y: tuple) -> tuple:
        # Loops visit indices in increasing order: x holds the best so far (index -1: none).
        take = tir.logical_or(x[0] < 0, better(y[1], x[1]))
        return tir.Select_(take, y[0], x[0]), tir.Select_(take, y[1], x[1])

    def fidentity(t0: str, t1: str) -> tuple:
        return tir.const(-1, t0), tir.const(0, t1)

    return te.comm_reducer(fcombine, fidentity, name)


def _arg_compute(name: str) -> Any:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        axes = reduce_axes(name, x.ndim, attrs)
        keep = attrs.keepdims
        shape = tuple(tir.const(1) if i in axes else d for i, d in enumerate(x.shape)
                      if keep or i not in axes)
        if not axes:
            return [te.compute(shape, lambda *i: tir.const(0, "int32"), name=f"T_{name}",
                               tag="elemwise")]
        red = _arg_reducer(name, attrs.select_last_index)

        def f(*idx: PrimExpr) -> Any:
            rvs = [te.reduce_axis((0, x.shape[a]), f"k{a}") for a in axes]
            it, rit = iter(idx), iter(rvs)
            src: list[PrimExpr] = []
            for i in range(x.ndim):
                if i in axes:
                    if keep:
                        next(it)
                    src.append(next(rit).var)
                else:
                    src.append(next(it))
            flat: PrimExpr = tir.const(0)
            for rv, a in zip(rvs, axes):
                flat = flat * x.shape[a] + rv.var
            return red((flat, x(*src)), axis=rvs)

        outs = te.compute(shape, f, name=f"T_{name}", tag="comm_reduce")
        return [outs[0]]

    return rule


for _name, _pick in (("argmax", np.argmax), ("argmin", np.argmin)):
    defop(_name, _reduce_rel(_name, "int32"), _arg_ref(_pick, _name), COMM_REDUCE,
          attrs=ArgReduceAttrs, doc=f"Index of the {_name[3:]} over the reduced axes (int32).",
          compute=_arg_compute(_name))


def argmax(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False,
           select_last_index: bool = False) -> Call:
    """Index (int32, row-major over the reduced axes) of the largest element."""
    return call("argmax", data, attrs=ArgReduceAttrs(axis, keepdims, exclude, select_last_index))


def argmin(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False,
           select_last_index: bool = False) -> Call:
    """Index (int32, row-major over the reduced axes) of the smallest element."""
    return call("argmin", data, attrs=ArgReduceAttrs(axis, keepdims, exclude, select_last_index))


# ---------------------------------------------------------------- variance / std
def _variance_rel(args: list[TensorType], attrs: VarianceAttrs) -> TensorType:
    data = args[0]
    same_dtype("variance", args, ("data", "mean"))
    axes = reduce_axes("variance", data.ndim, attrs)
    if attrs.unbiased and known(*(data.shape[i] for i in axes)) and \
            dim_prod(data.shape[i] for i in axes) == 1:  # type: ignore[comparison-overlap]
        raise fail("variance", "unbiased variance needs more than one element per reduction")
    return tensor_of(_reduced_shape(data.shape, axes, attrs.keepdims), data.dtype)


def _variance_ref(x: np.ndarray, m: np.ndarray, attrs: VarianceAttrs) -> np.ndarray:
    axes = tuple(reduce_axes("variance", x.ndim, attrs))
    d = x - m
    total = np.sum(d * d, axis=axes, keepdims=attrs.keepdims, dtype=x.dtype)
    count = int(np.prod([x.shape[a] for a in axes])) - int(attrs.unbiased)
    return (total / x.dtype.type(count)).astype(x.dtype)


def _variance_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Mean squared deviation from the given mean (a keepdims tensor), over the axes."""
    x, mean = inputs
    axes = reduce_axes("variance", x.ndim, attrs)
    if not axes:
        sq = te.compute(x.shape, lambda *i: (x(*i) - mean(*i)) * (x(*i) - mean(*i)),
                        name="T_variance", tag="broadcast")
        return [sq]
    return [topi.variance(x, axes, attrs.keepdims, False, attrs.unbiased, mean_value=mean)]


defop("variance", _variance_rel, _variance_ref, COMM_REDUCE, args=("data", "mean"),
      attrs=VarianceAttrs, doc="Variance around a given mean over the reduced axes.",
      compute=_variance_compute)


def variance(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False,
             unbiased: bool = False) -> Call:
    """Variance over the reduced axes: ``variance(data, mean(data, keepdims=True))``."""
    m = globals()["mean"](data, axis, True, exclude)
    return call("variance", data, m, attrs=VarianceAttrs(axis, keepdims, exclude, unbiased))


def std(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False,
        unbiased: bool = False) -> Call:
    """Standard deviation: ``sqrt(variance(...))`` (there is no separate std op, as in Relay)."""
    return call("sqrt", variance(data, axis, keepdims, exclude, unbiased))


def mean_variance(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False,
                  unbiased: bool = False) -> Any:
    """``(mean, variance)`` as a TupleWrapper of 2."""
    from ...ir.expr import Tuple
    from ._tuple import TupleWrapper

    m = globals()["mean"](data, axis, keepdims, exclude)
    return TupleWrapper(Tuple((m, variance(data, axis, keepdims, exclude, unbiased))), 2)


def mean_std(data: Any, axis: Any = None, keepdims: bool = False, exclude: bool = False,
             unbiased: bool = False) -> Any:
    """``(mean, std)`` as a TupleWrapper of 2."""
    from ...ir.expr import Tuple
    from ._tuple import TupleWrapper

    m = globals()["mean"](data, axis, keepdims, exclude)
    return TupleWrapper(Tuple((m, std(data, axis, keepdims, exclude, unbiased))), 2)
