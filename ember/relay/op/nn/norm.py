"""Normalisation: nn.batch_norm (inference form, a 3-tuple result), nn.layer_norm, nn.rms_norm
(FuseLayerNorm's rewrite of T5's spelled-out RMS norm), and nn.contrib_layer_norm_act, a layer
norm with the epilogue FuseNormEpilogue folds into it.

``nn.contrib_layer_norm_act(data, gamma, beta, row_scale, row_shift)``::

    act(layer_norm(data, gamma, beta) * row_scale[i] + row_shift[i])

where ``i = (r // row_div) % row_count`` and r numbers the positions of data other than along
``axis`` in row-major order (each is one normalisation: a row). So a per-channel vector of a
GroupNorm over time (N, C, 1, T), axis 3, is row_count = C, row_div = 1; in NCHW[L]c the same
values in blocked order. ``row_scale`` / ``row_shift`` have row_count values and are ignored
(pass a scalar 0) unless ``has_row_scale`` / ``has_row_shift``; ``activation`` and its two
``params`` are nn.contrib_gemm's (``topi.nn.gemm_kernel.ACTIVATIONS``). float32 only (the C
kernel ``ember_layer_norm_act`` of ``norm.h``), static or run-time sizes.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .... import topi
from ....ir.expr import Call
from ....ir.types import TensorType, TupleType, Type
from ....te import tensor as te
from ....topi.nn import norm_kernel
from ....topi.nn.gemm_kernel import ACTIVATIONS
from .._attrs_base import attrs_class
from .._compute_common import identity
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_dim, fmt_shape, is_float, may_equal, norm_axis, tensor_of
from .._tuple import TupleWrapper
from ._attrs import BatchNormAttrs, LayerNormAttrs, RmsNormAttrs
from .epilogue_activation import activation_ref
from .nn import channel_vectors

__all__ = ["batch_norm", "layer_norm", "rms_norm", "LayerNormActAttrs"]


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


# ---------------------------------------------------------------- rms_norm
def _rms_norm_rel(args: list[TensorType], attrs: RmsNormAttrs) -> TensorType:
    data, gamma = args
    _check_vectors("nn.rms_norm", data, attrs.axis, [gamma], ("gamma",))
    return data


def _rms_norm_ref(x: np.ndarray, gamma: np.ndarray, attrs: RmsNormAttrs) -> np.ndarray:
    ax, t = attrs.axis % x.ndim, x.dtype.type
    ms = (x * x).sum(axis=ax, keepdims=True, dtype=x.dtype) / t(x.shape[ax])
    out = x / np.sqrt(ms + t(attrs.epsilon))
    if attrs.scale:
        out = out * _along(gamma, x.ndim, ax)
    return out.astype(x.dtype)


def _rms_norm_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The C kernel (float32, static or run-time sizes), else the te reductions."""
    data, gamma = inputs
    if norm_kernel.eligible(data, gamma):
        return [norm_kernel.layer_norm(data, gamma if attrs.scale else None, None, attrs.axis,
                                       attrs.epsilon, rms=True)]
    return [topi.nn.rms_norm(data, gamma, attrs.axis, attrs.epsilon, attrs.scale)]


defop("nn.rms_norm", _rms_norm_rel, _rms_norm_ref, OPAQUE,
      args=("data", "gamma"), attrs=RmsNormAttrs,
      doc="RMS normalisation over one axis: data / sqrt(mean(data^2) + eps) * gamma.",
      infer_args=lambda args, attrs: channel_vectors(args, attrs.axis),
      compute=_rms_norm_compute)


def rms_norm(data: Any, gamma: Any, axis: int = -1, epsilon: float = 1e-5,
             scale: bool = True) -> Call:
    """``data / sqrt(mean(data ** 2) + eps) * gamma`` with the mean over ``axis``."""
    return call("nn.rms_norm", data, gamma, attrs=RmsNormAttrs(axis, epsilon, scale))


# ---------------------------------------------------------------- contrib_layer_norm_act
@attrs_class("LayerNormActAttrs")
class LayerNormActAttrs(LayerNormAttrs):
    """nn.contrib_layer_norm_act: nn.layer_norm's attrs and the epilogue after it."""

    has_row_scale: bool = False
    has_row_shift: bool = False
    row_count: int = 1
    row_div: int = 1
    activation: str = "none"
    params: tuple[float, float] = (0.0, 0.0)
    _op: ClassVar[str] = "nn.contrib_layer_norm_act"

    def __post_init__(self) -> None:
        LayerNormAttrs.__post_init__(self)  # attrs_class rebuilds the class: no super()
        self._bool("has_row_scale", "has_row_shift")
        self._int("row_count")
        self._int("row_div")
        self._positive("row_count")
        self._positive("row_div")
        self._choice("activation", tuple(ACTIVATIONS))
        value = tuple(float(v) for v in self.params)
        if len(value) != 2:
            raise self._invalid("params", "two floats")
        self._set("params", value)


def _layer_norm_act_rel(args: list[TensorType], attrs: LayerNormActAttrs) -> TensorType:
    op = "nn.contrib_layer_norm_act"
    data, gamma, beta, row_scale, row_shift = args
    _check_vectors(op, data, attrs.axis, [gamma, beta], ("gamma", "beta"))
    if data.dtype != "float32":
        raise fail(op, f"requires float32 data (its C kernel), got {data.dtype}")
    for vec, name, used in ((row_scale, "row_scale", attrs.has_row_scale),
                            (row_shift, "row_shift", attrs.has_row_shift)):
        if used and (vec.dtype != "float32" or vec.ndim != 1 or
                     not may_equal(vec.shape[0], attrs.row_count)):
            raise fail(op, f"{name} must be float32 ({attrs.row_count},) (row_count), got "
                           f"{vec.dtype} {fmt_shape(vec.shape)}")
    return data


def row_index(shape: tuple[int, ...], axis: int, row_count: int, row_div: int) -> np.ndarray:
    """The row-vector index of each normalisation of a ``shape`` tensor over ``axis``, shaped
    to broadcast against it (size 1 along ``axis``)."""
    rows_shape = [1 if i == axis else d for i, d in enumerate(shape)]
    return (np.arange(int(np.prod(rows_shape))).reshape(rows_shape) // row_div) % row_count


def _act_ref(y: np.ndarray, act: str, p: tuple[float, float]) -> np.ndarray:
    if act == "hardswish":  # as nn.contrib_gemm: p0 is the output scale (1/6: hardswish)
        return 6 * p[0] * activation_ref(y, act)
    return activation_ref(y, act, *p)


def _layer_norm_act_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                        row_scale: np.ndarray, row_shift: np.ndarray,
                        attrs: LayerNormActAttrs) -> np.ndarray:
    y = _layer_norm_ref(x.astype(np.float64), gamma, beta, attrs)
    index = row_index(x.shape, attrs.axis % x.ndim, attrs.row_count, attrs.row_div)
    if attrs.has_row_scale:
        y = y * row_scale.astype(np.float64)[index]
    if attrs.has_row_shift:
        y = y + row_shift.astype(np.float64)[index]
    return _act_ref(y, attrs.activation, attrs.params).astype(x.dtype)


def _layer_norm_act_compute(attrs: Any, inputs: list[te.Tensor],
                            out_type: Type) -> list[te.Tensor]:
    data, gamma, beta, row_scale, row_shift = inputs
    epilogue = norm_kernel.NormEpilogue(
        row_scale if attrs.has_row_scale else None, row_shift if attrs.has_row_shift else None,
        attrs.row_count, attrs.row_div, attrs.activation, *attrs.params)
    return [norm_kernel.layer_norm(data, gamma if attrs.scale else None,
                                   beta if attrs.center else None, attrs.axis, attrs.epsilon,
                                   epilogue)]


defop("nn.contrib_layer_norm_act", _layer_norm_act_rel, _layer_norm_act_ref, OPAQUE,
      args=("data", "gamma", "beta", "row_scale", "row_shift"), attrs=LayerNormActAttrs,
      doc="Layer normalisation, then a per-row scale/shift and an activation (one kernel).",
      compute=_layer_norm_act_compute)
