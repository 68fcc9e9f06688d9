"""Compute rules of the dense/activation/normalisation ops (nn/nn.py, nn/norm.py): dense,
matmul, batch_matmul, softmax, log_softmax, pad, dropout, upsampling, batch_norm, layer_norm.

dense/matmul/batch_matmul in float32 with static shapes call the C GEMM kernel
(``topi.nn.gemm_kernel``: any rank of dense data, batch dims flattened); other static cases
use topi's packed GEMM templates, symbolic ones a plain reduction that works for any size.
"""
from __future__ import annotations

from typing import Any

from .... import topi
from ....ir.types import Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ....topi.nn import gemm_kernel as gk
from ....topi.nn import norm_kernel
from ._common import (
    as_int,
    broadcast_dims,
    identity,
    not_implemented,
    out_dims,
    register_compute,
    require_equal,
    scalar,
)


def all_static(*tensors: te.Tensor) -> bool:
    return all(as_int(d) is not None for t in tensors for d in t.shape)


def _pick(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """Of two dimensions that must be equal, the static one if there is one (the kernel
    checks at run time that they are equal)."""
    require_equal(a, b, "the operands' inner (reduction) dimensions must have the same size")
    return a if as_int(a) is not None else b


def matmul_generic(a: te.Tensor, b: te.Tensor, ta: bool, tb: bool, dtype: str,
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


@register_compute("nn.dense")
def dense(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    if dtype == "float32" and gk.eligible(data, weight):
        ops = gk.dense_operands(data, weight)
        return [gk.sgemm(data, weight, ops, out_dims(out_type, data.shape), name="T_dense")]
    if data.ndim == 2 and all_static(data, weight):
        return [topi.nn.dense(data, weight, None, dtype)]
    return [matmul_generic(data, weight, False, True, dtype, "T_dense")]


@register_compute("nn.matmul")
def matmul(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    a, b = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    if dtype == "float32" and not attrs.transpose_a and gk.eligible(a, b):
        ops = gk.matmul_operands(a, b, attrs.transpose_b)
        return [gk.sgemm(a, b, ops, out_dims(out_type, a.shape), name="T_matmul")]
    if a.ndim == 2 and all_static(a, b):
        return [topi.nn.matmul(a, b, attrs.transpose_a, attrs.transpose_b, dtype)]
    return [matmul_generic(a, b, attrs.transpose_a, attrs.transpose_b, dtype, "T_matmul")]


@register_compute("nn.batch_matmul")
def batch_matmul(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, y = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    ta, tb = attrs.transpose_a, attrs.transpose_b
    if dtype == "float32" and not ta and gk.eligible(x, y):
        ops = gk.batch_matmul_operands(x, y, tb)
        return [gk.sgemm(x, y, ops, out_dims(out_type, x.shape), name="T_batch_matmul")]
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


@register_compute("nn.softmax")
def softmax(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The C kernel (float32, static shapes), else the te reductions."""
    if norm_kernel.eligible(inputs[0]):
        return [norm_kernel.softmax(inputs[0], attrs.axis)]
    return [topi.nn.softmax(inputs[0], attrs.axis)]


@register_compute("nn.log_softmax")
def log_softmax(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The C kernel (float32, static shapes), else the te reductions."""
    if norm_kernel.eligible(inputs[0]):
        return [norm_kernel.softmax(inputs[0], attrs.axis, log=True)]
    return [topi.nn.log_softmax(inputs[0], attrs.axis)]


@register_compute("nn.dropout")
def dropout(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Inference: (the data, a mask of ones)."""
    x = inputs[0]
    return [identity(x, "T_dropout"), topi.full(x.shape, x.dtype, 1)]


@register_compute("nn.batch_norm")
def batch_norm(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Inference: the normalised data, and the moving statistics passed through."""
    data, gamma, beta, mean, var = inputs
    out = topi.nn.batch_norm(data, gamma, beta, mean, var, attrs.axis, attrs.epsilon,
                             attrs.center, attrs.scale)
    return [out, identity(mean, "T_bn_mean"), identity(var, "T_bn_var")]


@register_compute("nn.layer_norm")
def layer_norm(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The C kernel (float32, static shapes), else the te reductions."""
    data, gamma, beta = inputs
    if norm_kernel.eligible(data, gamma, beta):
        return [norm_kernel.layer_norm(data, gamma if attrs.scale else None,
                                       beta if attrs.center else None, attrs.axis,
                                       attrs.epsilon)]
    return [topi.nn.layer_norm(data, gamma, beta, attrs.axis, attrs.epsilon, attrs.center,
                               attrs.scale)]


# ---------------------------------------------------------------- pad, upsampling
def _pad_source(i: PrimExpr, before: int, d: PrimExpr, mode: str) -> PrimExpr:
    j = i - before
    if mode == "edge":
        return tir.min(tir.max(j, tir.const(0)), d - 1)
    # reflect (numpy): mirror without repeating the edge; pads are smaller than the axis
    j = tir.Select_(j < 0, tir.const(0) - j, j)
    return tir.Select_(j >= d, (d - 1) * 2 - j, j)


@register_compute("nn.pad")
def pad(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
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


def _f64(v: Any) -> PrimExpr:
    return tir.cast(v, "float64")


@register_compute("nn.upsampling")
def upsampling(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Nearest or bilinear resize with the reference's coordinates: x_in = x_out * in / out
    ("asymmetric"), or corner-aligned; bilinear interpolates H first, then W."""
    x = inputs[0]
    ha, wa = attrs.layout.index("H"), attrs.layout.index("W")
    if attrs.method not in ("nearest_neighbor", "bilinear"):
        raise not_implemented("nn.upsampling", f"method {attrs.method!r}")
    dims = list(x.shape)
    for ax, scale in ((ha, attrs.scale_h), (wa, attrs.scale_w)):
        dims[ax] = tir.cast(tir.floor(_f64(x.shape[ax]) * scale + 0.5), "int32")
    shape = out_dims(out_type, dims)  # type: ignore[arg-type]

    def coord(i: PrimExpr, ax: int) -> PrimExpr:
        size, out = x.shape[ax], shape[ax]
        if attrs.align_corners:
            ratio = tir.Select_(out > 1, _f64(size - 1) / _f64(out - 1), tir.const(0.0, "float64"))
            return _f64(i) * ratio
        return _f64(i) * (_f64(size) / _f64(out))

    def clamp(v: PrimExpr, ax: int) -> PrimExpr:
        return tir.min(tir.max(v, tir.const(0)), x.shape[ax] - 1)

    def at(idx: tuple, y: PrimExpr, w: PrimExpr) -> PrimExpr:
        src = list(idx)
        src[ha], src[wa] = y, w
        return x(*src)

    if attrs.method == "nearest_neighbor":
        def near(*idx: PrimExpr) -> PrimExpr:
            def pick(ax: int) -> PrimExpr:
                c = coord(idx[ax], ax)
                return clamp(tir.cast(tir.floor(c + 0.5 if attrs.align_corners else c), "int32"),
                             ax)
            return at(idx, pick(ha), pick(wa))
        return [te.compute(shape, near, name="T_upsampling", tag="injective")]

    def lerp(*idx: PrimExpr) -> PrimExpr:
        cy, cx = coord(idx[ha], ha), coord(idx[wa], wa)
        y0, x0 = tir.floor(cy), tir.floor(cx)
        fy, fx = tir.cast(cy - y0, x.dtype), tir.cast(cx - x0, x.dtype)
        ya, xa = clamp(tir.cast(y0, "int32"), ha), clamp(tir.cast(x0, "int32"), wa)
        yb, xb = clamp(tir.cast(y0, "int32") + 1, ha), clamp(tir.cast(x0, "int32") + 1, wa)

        def row(w: PrimExpr) -> PrimExpr:
            a = at(idx, ya, w)
            return a + (at(idx, yb, w) - a) * fy

        left = row(xa)
        return left + (row(xb) - left) * fx

    return [te.compute(shape, lerp, name="T_upsampling", tag="injective")]
