"""Converters of the dense and normalisation operators: Gemm, MatMul, BatchNormalization,
InstanceNormalization, LayerNormalization, Softmax/LogSoftmax/Hardmax, Dropout, LRN."""
from __future__ import annotations

from typing import Any

from ....ir.expr import RelayExpr
from ....ir.types import TensorType
from ... import op as _op
from ...op._shape import broadcast_dim
from ._node import Node
from ._util import expand_to_rank, flatten_to_2d, norm_axis, scalar, static
from .ops_norm import batch_norm_training


# ---------------------------------------------------------------- Gemm, MatMul
def gemm(node: Node) -> RelayExpr:
    """alpha * A' @ B' + beta * C with nn.dense (B' is transposed into dense's (N, K))."""
    a, b = node.input(0, "A"), node.input(1, "B")
    if node.ndim(0) != 2 or node.ndim(1) != 2:
        raise node.fail(f"A and B must be matrices, got ranks {node.ndim(0)} and {node.ndim(1)}")
    dtype = node.dtype(0)
    if node.attr("transA", 0):
        a = _op.transpose(a, (1, 0))
    if not node.attr("transB", 0):
        b = _op.transpose(b, (1, 0))
    out = _op.nn.dense(a, b)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        out = _op.multiply(out, scalar(alpha, dtype))
    if node.has_input(2) and beta != 0.0:
        c = node.input(2)
        out = _op.add(out, c if beta == 1.0 else _op.multiply(c, scalar(beta, dtype)))
    return out


def matmul(node: Node) -> RelayExpr:
    """numpy matmul: 1-D operands are promoted and the added axis dropped; a 2-D right operand
    is a dense layer; otherwise batch dims broadcast into one nn.batch_matmul."""
    return matmul_expr(node, node.input(0, "A"), node.input(1, "B"))


def matmul_expr(node: Node, a: RelayExpr, b: RelayExpr) -> RelayExpr:
    """numpy's matmul of ``a`` and ``b`` (MatMul's rule, also for MatMulInteger and
    QLinearMatMul, whose operands are computed first)."""
    at, bt = node.type_of(a), node.type_of(b)
    a_ndim, b_ndim = at.ndim, bt.ndim
    if at.ndim == 0 or bt.ndim == 0:
        raise node.fail("MatMul operands must have rank >= 1")
    if at.ndim == 1:
        a, at = _op.expand_dims(a, 0), TensorType((1, *at.shape), at.dtype)
    if bt.ndim == 1:
        b, bt = _op.expand_dims(b, 1), TensorType((*bt.shape, 1), bt.dtype)
    if bt.ndim == 2:
        out = _op.nn.dense(a, _op.transpose(b, (1, 0)))
    else:
        out = _batch_matmul(node, a, b, at, bt)
    drop = ([-2] if a_ndim == 1 else []) + ([-1] if b_ndim == 1 else [])
    return _op.squeeze(out, drop) if drop else out


def _batch_matmul(node: Node, a: RelayExpr, b: RelayExpr, at: TensorType,
                  bt: TensorType) -> RelayExpr:
    n = max(at.ndim, bt.ndim)
    batch_a = (1,) * (n - at.ndim) + tuple(at.shape[:-2])
    batch_b = (1,) * (n - bt.ndim) + tuple(bt.shape[:-2])
    batch = []
    for i, (x, y) in enumerate(zip(batch_a, batch_b)):
        d = broadcast_dim(x, y)
        if d is None:
            raise node.fail(f"batch dimension {i} differs: A {at.shape}, B {bt.shape}")
        batch.append(d)
    out = _op.nn.batch_matmul(_to_batch(node, a, at, batch_a, batch),
                              _to_batch(node, b, bt, batch_b, batch), transpose_b=False)
    if len(batch) == 1:
        return out
    if static(batch):  # (B, M, N) -> (*batch, M, N), M and N copied from the right
        return _op.reverse_reshape(out, (*batch, 0, 0))
    like = a if at.ndim == n and _same(batch_a, batch) else b
    return _op.reshape_like(out, like, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=len(batch))


def _same(xs: Any, ys: Any) -> bool:
    return all(x is y or x == y for x, y in zip(xs, ys))


def _to_batch(node: Node, x: RelayExpr, ty: TensorType, own: tuple[Any, ...],
              batch: list[Any]) -> RelayExpr:
    """``x`` as a rank-3 (batch, rows, cols) operand, broadcast to ``batch`` if needed."""
    if ty.ndim == 2:
        return _op.expand_dims(x, 0)
    if not _same(own, batch) and any(not (isinstance(d, int) and d == 1) for d in own):
        if not static(batch) or not static(ty.shape):
            raise node.unsupported(f"broadcasting batch dims {own} to {tuple(batch)} needs "
                                   "static sizes")
        x = _op.broadcast_to(x, (*batch, *ty.shape[-2:]))
    return _op.reverse_reshape(x, (-1, 0, 0))


# ---------------------------------------------------------------- normalisation
def batch_norm(node: Node) -> Any:
    """Inference-mode BatchNormalization (SimplifyInference folds it into scale and shift);
    training mode (``training_mode``, or running statistics asked for) is decomposed."""
    if node.attr("training_mode", 0) or any(node.wants_output(i) for i in (1, 2, 3, 4)):
        return batch_norm_training(node)
    if node.attr("spatial", 1) != 1:  # versions before 9: per-element statistics
        return _batch_norm_per_element(node)
    x = node.input(0, "X")
    args = [node.input(i, what) for i, what in enumerate(("X", "scale", "B", "mean", "var"))]
    out = _op.nn.batch_norm(x, *args[1:], axis=1, epsilon=node.attr("epsilon", 1e-5))
    return out[0]


def _batch_norm_per_element(node: Node) -> RelayExpr:
    """``spatial=0`` (versions 7 and 8): scale, B, mean and var of shape (C, D1, ...), one
    value per element of a sample: ``(x - mean) * scale / sqrt(var + eps) + B``, broadcast
    over the batch (constant statistics fold into one multiply and add)."""
    x, dtype = node.input(0, "X"), node.dtype(0)
    want = node.shape(0)[1:]
    for i, what in enumerate(("scale", "B", "mean", "var"), start=1):
        if node.ndim(i) != len(want):
            raise node.fail(f"spatial=0: {what} has shape {node.shape(i)}, not the shape of "
                            f"a sample {want}")
    scale, bias, mean, var = (node.input(i) for i in (1, 2, 3, 4))
    inv_std = _op.rsqrt(_op.add(var, scalar(node.attr("epsilon", 1e-5), dtype)))
    return _op.add(_op.multiply(_op.subtract(x, mean), _op.multiply(scale, inv_std)), bias)


def _normalize(x: RelayExpr, axes: list[int], eps: float, dtype: str) -> tuple[RelayExpr, ...]:
    """(normalised x, mean, 1/std) over ``axes`` (keepdims)."""
    mean = _op.mean(x, axis=axes, keepdims=True)
    centered = _op.subtract(x, mean)
    var = _op.mean(_op.multiply(centered, centered), axis=axes, keepdims=True)
    inv_std = _op.rsqrt(_op.add(var, scalar(eps, dtype)))
    return _op.multiply(centered, inv_std), mean, inv_std


def instance_norm(node: Node) -> RelayExpr:
    x, ndim, dtype = node.input(0), node.ndim(0), node.dtype(0)
    if ndim < 3:
        raise node.fail(f"input must have rank >= 3 (N, C, spatial...), got rank {ndim}")
    y, _, _ = _normalize(x, list(range(2, ndim)), node.attr("epsilon", 1e-5), dtype)
    scale = expand_to_rank(node.input(1, "scale"), ndim, 1)
    bias = expand_to_rank(node.input(2, "B"), ndim, 1)
    return _op.add(_op.multiply(y, scale), bias)


def layer_norm(node: Node) -> Any:
    """LayerNormalization (opset 17): over axes [axis, rank); nn.layer_norm for the last axis
    alone, mean/variance otherwise or when Mean/InvStdDev are asked for."""
    x, xt = node.input(0, "X"), node.type(0)
    axis = norm_axis(node, node.attr("axis", -1), xt.ndim)
    eps = node.attr("epsilon", 1e-5)
    if node.attr("stash_type", 1) != 1:
        raise node.unsupported_attr("stash_type", node.attr("stash_type"), "1 (float32)")
    scale = node.input(1, "Scale")
    bias = node.optional(2)
    extra = node.wants_output(1) or node.wants_output(2)
    vectors = node.ndim(1) == 1 and (bias is None or node.ndim(2) == 1)
    if axis == xt.ndim - 1 and not extra and vectors:
        beta = _op.zeros_like(scale) if bias is None else bias
        return _op.nn.layer_norm(x, scale, beta, axis=-1, epsilon=eps)
    y, mean, inv_std = _normalize(x, list(range(axis, xt.ndim)), eps, xt.dtype)
    y = _op.multiply(y, scale)
    if bias is not None:
        y = _op.add(y, bias)
    return [y, mean, inv_std]


def lrn(node: Node) -> RelayExpr:
    """LRN: x / (bias + alpha/size * sum of squares over a window of channels) ** beta."""
    x, xt = node.input(0), node.type(0)
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    if xt.ndim != 4:
        raise node.unsupported(f"input of rank {xt.ndim} (only NCHW, rank 4)")
    lo, hi = (size - 1) // 2, size // 2
    sq = _op.expand_dims(_op.multiply(x, x), 1)  # (N, 1, C, H, W): pool over C as height
    sq = _op.reshape(sq, (0, 0, 0, -1))
    pooled = _op.nn.avg_pool2d(sq, pool_size=(size, 1), padding=(lo, 0, hi, 0),
                               count_include_pad=True)
    pooled = _op.reshape_like(_op.squeeze(pooled, [1]), x)
    dtype = xt.dtype
    denom = _op.power(_op.add(scalar(bias, dtype), _op.multiply(scalar(alpha, dtype), pooled)),
                      scalar(beta, dtype))
    return _op.divide(x, denom)


# ---------------------------------------------------------------- softmax family, dropout
def _softmax_like(node: Node, fn: Any) -> RelayExpr:
    """Opset 13+: along ``axis`` (default -1). Before: input coerced to 2-D at ``axis``
    (default 1) and normalised over the whole second part."""
    x, xt = node.input(0), node.type(0)
    if node.opset >= 13:
        return fn(x, norm_axis(node, node.attr("axis", -1), xt.ndim))
    axis = norm_axis(node, node.attr("axis", 1), xt.ndim)
    if axis == xt.ndim - 1:
        return fn(x, -1)
    return _op.reshape_like(fn(flatten_to_2d(x, xt, axis), -1), x)


def softmax(node: Node) -> RelayExpr:
    return _softmax_like(node, lambda x, axis: _op.nn.softmax(x, axis))


def log_softmax(node: Node) -> RelayExpr:
    return _softmax_like(node, lambda x, axis: _op.nn.log_softmax(x, axis))


def hardmax(node: Node) -> RelayExpr:
    """1 at the first maximum along the axis, 0 elsewhere (one_hot of argmax)."""
    def fn(x: RelayExpr, axis: int) -> RelayExpr:
        ty = node.type_of(x)
        depth = ty.shape[axis]
        if not isinstance(depth, int):
            raise node.unsupported("a dynamic size along the axis")
        idx = _op.argmax(x, axis=[axis])
        one, zero = scalar(1, ty.dtype), scalar(0, ty.dtype)
        return _op.one_hot(idx, one, zero, depth, axis % ty.ndim, ty.dtype)

    return _softmax_like(node, fn)


def dropout(node: Node) -> Any:
    """Inference: the identity; the mask output is all True (all ones of the input's type
    before version 10, whose mask has the input's type)."""
    if node.has_input(2):
        training = node.value(2)
        if training is None or bool(training.reshape(-1)[0]):
            raise node.unsupported("training_mode must be a constant false")
    x = node.input(0)
    mask = None
    if node.wants_output(1):
        mask = _op.ones_like(x) if node.version < 10 else _op.cast(_op.ones_like(x), "bool")
    return [x, mask]
