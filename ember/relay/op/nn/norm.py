"""Normalisation: nn.batch_norm (inference form, a 3-tuple result) and nn.layer_norm."""
from __future__ import annotations

from typing import Any

import numpy as np

from .... import topi
from ....ir.expr import Call
from ....ir.types import TensorType, TupleType, Type
from ....te import tensor as te
from ....topi.nn import norm_kernel
from .._compute_common import identity
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_dim, fmt_shape, is_float, may_equal, norm_axis, tensor_of
from .._tuple import TupleWrapper
from ._attrs import BatchNormAttrs, LayerNormAttrs
from .nn import channel_vectors

__all__ = ["batch_norm", "layer_norm"]


def _check_vectors(op: str, data: TensorType, axis: int, vectors: list[TensorType],
                   names: tuple[str, ...]) -> int:
    """Each of ``vectors`` must be 1-D with data.shape[axis] entries; returns the axis."""
    if not is_float(data.dtype):
        raise fail(op, f"requires a floating-point tensor, got {data.dtype}")
    ax = norm_axis(op, axis, data.ndim)
    c = data.shape[ax]
    for vec, name in zip(vectors, names):
        if vec.ndim != 1 or not may_equal(vec.shape[0], c):
            raise fail(op, f"{name} must have shape ({fmt_dim(c)},) to match axis {axis} of data "
                           f"{fmt_shape(data.shape)}, got {fmt_shape(vec.shape)}")
    return ax


def _batch_norm_rel(args: list[TensorType], attrs: BatchNormAttrs) -> TupleType:
    data, *vecs = args
    ax = _check_vectors("nn.batch_norm", data, attrs.axis, vecs,
                        ("gamma", "beta", "moving_mean", "moving_var"))
    vec = tensor_of((data.shape[ax],), data.dtype)
    return TupleType((data, vec, vec))


def _along(vec: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    return vec.reshape([-1 if i == axis else 1 for i in range(ndim)])


def _batch_norm_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray,
                    var: np.ndarray, attrs: BatchNormAttrs) -> tuple[np.ndarray, ...]:
    ax, t = attrs.axis % x.ndim, x.dtype.type
    # Inference: normalise with the moving statistics, which are returned unchanged.
    out = (x - _along(mean, x.ndim, ax)) / np.sqrt(_along(var, x.ndim, ax) + t(attrs.epsilon))
    if attrs.scale:
        out = out * _along(gamma, x.ndim, ax)
    if attrs.center:
        out = out + _along(beta, x.ndim, ax)
    return out.astype(x.dtype), mean.copy(), var.copy()


def _batch_norm_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Inference: the normalised data, and the moving statistics passed through."""
    data, gamma, beta, mean, var = inputs
    out = topi.nn.batch_norm(data, gamma, beta, mean, var, attrs.axis, attrs.epsilon,
                             attrs.center, attrs.scale)
    return [out, identity(mean, "T_bn_mean"), identity(var, "T_bn_var")]


defop("nn.batch_norm", _batch_norm_rel, _batch_norm_ref, OPAQUE,
      args=("data", "gamma", "beta", "moving_mean", "moving_var"), attrs=BatchNormAttrs,
      doc="Batch normalisation (inference): (out, moving_mean, moving_var).",
      infer_args=lambda args, attrs: channel_vectors(args, attrs.axis),
      compute=_batch_norm_compute)


def batch_norm(data: Any, gamma: Any, beta: Any, moving_mean: Any, moving_var: Any,
               axis: int = 1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True) -> TupleWrapper:
    """``(data - mean) / sqrt(var + eps) * gamma + beta`` along ``axis``.

    Returns a TupleWrapper of (output, moving_mean, moving_var); ``[0]`` is the output.
    """
    attrs = BatchNormAttrs(axis, epsilon, center, scale)
    return TupleWrapper(call("nn.batch_norm", data, gamma, beta, moving_mean, moving_var,
                             attrs=attrs), 3)


def _layer_norm_rel(args: list[TensorType], attrs: LayerNormAttrs) -> TensorType:
    data, *vecs = args
    _check_vectors("nn.layer_norm", data, attrs.axis, vecs, ("gamma", "beta"))
    return data


def _layer_norm_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                    attrs: LayerNormAttrs) -> np.ndarray:
    ax, t = attrs.axis % x.ndim, x.dtype.type
    n = t(x.shape[ax])
    mean = x.sum(axis=ax, keepdims=True, dtype=x.dtype) / n
    d = x - mean
    var = (d * d).sum(axis=ax, keepdims=True, dtype=x.dtype) / n
    out = d / np.sqrt(var + t(attrs.epsilon))
    if attrs.scale:
        out = out * _along(gamma, x.ndim, ax)
    if attrs.center:
        out = out + _along(beta, x.ndim, ax)
    return out.astype(x.dtype)


def _layer_norm_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The C kernel (float32, static or run-time sizes), else the te reductions."""
    data, gamma, beta = inputs
    if norm_kernel.eligible(data, gamma, beta):
        return [norm_kernel.layer_norm(data, gamma if attrs.scale else None,
                                       beta if attrs.center else None, attrs.axis,
                                       attrs.epsilon)]
    return [topi.nn.layer_norm(data, gamma, beta, attrs.axis, attrs.epsilon, attrs.center,
                               attrs.scale)]


defop("nn.layer_norm", _layer_norm_rel, _layer_norm_ref, OPAQUE,
      args=("data", "gamma", "beta"), attrs=LayerNormAttrs,
      doc="Layer normalisation over one axis with the batch's own statistics.",
      infer_args=lambda args, attrs: channel_vectors(args, attrs.axis),
      compute=_layer_norm_compute)


def layer_norm(data: Any, gamma: Any, beta: Any, axis: int = -1, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True) -> Call:
    """``(data - mean) / sqrt(var + eps) * gamma + beta`` with mean/var over ``axis``."""
    return call("nn.layer_norm", data, gamma, beta,
                attrs=LayerNormAttrs(axis, epsilon, center, scale))
