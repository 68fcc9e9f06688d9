"""Compute rules of the reductions (reduce.py): sum, mean, max, min, prod, all, any, argmax,
argmin, variance.

The axis rule is Relay's (``axis=None``: all; ``exclude``; ``keepdims``); an empty axis list
reduces nothing, as the reference does. argmax/argmin over several (not all) axes and
``select_last_index`` are not in topi, so the arg-reductions are written here: one reducer over
(row-major index within the reduced axes, value) pairs.
"""
from __future__ import annotations

from typing import Any

from .... import topi
from ....ir.types import Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ...op.reduce import reduce_axes
from ._common import cast_to, identity, register_compute

_TOPI = {"sum": topi.sum, "mean": topi.mean, "max": topi.max, "min": topi.min,
         "prod": topi.prod, "all": topi.all, "any": topi.any}


def _reduce_rule(name: str) -> Any:
    fn = _TOPI[name]

    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        axes = reduce_axes(name, x.ndim, attrs)
        if not axes:  # nothing to reduce: the input (all/any: as truth values)
            out = cast_to(x, "bool") if name in ("all", "any") else identity(x, f"T_{name}")
        else:
            out = fn(x, axes, attrs.keepdims)
        return [cast_to(out, out_type.dtype)]  # type: ignore[attr-defined]

    return rule


for _name in _TOPI:
    register_compute(_name)(_reduce_rule(_name))


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


def _arg_rule(name: str) -> Any:
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


for _name in ("argmax", "argmin"):
    register_compute(_name)(_arg_rule(_name))


@register_compute("variance")
def variance(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Mean squared deviation from the given mean (a keepdims tensor), over the axes."""
    x, mean = inputs
    axes = reduce_axes("variance", x.ndim, attrs)
    if not axes:
        sq = te.compute(x.shape, lambda *i: (x(*i) - mean(*i)) * (x(*i) - mean(*i)),
                        name="T_variance", tag="broadcast")
        return [sq]
    return [topi.variance(x, axes, attrs.keepdims, False, attrs.unbiased, mean_value=mean)]
