"""Converters of the normalisation operators that ONNX defines as functions, decomposed into
means, variances and elementwise ops: GroupNormalization, MeanVarianceNormalization,
LpNormalization, RMSNormalization, and BatchNormalization in training mode (batch statistics
and updated running statistics)."""
from __future__ import annotations

from typing import Any

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import expand_to_rank, norm_axes, norm_axis, scalar


def _float(node: Node, i: int = 0) -> tuple[RelayExpr, str]:
    dtype = node.dtype(i)
    if not dtype.startswith("float"):
        raise node.fail(f"input {i} must be a floating-point tensor, got {dtype}")
    return node.input(i), dtype


def _mean_var(x: RelayExpr, axes: list[int]) -> tuple[RelayExpr, RelayExpr]:
    """Mean and population variance over ``axes`` (keepdims)."""
    mean = _op.mean(x, axis=axes, keepdims=True)
    centered = _op.subtract(x, mean)
    return mean, _op.mean(_op.multiply(centered, centered), axis=axes, keepdims=True)


def group_norm(node: Node) -> RelayExpr:
    """(x - mean) / sqrt(var + epsilon) over each group of channels and the spatial axes,
    then scale and bias per channel (version 21; version 18 is deprecated in ONNX)."""
    x, dtype = _float(node)
    shape, ndim = node.static_shape(0, "X"), node.ndim(0)
    groups = node.attr("num_groups")
    if ndim < 3 or groups <= 0 or shape[1] % groups:
        raise node.fail(f"X {shape} must be (N, C, spatial...) with C divisible by "
                        f"num_groups={groups}")
    grouped = _op.reshape(x, (shape[0], groups, -1))
    mean, var = _mean_var(grouped, [2])
    eps = scalar(node.attr("epsilon", 1e-5), dtype)
    y = _op.reshape(_op.divide(_op.subtract(grouped, mean), _op.sqrt(_op.add(var, eps))), shape)
    scale, bias = node.input(1, "scale"), node.input(2, "bias")
    return _op.add(_op.multiply(y, expand_to_rank(scale, ndim, 1)),
                   expand_to_rank(bias, ndim, 1))


def mean_variance_normalization(node: Node) -> RelayExpr:
    """(x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9) over ``axes`` (default 0, 2, 3), as
    ONNX's function body computes it."""
    x, dtype = _float(node)
    return mvn_expr(x, dtype, norm_axes(node, node.attr("axes", [0, 2, 3]), node.ndim(0)))


def mvn_expr(x: RelayExpr, dtype: str, axes: list[int], variance: bool = True) -> RelayExpr:
    """``x - mean`` over ``axes``, divided by ``sqrt(mean(x^2) - mean^2) + 1e-9`` when
    ``variance``."""
    mean = _op.mean(x, axis=axes, keepdims=True)
    if not variance:
        return _op.subtract(x, mean)
    var = _op.subtract(_op.mean(_op.multiply(x, x), axis=axes, keepdims=True),
                       _op.multiply(mean, mean))
    std = _op.add(_op.sqrt(var), scalar(1e-9, dtype))
    return _op.divide(_op.subtract(x, mean), std)


def lp_normalization(node: Node) -> RelayExpr:
    """x / (sum |x|^p)^(1/p) along ``axis``, p 1 or 2; 0 where the norm is 0."""
    x, dtype = _float(node)
    axis = norm_axis(node, node.attr("axis", -1), node.ndim(0))
    p = node.attr("p", 2)
    if p not in (1, 2):
        raise node.invalid_attr("p", p, "1 or 2")
    if p == 1:
        norm = _op.sum(_op.abs(x), axis=[axis], keepdims=True)
    else:
        norm = _op.sqrt(_op.sum(_op.multiply(x, x), axis=[axis], keepdims=True))
    zero = scalar(0.0, dtype)
    is_zero = _op.equal(norm, zero)
    safe = _op.where(is_zero, scalar(1.0, dtype), norm)
    return _op.where(is_zero, zero, _op.divide(x, safe))


def rms_normalization(node: Node) -> RelayExpr:
    """x / sqrt(mean(x^2) + epsilon) over the axes from ``axis`` on, times scale."""
    x, dtype = _float(node)
    ndim = node.ndim(0)
    axis = norm_axis(node, node.attr("axis", -1), ndim)
    if node.attr("stash_type", 1) != 1:
        raise node.unsupported_attr("stash_type", node.attr("stash_type"), "1 (float32)")
    axes = list(range(axis, ndim))
    ms = _op.mean(_op.multiply(x, x), axis=axes, keepdims=True)
    y = _op.multiply(x, _op.rsqrt(_op.add(ms, scalar(node.attr("epsilon", 1e-5), dtype))))
    return _op.multiply(y, node.input(1, "scale"))


def batch_norm_training(node: Node) -> list[Any]:
    """Training mode: normalise with the batch's mean and population variance over every axis
    but 1; outputs Y, then running mean and variance updated with ``momentum`` (versions
    14+: outputs 1 and 2; before, also the saved batch mean and variance)."""
    x, dtype = _float(node)
    ndim = node.ndim(0)
    axes = [a for a in range(ndim) if a != 1]
    mean, var = _mean_var(x, axes)
    eps = scalar(node.attr("epsilon", 1e-5), dtype)
    scale = expand_to_rank(node.input(1, "scale"), ndim, 1)
    bias = expand_to_rank(node.input(2, "B"), ndim, 1)
    y = _op.add(_op.multiply(_op.divide(_op.subtract(x, mean), _op.sqrt(_op.add(var, eps))),
                             scale), bias)
    momentum = node.attr("momentum", 0.9)
    batch_mean, batch_var = _op.squeeze(mean, axes), _op.squeeze(var, axes)

    def running(i: int, batch: RelayExpr) -> RelayExpr:
        old = _op.multiply(node.input(i), scalar(momentum, dtype))
        return _op.add(old, _op.multiply(batch, scalar(1.0 - momentum, dtype)))

    return [y, running(3, batch_mean), running(4, batch_var), batch_mean, batch_var]
