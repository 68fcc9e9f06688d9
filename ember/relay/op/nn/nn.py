"""Activations and simple layers: bias_add, relu, leaky_relu, prelu, softmax, log_softmax,
batch_flatten, pad, dropout. (Matrix products are in ``linear.py``, upsampling in
``resample.py``, normalisation in ``norm.py``.)"""
from __future__ import annotations

from typing import Any

import numpy as np

from .... import topi
from ....ir.expr import Call
from ....ir.types import TensorType, TupleType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ....topi.nn import norm_kernel
from .._compute_common import cast_to, identity, prod, reshape_to, scalar
from .._dispatch import dyn_op, numbers, run_time
from .._reg import BROADCAST, ELEMWISE, INJECTIVE, OPAQUE, call, defop
from .._shape import (
    dim_add,
    dim_prod,
    fail,
    fmt_dim,
    fmt_shape,
    fmt_type,
    is_float,
    known,
    may_equal,
    norm_axis,
    tensor_of,
)
from .._tuple import TupleWrapper
from ._attrs import BiasAddAttrs, DropoutAttrs, LeakyReluAttrs, PadAttrs, PReluAttrs, SoftmaxAttrs

__all__ = [
    "batch_flatten",
    "bias_add",
    "dropout",
    "dropout_raw",
    "leaky_relu",
    "log_softmax",
    "pad",
    "prelu",
    "relu",
    "softmax",
]


# ---------------------------------------------------------------- bias_add, activations
def _channel_vector_rel(op: str, vec_name: str):  # type: ignore[no-untyped-def]
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        data, vec = args
        axis = norm_axis(op, attrs.axis, data.ndim)
        if vec.ndim != 1 or not may_equal(vec.shape[0], data.shape[axis]):
            raise fail(op, f"{vec_name} must have shape ({fmt_dim(data.shape[axis])},) to match "
                           f"axis {attrs.axis} of data {fmt_shape(data.shape)}, got "
                           f"{fmt_shape(vec.shape)}")
        return data

    return rel


def channel_vectors(args: list[Any], axis: int) -> list[Any]:
    """infer_args of ops whose other arguments are 1-D vectors along ``axis`` of data."""
    if args[0] is None:
        return [None] * len(args)
    vec = tensor_of((args[0].shape[axis],), args[0].dtype)
    return [None] + [vec] * (len(args) - 1)


def _along(vec: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    return vec.reshape([-1 if i == axis % ndim else 1 for i in range(ndim)])


def _bias_add_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.nn.bias_add(inputs[0], inputs[1], attrs.axis)]


defop("nn.bias_add", _channel_vector_rel("nn.bias_add", "bias"),
      lambda x, b, attrs: (x + _along(b, x.ndim, attrs.axis)).astype(x.dtype), BROADCAST,
      args=("data", "bias"), attrs=BiasAddAttrs, doc="Add a 1-D bias along an axis.",
      infer_args=lambda args, attrs: channel_vectors(args, attrs.axis),
      compute=_bias_add_compute)


def bias_add(data: Any, bias: Any, axis: int = 1) -> Call:
    """``data + bias`` with the 1-D bias running along ``axis``."""
    return call("nn.bias_add", data, bias, attrs=BiasAddAttrs(axis))


def _relu_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [cast_to(topi.nn.relu(inputs[0]), out_type.dtype)]  # type: ignore[attr-defined]


def _leaky_relu_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.nn.leaky_relu(inputs[0], attrs.alpha)]


def _prelu_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.nn.prelu(inputs[0], inputs[1], attrs.axis)]


defop("nn.relu", lambda args, attrs: args[0], lambda x, attrs: np.maximum(x, x.dtype.type(0)),
      ELEMWISE, doc="max(x, 0).", compute=_relu_compute)
defop("nn.leaky_relu", lambda args, attrs: args[0],
      lambda x, attrs: np.where(x > 0, x, x * x.dtype.type(attrs.alpha)).astype(x.dtype),
      ELEMWISE, attrs=LeakyReluAttrs, doc="x if x > 0 else alpha * x.",
      compute=_leaky_relu_compute)
defop("nn.prelu", _channel_vector_rel("nn.prelu", "alpha"),
      lambda x, a, attrs: np.where(x > 0, x, x * _along(a, x.ndim, attrs.axis)).astype(x.dtype),
      BROADCAST, args=("data", "alpha"), attrs=PReluAttrs,
      doc="leaky_relu with a per-channel slope.",
      infer_args=lambda args, attrs: channel_vectors(args, attrs.axis), compute=_prelu_compute)


def relu(data: Any) -> Call:
    """Rectified linear unit: ``max(data, 0)``."""
    return call("nn.relu", data)


def leaky_relu(data: Any, alpha: float = 0.01) -> Call:
    """``data`` where positive, ``alpha * data`` elsewhere."""
    return call("nn.leaky_relu", data, attrs=LeakyReluAttrs(alpha))


def prelu(data: Any, alpha: Any, axis: int = 1) -> Call:
    """leaky_relu with the slope a 1-D tensor along ``axis``."""
    return call("nn.prelu", data, alpha, attrs=PReluAttrs(axis))


def _softmax_rel(op: str):  # type: ignore[no-untyped-def]
    def rel(args: list[TensorType], attrs: SoftmaxAttrs) -> TensorType:
        if not is_float(args[0].dtype):
            raise fail(op, f"requires a floating-point tensor, got {fmt_type(args[0])}")
        norm_axis(op, attrs.axis, args[0].ndim)
        return args[0]

    return rel


def _softmax_ref(x: np.ndarray, attrs: SoftmaxAttrs, log: bool = False) -> np.ndarray:
    shifted = x - x.max(axis=attrs.axis, keepdims=True)
    e = np.exp(shifted)
    total = e.sum(axis=attrs.axis, keepdims=True, dtype=x.dtype)
    return (shifted - np.log(total) if log else e / total).astype(x.dtype)


def _softmax_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The C kernel (float32, static or run-time sizes), else the te reductions."""
    if norm_kernel.eligible(inputs[0]):
        return [norm_kernel.softmax(inputs[0], attrs.axis)]
    return [topi.nn.softmax(inputs[0], attrs.axis)]


def _log_softmax_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The C kernel (float32, static or run-time sizes), else the te reductions."""
    if norm_kernel.eligible(inputs[0]):
        return [norm_kernel.softmax(inputs[0], attrs.axis, log=True)]
    return [topi.nn.log_softmax(inputs[0], attrs.axis)]


defop("nn.softmax", _softmax_rel("nn.softmax"), _softmax_ref, OPAQUE, attrs=SoftmaxAttrs,
      doc="exp(x) / sum(exp(x)) along an axis.", compute=_softmax_compute)
defop("nn.log_softmax", _softmax_rel("nn.log_softmax"),
      lambda x, attrs: _softmax_ref(x, attrs, log=True), OPAQUE, attrs=SoftmaxAttrs,
      doc="log(softmax(x)) along an axis, computed stably.", compute=_log_softmax_compute)


def softmax(data: Any, axis: int = -1) -> Call:
    """Softmax along ``axis``."""
    return call("nn.softmax", data, attrs=SoftmaxAttrs(axis))


def log_softmax(data: Any, axis: int = -1) -> Call:
    """Log of the softmax along ``axis``."""
    return call("nn.log_softmax", data, attrs=SoftmaxAttrs(axis))


# ---------------------------------------------------------------- batch_flatten, pad, dropout
def _batch_flatten_rel(args: list[TensorType], attrs: Any) -> TensorType:
    data = args[0]
    if data.ndim < 1:
        raise fail("nn.batch_flatten", "data must have rank >= 1, got a scalar")
    return tensor_of((data.shape[0], dim_prod(data.shape[1:])), data.dtype)


def _batch_flatten_compute(attrs: Any, inputs: list[te.Tensor],
                           out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [reshape_to(x, out_type, [x.shape[0], prod(x.shape[1:])])]  # type: ignore[arg-type]


defop("nn.batch_flatten", _batch_flatten_rel,
      lambda x, attrs: x.reshape(x.shape[0], int(np.prod(x.shape[1:]))), INJECTIVE,
      doc="Flatten all but the first axis.", compute=_batch_flatten_compute)


def batch_flatten(data: Any) -> Call:
    """``data`` reshaped to (batch, everything else)."""
    return call("nn.batch_flatten", data)


def _pad_rel(args: list[TensorType], attrs: PadAttrs) -> TensorType:
    op, (data, value) = "nn.pad", args
    if len(attrs.pad_width) != data.ndim:
        raise fail(op, f"pad_width has {len(attrs.pad_width)} (before, after) pairs but data "
                       f"has rank {data.ndim} (shape {fmt_shape(data.shape)})")
    if value.ndim != 0:
        raise fail(op, f"pad_value must be a scalar, got {fmt_type(value)}")
    shape = []
    for i, (d, (a, b)) in enumerate(zip(data.shape, attrs.pad_width)):
        if attrs.pad_mode == "reflect" and known(d) and max(a, b) >= d:  # type: ignore[operator]
            raise fail(op, f"reflect padding of {max(a, b)} needs dimension {i} to be larger, "
                           f"got size {d}")
        shape.append(dim_add(dim_add(d, a), b))
    return tensor_of(shape, data.dtype)


def _pad_ref(x: np.ndarray, value: np.ndarray, attrs: PadAttrs) -> np.ndarray:
    if attrs.pad_mode == "constant":
        return np.pad(x, attrs.pad_width, constant_values=value.astype(x.dtype))
    return np.pad(x, attrs.pad_width, mode=attrs.pad_mode)


def _pad_source(i: PrimExpr, before: int, d: PrimExpr, mode: str) -> PrimExpr:
    j = i - before
    if mode == "edge":
        return tir.min(tir.max(j, tir.const(0)), d - 1)
    # reflect (numpy): mirror without repeating the edge; pads are smaller than the axis
    j = tir.Select_(j < 0, tir.const(0) - j, j)
    return tir.Select_(j >= d, (d - 1) * 2 - j, j)


def _pad_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Constant padding through topi; edge and reflect read a clamped or mirrored index."""
    x, value = inputs
    before = [int(a) for a, _ in attrs.pad_width]
    after = [int(b) for _, b in attrs.pad_width]
    if attrs.pad_mode == "constant":
        return [topi.nn.pad(x, before, after, scalar(value))]
    shape = tuple(d + b + a for d, b, a in zip(x.shape, before, after))
    return [te.compute(shape, lambda *i: x(*[_pad_source(j, b, d, attrs.pad_mode) for j, b, d in
                                             zip(i, before, x.shape)]),
                       name=f"T_pad_{attrs.pad_mode}", tag="injective")]


defop("nn.pad", _pad_rel, _pad_ref, INJECTIVE, args=("data", "pad_value"), attrs=PadAttrs,
      doc="Pad with a constant, the edge values or a reflection.", level=2, compute=_pad_compute)


def pad(data: Any, pad_width: Any, pad_value: Any = 0, pad_mode: str = "constant") -> Call:
    """``data`` padded by ``pad_width`` = ((before, after), ...) per axis."""
    if run_time(pad_width):
        return dyn_op("nn.pad")(data, pad_width, pad_value, pad_mode)
    return call("nn.pad", data, pad_value, attrs=PadAttrs(numbers(pad_width), pad_mode))


def _dropout_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Inference: (the data, a mask of ones)."""
    x = inputs[0]
    return [identity(x, "T_dropout"), topi.full(x.shape, x.dtype, 1)]


defop("nn.dropout", lambda args, attrs: TupleType((args[0], args[0])),
      lambda x, attrs: (x.copy(), np.ones_like(x)), OPAQUE, attrs=DropoutAttrs,
      doc="Dropout: (output, mask); the identity at inference.", compute=_dropout_compute)


def dropout_raw(data: Any, rate: float = 0.5) -> Call:
    """The 2-tuple ``(output, mask)`` call of nn.dropout."""
    return call("nn.dropout", data, attrs=DropoutAttrs(rate))


def dropout(data: Any, rate: float = 0.5) -> Any:
    """Dropout's output (field 0 of nn.dropout); the identity at inference."""
    return TupleWrapper(dropout_raw(data, rate), 2)[0]
