"""Dense layers and activations: dense, matmul, batch_matmul, bias_add, relu, leaky_relu,
prelu, softmax, log_softmax, batch_flatten, pad, dropout, upsampling."""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, TupleType
from .._reg import BROADCAST, ELEMWISE, INJECTIVE, OPAQUE, OUT_ELEMWISE_FUSABLE, call, defop
from .._shape import (
    broadcast_dim,
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
from ._attrs import (
    BatchMatmulAttrs,
    BiasAddAttrs,
    DenseAttrs,
    DropoutAttrs,
    LeakyReluAttrs,
    MatmulAttrs,
    PadAttrs,
    PReluAttrs,
    SoftmaxAttrs,
    UpSamplingAttrs,
)

__all__ = [
    "batch_flatten",
    "batch_matmul",
    "bias_add",
    "dense",
    "dropout",
    "dropout_raw",
    "leaky_relu",
    "log_softmax",
    "matmul",
    "pad",
    "prelu",
    "relu",
    "softmax",
    "upsampling",
]


# ---------------------------------------------------------------- dense, matmul, batch_matmul
def _matmul_shape(op: str, a: TensorType, b: TensorType, ta: bool, tb: bool,
                  units: int | None) -> list[Any]:
    if b.ndim != 2:
        raise fail(op, f"weight must have rank 2, got rank {b.ndim} (shape {fmt_shape(b.shape)})")
    if a.ndim < 1 or (ta and a.ndim != 2):
        need = "rank 2 when transpose_a" if ta else "rank >= 1"
        raise fail(op, f"data must have {need}, got shape {fmt_shape(a.shape)}")
    k_a = a.shape[0] if ta else a.shape[-1]
    n, k_b = (b.shape[0], b.shape[1]) if tb else (b.shape[1], b.shape[0])
    if not may_equal(k_a, k_b):
        raise fail(op, f"data has {fmt_dim(k_a)} input features but weight expects "
                       f"{fmt_dim(k_b)} (data shape {fmt_shape(a.shape)}, weight shape "
                       f"{fmt_shape(b.shape)})")
    if units is not None and not may_equal(n, units):
        raise fail(op, f"units={units} but the weight has {fmt_dim(n)} output features")
    return [a.shape[1], n] if ta else [*a.shape[:-1], n]


def _dense_rel(args: list[TensorType], attrs: DenseAttrs) -> TensorType:
    shape = _matmul_shape("nn.dense", args[0], args[1], False, True, attrs.units)
    return tensor_of(shape, attrs.out_dtype or args[0].dtype)


def _matmul_ref(a: np.ndarray, b: np.ndarray, ta: bool, tb: bool, dtype: Any) -> np.ndarray:
    a, b = a.astype(dtype or a.dtype), b.astype(dtype or a.dtype)
    return np.matmul(a.T if ta else a, b.T if tb else b)


def _dense_infer_args(args: list[Any], attrs: DenseAttrs) -> list[Any]:
    if args[0] is None or attrs.units is None:
        return [None, None]
    return [None, tensor_of((attrs.units, args[0].shape[-1]), args[0].dtype)]


defop("nn.dense", _dense_rel, lambda x, w, attrs: _matmul_ref(x, w, False, True, attrs.out_dtype),
      OUT_ELEMWISE_FUSABLE, args=("data", "weight"), attrs=DenseAttrs,
      doc="data @ weight.T: (..., K) x (N, K) -> (..., N).", infer_args=_dense_infer_args)


def dense(data: Any, weight: Any, units: int | None = None, out_dtype: str = "") -> Call:
    """Fully connected layer: ``data (..., K) @ weight (N, K).T -> (..., N)``."""
    return call("nn.dense", data, weight, attrs=DenseAttrs(units, out_dtype))


def _nn_matmul_rel(args: list[TensorType], attrs: MatmulAttrs) -> TensorType:
    shape = _matmul_shape("nn.matmul", args[0], args[1], attrs.transpose_a, attrs.transpose_b,
                          attrs.units)
    return tensor_of(shape, attrs.out_dtype or args[0].dtype)


defop("nn.matmul", _nn_matmul_rel,
      lambda a, b, attrs: _matmul_ref(a, b, attrs.transpose_a, attrs.transpose_b, attrs.out_dtype),
      OUT_ELEMWISE_FUSABLE, args=("tensor_a", "tensor_b"), attrs=MatmulAttrs,
      doc="tensor_a @ tensor_b with optional transposes (tensor_b is 2-D).")


def matmul(tensor_a: Any, tensor_b: Any, units: int | None = None, out_dtype: str = "",
           transpose_a: bool = False, transpose_b: bool = False) -> Call:
    """``tensor_a @ tensor_b`` (each optionally transposed); tensor_b is 2-D."""
    attrs = MatmulAttrs(units, out_dtype, transpose_a, transpose_b)
    return call("nn.matmul", tensor_a, tensor_b, attrs=attrs)


def _batch_matmul_rel(args: list[TensorType], attrs: BatchMatmulAttrs) -> TensorType:
    op, (x, y) = "nn.batch_matmul", args
    for ty, name in ((x, "x"), (y, "y")):
        if ty.ndim != 3:
            raise fail(op, f"{name} must have rank 3, got rank {ty.ndim} "
                           f"(shape {fmt_shape(ty.shape)})")
    b = broadcast_dim(x.shape[0], y.shape[0])
    if b is None:
        raise fail(op, f"batch sizes {x.shape[0]} and {y.shape[0]} differ (x shape "
                       f"{fmt_shape(x.shape)}, y shape {fmt_shape(y.shape)})")
    m, k_x = (x.shape[2], x.shape[1]) if attrs.transpose_a else (x.shape[1], x.shape[2])
    n, k_y = (y.shape[1], y.shape[2]) if attrs.transpose_b else (y.shape[2], y.shape[1])
    if not may_equal(k_x, k_y):
        raise fail(op, f"x has {fmt_dim(k_x)} reduction features but y has {fmt_dim(k_y)} "
                       f"(x shape {fmt_shape(x.shape)}, y shape {fmt_shape(y.shape)}, "
                       f"transpose_a={attrs.transpose_a}, transpose_b={attrs.transpose_b})")
    return tensor_of((b, m, n), attrs.out_dtype or x.dtype)


def _batch_matmul_ref(x: np.ndarray, y: np.ndarray, attrs: BatchMatmulAttrs) -> np.ndarray:
    dtype = attrs.out_dtype or x.dtype
    x = x.astype(dtype).swapaxes(1, 2) if attrs.transpose_a else x.astype(dtype)
    y = y.astype(dtype).swapaxes(1, 2) if attrs.transpose_b else y.astype(dtype)
    return np.matmul(x, y)


defop("nn.batch_matmul", _batch_matmul_rel, _batch_matmul_ref, OUT_ELEMWISE_FUSABLE,
      args=("x", "y"), attrs=BatchMatmulAttrs, doc="Batched matrix product of 3-D tensors.")


def batch_matmul(x: Any, y: Any, out_dtype: str = "", transpose_a: bool = False,
                 transpose_b: bool = True) -> Call:
    """Batched ``x @ y``: by default x is (B, M, K) and y is (B, N, K) (transpose_b=True)."""
    attrs = BatchMatmulAttrs(out_dtype, transpose_a, transpose_b)
    return call("nn.batch_matmul", x, y, attrs=attrs)


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


defop("nn.bias_add", _channel_vector_rel("nn.bias_add", "bias"),
      lambda x, b, attrs: (x + _along(b, x.ndim, attrs.axis)).astype(x.dtype), BROADCAST,
      args=("data", "bias"), attrs=BiasAddAttrs, doc="Add a 1-D bias along an axis.",
      infer_args=lambda args, attrs: channel_vectors(args, attrs.axis))


def bias_add(data: Any, bias: Any, axis: int = 1) -> Call:
    """``data + bias`` with the 1-D bias running along ``axis``."""
    return call("nn.bias_add", data, bias, attrs=BiasAddAttrs(axis))


defop("nn.relu", lambda args, attrs: args[0], lambda x, attrs: np.maximum(x, x.dtype.type(0)),
      ELEMWISE, doc="max(x, 0).")
defop("nn.leaky_relu", lambda args, attrs: args[0],
      lambda x, attrs: np.where(x > 0, x, x * x.dtype.type(attrs.alpha)).astype(x.dtype),
      ELEMWISE, attrs=LeakyReluAttrs, doc="x if x > 0 else alpha * x.")
defop("nn.prelu", _channel_vector_rel("nn.prelu", "alpha"),
      lambda x, a, attrs: np.where(x > 0, x, x * _along(a, x.ndim, attrs.axis)).astype(x.dtype),
      BROADCAST, args=("data", "alpha"), attrs=PReluAttrs,
      doc="leaky_relu with a per-channel slope.",
      infer_args=lambda args, attrs: channel_vectors(args, attrs.axis))


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


defop("nn.softmax", _softmax_rel("nn.softmax"), _softmax_ref, OPAQUE, attrs=SoftmaxAttrs,
      doc="exp(x) / sum(exp(x)) along an axis.")
defop("nn.log_softmax", _softmax_rel("nn.log_softmax"),
      lambda x, attrs: _softmax_ref(x, attrs, log=True), OPAQUE, attrs=SoftmaxAttrs,
      doc="log(softmax(x)) along an axis, computed stably.")


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


defop("nn.batch_flatten", _batch_flatten_rel,
      lambda x, attrs: x.reshape(x.shape[0], int(np.prod(x.shape[1:]))), INJECTIVE,
      doc="Flatten all but the first axis.")


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


defop("nn.pad", _pad_rel, _pad_ref, INJECTIVE, args=("data", "pad_value"), attrs=PadAttrs,
      doc="Pad with a constant, the edge values or a reflection.", level=2)


def pad(data: Any, pad_width: Any, pad_value: Any = 0, pad_mode: str = "constant") -> Call:
    """``data`` padded by ``pad_width`` = ((before, after), ...) per axis."""
    return call("nn.pad", data, pad_value, attrs=PadAttrs(pad_width, pad_mode))


defop("nn.dropout", lambda args, attrs: TupleType((args[0], args[0])),
      lambda x, attrs: (x.copy(), np.ones_like(x)), OPAQUE, attrs=DropoutAttrs,
      doc="Dropout: (output, mask); the identity at inference.")


def dropout_raw(data: Any, rate: float = 0.5) -> Call:
    """The 2-tuple ``(output, mask)`` call of nn.dropout."""
    return call("nn.dropout", data, attrs=DropoutAttrs(rate))


def dropout(data: Any, rate: float = 0.5) -> Any:
    """Dropout's output (field 0 of nn.dropout); the identity at inference."""
    return TupleWrapper(dropout_raw(data, rate), 2)[0]


# ---------------------------------------------------------------- upsampling
def _scaled(d: Any, scale: float) -> Any:
    return int(np.floor(d * scale + 0.5)) if known(d) else AnyDim()  # C round, half away


def _upsampling_rel(args: list[TensorType], attrs: UpSamplingAttrs) -> TensorType:
    data = args[0]
    if data.ndim != 4:
        raise fail("nn.upsampling", f"data must have rank 4 (layout {attrs.layout}), got "
                                    f"shape {fmt_shape(data.shape)}")
    ha, wa = attrs.layout.index("H"), attrs.layout.index("W")
    shape = list(data.shape)
    shape[ha], shape[wa] = _scaled(shape[ha], attrs.scale_h), _scaled(shape[wa], attrs.scale_w)
    return tensor_of(shape, data.dtype)


def _source_coords(size: int, out: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return np.arange(out) * ((size - 1) / (out - 1) if out > 1 else 0.0)
    return np.arange(out) * (size / out)  # "asymmetric": x_in = x_out * in / out


def _resize_axis(x: np.ndarray, axis: int, out: int, attrs: UpSamplingAttrs) -> np.ndarray:
    size = x.shape[axis]
    src = _source_coords(size, out, attrs.align_corners)
    if attrs.method == "nearest_neighbor":
        idx = np.floor(src + 0.5) if attrs.align_corners else np.floor(src)
        return np.take(x, np.clip(idx.astype(np.int64), 0, size - 1), axis=axis)
    if attrs.method != "bilinear":
        from ....runtime.errors import OpAttributeUnImplemented

        raise OpAttributeUnImplemented(f"nn.upsampling: method {attrs.method!r} has no "
                                       "reference yet; use nearest_neighbor or bilinear")
    lo = np.floor(src).astype(np.int64)
    frac = (src - lo).astype(x.dtype)
    shape = [-1 if i == axis else 1 for i in range(x.ndim)]
    a = np.take(x, np.clip(lo, 0, size - 1), axis=axis)
    b = np.take(x, np.clip(lo + 1, 0, size - 1), axis=axis)
    return a + (b - a) * frac.reshape(shape)


def _upsampling_ref(x: np.ndarray, attrs: UpSamplingAttrs) -> np.ndarray:
    ha, wa = attrs.layout.index("H"), attrs.layout.index("W")
    out = _resize_axis(x, ha, _scaled(x.shape[ha], attrs.scale_h), attrs)
    return _resize_axis(out, wa, _scaled(x.shape[wa], attrs.scale_w), attrs).astype(x.dtype)


defop("nn.upsampling", _upsampling_rel, _upsampling_ref, INJECTIVE, attrs=UpSamplingAttrs,
      doc="Upsample H and W by scale factors.", level=2)


def upsampling(data: Any, scale_h: float = 1, scale_w: float = 1, layout: str = "NCHW",
               method: str = "nearest_neighbor", align_corners: bool = False) -> Call:
    """Upsample H and W by ``scale_h``/``scale_w`` (nearest_neighbor or bilinear)."""
    attrs = UpSamplingAttrs(scale_h, scale_w, layout, method, align_corners)
    return call("nn.upsampling", data, attrs=attrs)
