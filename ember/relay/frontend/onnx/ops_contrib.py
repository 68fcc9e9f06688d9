"""Converters of the com.microsoft operators that onnxruntime's optimiser and transformer
exporters commonly leave in models, decomposed into Relay ops: FusedMatMul, FusedGemm,
FusedConv, the Gelu family (Gelu, FastGelu, BiasGelu, QuickGelu), BiasAdd, the skip layer
norms and SimplifiedLayerNormalization; the attention operators are in ``ops_attention``.

``CONTRIB`` is their support table (every one is version 1 of its domain), read with the
default domain's by ``_domains.py``.
"""
from __future__ import annotations

from typing import Any

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import norm_axis, scalar
from .ops_attention import attention, multi_head_attention
from .ops_conv import conv_expr
from .ops_math import gelu_expr
from .ops_nn import gemm, matmul_expr

DOMAIN = "com.microsoft"


def _float(node: Node, i: int = 0) -> tuple[RelayExpr, str]:
    dtype = node.dtype(i)
    if not dtype.startswith("float"):
        raise node.fail(f"input {i} must be a floating-point tensor, got {dtype}")
    return node.input(i), dtype


# ---------------------------------------------------------------- fused products
def _swap_last(node: Node, x: RelayExpr) -> RelayExpr:
    ndim = node.type_of(x).ndim
    if ndim < 2:
        raise node.fail("transA/transB need operands of rank >= 2")
    return _op.transpose(x, (*range(ndim - 2), ndim - 1, ndim - 2))


def fused_matmul(node: Node) -> RelayExpr:
    """alpha * op(A) @ op(B), op transposing the last two axes when transA/transB."""
    for name in ("transBatchA", "transBatchB"):
        if node.attr(name, 0):
            raise node.unsupported_attr(name, node.attr(name), "0")
    a, b = node.input(0, "A"), node.input(1, "B")
    a = _swap_last(node, a) if node.attr("transA", 0) else a
    b = _swap_last(node, b) if node.attr("transB", 0) else b
    out = matmul_expr(node, a, b)
    alpha = node.attr("alpha", 1.0)
    return out if alpha == 1.0 else _op.multiply(out, scalar(alpha, node.dtype(0)))


def _activation(node: Node, x: RelayExpr, dtype: str) -> RelayExpr:
    """FusedConv's and FusedGemm's ``activation`` (with ``activation_params``/_alpha...)."""
    kind = node.attr("activation", "")
    params = list(node.attr("activation_params", []) or [])
    alpha = node.attr("activation_alpha", params[0] if params else None)
    beta = node.attr("activation_beta", params[1] if len(params) > 1 else None)
    if kind in ("", "Identity"):
        return x
    if kind == "Relu":
        return _op.nn.relu(x)
    if kind == "Tanh":
        return _op.tanh(x)
    if kind == "Sigmoid":
        return _op.sigmoid(x)
    if kind == "LeakyRelu":
        return _op.nn.leaky_relu(x, 0.01 if alpha is None else alpha)
    if kind == "Clip":
        return _op.clip(x, float("-inf") if alpha is None else alpha,
                        float("inf") if beta is None else beta)
    if kind == "HardSigmoid":
        a, b = 0.2 if alpha is None else alpha, 0.5 if beta is None else beta
        return _op.clip(_op.add(_op.multiply(x, scalar(a, dtype)), scalar(b, dtype)), 0.0, 1.0)
    raise node.unsupported_attr("activation", kind, "Relu, Tanh, Sigmoid, LeakyRelu, Clip, "
                                "HardSigmoid")


def fused_conv(node: Node) -> RelayExpr:
    """Conv (+ B) (+ Z, a residual) then ``activation``."""
    out = conv_expr(node, node.input(0, "X"), node.input(1, "W"), node.optional(2))
    if node.has_input(3):
        out = _op.add(out, node.input(3))
    return _activation(node, out, node.dtype(0))


def fused_gemm(node: Node) -> RelayExpr:
    return _activation(node, gemm(node), node.dtype(0))


# ---------------------------------------------------------------- gelu family, bias add
def contrib_gelu(node: Node) -> RelayExpr:
    x, dtype = _float(node)
    return gelu_expr(x, dtype, "none")


def bias_gelu(node: Node) -> RelayExpr:
    x, dtype = _float(node)
    return gelu_expr(_op.add(x, node.input(1, "B")), dtype, "none")


def fast_gelu(node: Node) -> RelayExpr:
    """The tanh approximation of gelu, of X + bias."""
    x, dtype = _float(node)
    if node.has_input(1):
        x = _op.add(x, node.input(1))
    return gelu_expr(x, dtype, "tanh")


def quick_gelu(node: Node) -> RelayExpr:
    """x * sigmoid(alpha * x)."""
    x, dtype = _float(node)
    return _op.multiply(x, _op.sigmoid(_op.multiply(x, scalar(node.attr("alpha", 1.702),
                                                               dtype))))


def bias_add(node: Node) -> RelayExpr:
    return _op.add(_op.add(node.input(0, "X"), node.input(1, "bias")), node.input(2, "skip"))


# ---------------------------------------------------------------- layer norms
def _normalize(x: RelayExpr, dtype: str, axes: list[int], eps: float,
               centre: bool) -> tuple[RelayExpr, RelayExpr | None, RelayExpr]:
    """(normalised x, mean or None, 1 / std) over ``axes`` (keepdims); without ``centre``
    the RMS norm."""
    mean = None
    if centre:
        mean = _op.mean(x, axis=axes, keepdims=True)
        x = _op.subtract(x, mean)
    inv = _op.rsqrt(_op.add(_op.mean(_op.multiply(x, x), axis=axes, keepdims=True),
                            scalar(eps, dtype)))
    return _op.multiply(x, inv), mean, inv


def _skip_norm(node: Node, centre: bool) -> list[Any]:
    """input + skip (+ bias), layer-normalised (or RMS) over the last axis, times gamma (+
    beta); outputs: the result, the mean, 1 / std (keepdims), and the sum."""
    x, dtype = _float(node)
    total = _op.add(x, node.input(1, "skip"))
    bias_at = 4 if centre else 3
    if node.has_input(bias_at):
        total = _op.add(total, node.input(bias_at))
    y, mean, inv = _normalize(total, dtype, [-1], node.attr("epsilon", 1e-12), centre)
    y = _op.multiply(y, node.input(2, "gamma"))
    if centre and node.has_input(3):
        y = _op.add(y, node.input(3))
    return [y, mean, inv, total]


def skip_layer_norm(node: Node) -> list[Any]:
    return _skip_norm(node, centre=True)


def skip_simplified_layer_norm(node: Node) -> list[Any]:
    return _skip_norm(node, centre=False)


def simplified_layer_norm(node: Node) -> list[Any]:
    """RMS normalisation over the axes from ``axis`` on, times scale; output 1 is 1/rms."""
    x, dtype = _float(node)
    ndim = node.ndim(0)
    axes = list(range(norm_axis(node, node.attr("axis", -1), ndim), ndim))
    y, _, inv = _normalize(x, dtype, axes, node.attr("epsilon", 1e-5), centre=False)
    return [_op.multiply(y, node.input(1, "scale")), inv]


def contrib_table() -> dict[str, Any]:
    """op_type -> OpSupport of the com.microsoft operators (imported lazily: the support
    table's module imports this one)."""
    from ._table import _e
    from .ops_quant import contrib_table as quant_table

    return {
        **quant_table(),
        "Attention": _e(attention, "projection, per-head softmax(QK^T * scale + masks) V; "
                        "2-D/3-D 0/1 masks or key lengths, attention_bias, unidirectional; "
                        "no past/present, no rotary"),
        "BiasAdd": _e(bias_add, "X + bias + skip"),
        "BiasGelu": _e(bias_gelu, "gelu(A + B) through erf"),
        "FastGelu": _e(fast_gelu, "tanh approximation of gelu(X + bias)"),
        "FusedConv": _e(fused_conv, "Conv (+ Z) then Relu, Tanh, Sigmoid, LeakyRelu, Clip or "
                        "HardSigmoid"),
        "FusedGemm": _e(fused_gemm, "Gemm then the same activations as FusedConv"),
        "FusedMatMul": _e(fused_matmul, "alpha * A' @ B' (transA/transB on the last two "
                          "axes); no transBatchA/B"),
        "Gelu": _e(contrib_gelu, "gelu through erf"),
        "MultiHeadAttention": _e(multi_head_attention, "separate 3-D query, key, value (+ "
                                 "bias); key_padding_mask, attention_bias, unidirectional; no "
                                 "packed QKV, no past/present"),
        "QuickGelu": _e(quick_gelu, "x * sigmoid(alpha * x)"),
        "SimplifiedLayerNormalization": _e(simplified_layer_norm, "RMS norm over the axes "
                                           "from axis on; inv_std_var output"),
        "SkipLayerNormalization": _e(skip_layer_norm, "layer norm of input + skip (+ bias) "
                                     "over the last axis; mean, inv_std_var and the sum outputs"),
        "SkipSimplifiedLayerNormalization": _e(skip_simplified_layer_norm, "RMS norm of input "
                                               "+ skip (+ bias); the sum as output 3"),
    }
