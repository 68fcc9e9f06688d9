"""Matrix products: nn.dense, nn.matmul and nn.batch_matmul.

In float32 the computes call the C GEMM kernel (``topi.nn.gemm_kernel``: any rank of dense
data, batch dims flattened), with static sizes or with run-time ones (``?`` dimensions) passed
to the kernel as arguments; other static cases use topi's packed GEMM templates, other
symbolic ones a plain reduction that works for any size.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .... import topi
from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ....topi.nn import gemm_kernel as gk
from .._compute_common import all_static, as_int, broadcast_dims, out_dims, require_equal
from .._reg import OUT_ELEMWISE_FUSABLE, call, defop
from .._shape import broadcast_dim, fail, fmt_dim, fmt_shape, may_equal, tensor_of
from ._attrs import BatchMatmulAttrs, DenseAttrs, MatmulAttrs

__all__ = ["batch_matmul", "dense", "matmul"]


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


def _matmul_ref(a: np.ndarray, b: np.ndarray, ta: bool, tb: bool, dtype: Any) -> np.ndarray:
    a, b = a.astype(dtype or a.dtype), b.astype(dtype or a.dtype)
    return np.matmul(a.T if ta else a, b.T if tb else b)


def _pick(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """Of two dimensions that must be equal, the static one if there is one (the kernel
    checks at run time that they are equal)."""
    require_equal(a, b, "the operands' inner (reduction) dimensions must have the same size")
    return a if as_int(a) is not None else b


def _matmul_generic(a: te.Tensor, b: te.Tensor, ta: bool, tb: bool, dtype: str,
                    name: str) -> te.Tensor:
    """``a @ b`` (each optionally transposed; ``a`` may have leading batch dims, ``b`` 2-d) as
    one reduction stage: works with symbolic dimensions."""
    K = _pick(b.shape[1] if tb else b.shape[0], a.shape[0] if ta else a.shape[-1])
    N = b.shape[0] if tb else b.shape[1]
    lead = (a.shape[1],) if ta else tuple(a.shape[:-1])
    k = te.reduce_axis((0, K), "k")

    def f(*i: PrimExpr) -> PrimExpr:
        rows, n = i[:-1], i[-1]
        av = a[k, rows[0]] if ta else a(*rows, k)
        bv = b[n, k] if tb else b[k, n]
        return te.sum(tir.cast(av, dtype) * tir.cast(bv, dtype), axis=k)

    return te.compute(lead + (N,), f, name=name, tag="comm_reduce")


# ---------------------------------------------------------------- dense
def _dense_rel(args: list[TensorType], attrs: DenseAttrs) -> TensorType:
    shape = _matmul_shape("nn.dense", args[0], args[1], False, True, attrs.units)
    return tensor_of(shape, attrs.out_dtype or args[0].dtype)


def _dense_infer_args(args: list[Any], attrs: DenseAttrs) -> list[Any]:
    if args[0] is None or attrs.units is None:
        return [None, None]
    return [None, tensor_of((attrs.units, args[0].shape[-1]), args[0].dtype)]


def _dense_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    if dtype == "float32" and gk.eligible(data, weight):
        ops = gk.dense_operands(data, weight)
        shape = out_dims(out_type, gk.output_shape(data, ops, batched=False))
        return [gk.sgemm(data, weight, ops, shape, name="T_dense")]
    if data.ndim == 2 and all_static(data, weight):
        return [topi.nn.dense(data, weight, None, dtype)]
    return [_matmul_generic(data, weight, False, True, dtype, "T_dense")]


defop("nn.dense", _dense_rel, lambda x, w, attrs: _matmul_ref(x, w, False, True, attrs.out_dtype),
      OUT_ELEMWISE_FUSABLE, args=("data", "weight"), attrs=DenseAttrs,
      doc="data @ weight.T: (..., K) x (N, K) -> (..., N).", infer_args=_dense_infer_args,
      compute=_dense_compute)


def dense(data: Any, weight: Any, units: int | None = None, out_dtype: str = "") -> Call:
    """Fully connected layer: ``data (..., K) @ weight (N, K).T -> (..., N)``."""
    return call("nn.dense", data, weight, attrs=DenseAttrs(units, out_dtype))


# ---------------------------------------------------------------- matmul
def _nn_matmul_rel(args: list[TensorType], attrs: MatmulAttrs) -> TensorType:
    shape = _matmul_shape("nn.matmul", args[0], args[1], attrs.transpose_a, attrs.transpose_b,
                          attrs.units)
    return tensor_of(shape, attrs.out_dtype or args[0].dtype)


def _matmul_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    a, b = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    if dtype == "float32" and not attrs.transpose_a and gk.eligible(a, b):
        ops = gk.matmul_operands(a, b, attrs.transpose_b)
        shape = out_dims(out_type, gk.output_shape(a, ops, batched=False))
        return [gk.sgemm(a, b, ops, shape, name="T_matmul")]
    if a.ndim == 2 and all_static(a, b):
        return [topi.nn.matmul(a, b, attrs.transpose_a, attrs.transpose_b, dtype)]
    return [_matmul_generic(a, b, attrs.transpose_a, attrs.transpose_b, dtype, "T_matmul")]


defop("nn.matmul", _nn_matmul_rel,
      lambda a, b, attrs: _matmul_ref(a, b, attrs.transpose_a, attrs.transpose_b, attrs.out_dtype),
      OUT_ELEMWISE_FUSABLE, args=("tensor_a", "tensor_b"), attrs=MatmulAttrs,
      doc="tensor_a @ tensor_b with optional transposes (tensor_b is 2-D).",
      compute=_matmul_compute)


def matmul(tensor_a: Any, tensor_b: Any, units: int | None = None, out_dtype: str = "",
           transpose_a: bool = False, transpose_b: bool = False) -> Call:
    """``tensor_a @ tensor_b`` (each optionally transposed); tensor_b is 2-D."""
    attrs = MatmulAttrs(units, out_dtype, transpose_a, transpose_b)
    return call("nn.matmul", tensor_a, tensor_b, attrs=attrs)


# ---------------------------------------------------------------- batch_matmul
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


def _batch_matmul_compute(attrs: Any, inputs: list[te.Tensor],
                          out_type: Type) -> list[te.Tensor]:
    x, y = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    ta, tb = attrs.transpose_a, attrs.transpose_b
    if dtype == "float32" and not ta and gk.eligible(x, y):
        ops = gk.batch_matmul_operands(x, y, tb)
        shape = out_dims(out_type, gk.output_shape(x, ops, batched=True))
        return [gk.sgemm(x, y, ops, shape, name="T_batch_matmul")]
    if all_static(x, y):
        return [topi.nn.batch_matmul(x, y, dtype, ta, tb)]
    K = _pick(y.shape[2] if tb else y.shape[1], x.shape[1] if ta else x.shape[2])
    M, N = x.shape[2] if ta else x.shape[1], y.shape[1] if tb else y.shape[2]
    batch = broadcast_dims([x.shape[0]], [y.shape[0]])[0]
    k = te.reduce_axis((0, K), "k")

    def at(t: te.Tensor, bi: PrimExpr) -> PrimExpr:
        d = t.shape[0]
        return tir.const(0) if as_int(d) == 1 else (
            bi if as_int(d) is not None or d is batch else tir.Select_(d == 1, 0, bi))

    def f(b: PrimExpr, m: PrimExpr, n: PrimExpr) -> PrimExpr:
        xv = x[at(x, b), k, m] if ta else x[at(x, b), m, k]
        yv = y[at(y, b), n, k] if tb else y[at(y, b), k, n]
        return te.sum(tir.cast(xv, dtype) * tir.cast(yv, dtype), axis=k)

    return [te.compute((batch, M, N), f, name="T_batch_matmul", tag="comm_reduce")]


defop("nn.batch_matmul", _batch_matmul_rel, _batch_matmul_ref, OUT_ELEMWISE_FUSABLE,
      args=("x", "y"), attrs=BatchMatmulAttrs, doc="Batched matrix product of 3-D tensors.",
      compute=_batch_matmul_compute)


def batch_matmul(x: Any, y: Any, out_dtype: str = "", transpose_a: bool = False,
                 transpose_b: bool = True) -> Call:
    """Batched ``x @ y``: by default x is (B, M, K) and y is (B, N, K) (transpose_b=True)."""
    attrs = BatchMatmulAttrs(out_dtype, transpose_a, transpose_b)
    return call("nn.batch_matmul", x, y, attrs=attrs)
