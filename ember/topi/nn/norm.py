"""softmax / log_softmax (numerically stable), batch_norm (inference), layer_norm, rms_norm."""
from __future__ import annotations

from typing import Any

from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from .. import reduction
from ..broadcast import BROADCAST, ELEMWISE


def _axis(x: te.Tensor, axis: int) -> int:
    return axis % x.ndim


def _keep(t: te.Tensor, idx: tuple, axis: int) -> PrimExpr:
    """Read a keepdims reduction result at the output point ``idx``."""
    return t(*(idx[:axis] + (tir.const(0),) + idx[axis + 1:]))


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    axis = _axis(x, axis)
    mx = reduction.max(x, axis, keepdims=True)
    e = te.compute(x.shape, lambda *i: tir.exp(x(*i) - _keep(mx, i, axis)), name="T_softmax_exp",
                   tag="softmax_exp")
    s = reduction.sum(e, axis, keepdims=True)
    return te.compute(x.shape, lambda *i: e(*i) / _keep(s, i, axis), name="T_softmax",
                      tag=BROADCAST)


def log_softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """x - max - log(sum(exp(x - max))) along ``axis``."""
    axis = _axis(x, axis)
    mx = reduction.max(x, axis, keepdims=True)
    e = te.compute(x.shape, lambda *i: tir.exp(x(*i) - _keep(mx, i, axis)), name="T_lsm_exp",
                   tag=ELEMWISE)
    s = reduction.sum(e, axis, keepdims=True)
    return te.compute(x.shape, lambda *i: x(*i) - _keep(mx, i, axis) - tir.log(_keep(s, i, axis)),
                      name="T_log_softmax", tag=BROADCAST)


def batch_norm(data: te.Tensor, gamma: te.Tensor, beta: te.Tensor, moving_mean: te.Tensor,
               moving_var: te.Tensor, axis: int = 1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True) -> te.Tensor:
    """Inference batch norm: (x - mean) / sqrt(var + eps) * gamma + beta along ``axis``.

    Returns the normalised tensor only (the moving statistics pass through unchanged).
    """
    axis = _axis(data, axis)
    eps = tir.const(epsilon, data.dtype)

    def f(*i: PrimExpr) -> PrimExpr:
        c = i[axis]
        v = (data(*i) - moving_mean[c]) * tir.rsqrt(moving_var[c] + eps)
        if scale:
            v = v * gamma[c]
        return v + beta[c] if center else v

    return te.compute(data.shape, f, name="T_batch_norm", tag=BROADCAST)


def layer_norm(data: te.Tensor, gamma: te.Tensor | None, beta: te.Tensor | None,
               axis: Any = -1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True) -> te.Tensor:
    """(x - mean) / sqrt(var + eps) * gamma + beta, statistics over ``axis`` (int or list)."""
    axes = reduction.reduce_axes("nn.layer_norm", data.ndim, axis)
    mean = reduction.mean(data, axes, keepdims=True)
    var = reduction.variance(data, axes, keepdims=True, mean_value=mean)
    eps = tir.const(epsilon, data.dtype)

    def at(t: te.Tensor, i: tuple) -> PrimExpr:
        return t(*[tir.const(0) if k in axes else j for k, j in enumerate(i)])

    def param(t: te.Tensor, i: tuple) -> PrimExpr:
        return t(*[i[k] for k in axes][-t.ndim:])

    def f(*i: PrimExpr) -> PrimExpr:
        v = (data(*i) - at(mean, i)) * tir.rsqrt(at(var, i) + eps)
        if scale and gamma is not None:
            v = v * param(gamma, i)
        return v + param(beta, i) if center and beta is not None else v

    return te.compute(data.shape, f, name="T_layer_norm", tag=BROADCAST)


def rms_norm(data: te.Tensor, gamma: te.Tensor | None, axis: int = -1, epsilon: float = 1e-5,
             scale: bool = True) -> te.Tensor:
    """x / sqrt(mean(x^2) + eps) * gamma, the mean over one ``axis`` (the C kernel's
    fallback for other dtypes)."""
    axes = reduction.reduce_axes("nn.rms_norm", data.ndim, axis)
    square = te.compute(data.shape, lambda *i: data(*i) * data(*i), name="T_rms_square")
    ms = reduction.mean(square, axes, keepdims=True)
    eps = tir.const(epsilon, data.dtype)

    def f(*i: PrimExpr) -> PrimExpr:
        v = data(*i) * tir.rsqrt(ms(*[tir.const(0) if k in axes else j
                                      for k, j in enumerate(i)]) + eps)
        return v * gamma(*[i[k] for k in axes][-gamma.ndim:]) if scale and gamma is not None \
            else v

    return te.compute(data.shape, f, name="T_rms_norm", tag=BROADCAST)
