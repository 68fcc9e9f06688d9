"""Building blocks written the way ONNX exporters write them, for the zoo models that look like
what users run: activations spelled out as several ops, batch norms folded into a conv's bias.

These are what a model exported by torch, paddle2onnx or tf2onnx contains (and what
``onnx_export`` writes back one op per op), so compiling the zoo exercises the rewrites that
turn them back into single ops (``relay.transform.RecogniseActivations``, ``FuseLayerNorm``):

    hardswish(x)          x * clip(x + 3, 0, 6) / 6
    hardsigmoid(x, a, b)  clip(x * a + b, 0, 1)           (paddle's a = 0.2; torch's 1/6)
    silu(x)               x * sigmoid(x)
    gelu(x)               x * (erf(x / sqrt(2)) + 1) * 0.5 (torch's order of operations)
    gelu_tanh(x)          0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))  (GPT-2's)
    layer_norm(x, name, dim)  (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta, last axis
    conv_bias(x, name, ...)  conv2d + bias_add: a conv whose batch norm was folded
"""
from __future__ import annotations

import math
from typing import Any

from ... import relay
from ...ir.expr import RelayExpr
from . import layers

__all__ = ["conv_bias", "gelu", "gelu_tanh", "hardsigmoid", "hardswish", "layer_norm", "silu"]


def _c(value: float) -> RelayExpr:
    return relay.const(value, "float32")


def hardswish(x: RelayExpr) -> RelayExpr:
    """``x * clip(x + 3, 0, 6) / 6``."""
    return relay.divide(relay.multiply(x, relay.clip(relay.add(x, _c(3.0)), 0.0, 6.0)), _c(6.0))


def hardsigmoid(x: RelayExpr, alpha: float = 0.2, beta: float = 0.5) -> RelayExpr:
    """``clip(x * alpha + beta, 0, 1)``."""
    return relay.clip(relay.add(relay.multiply(x, _c(alpha)), _c(beta)), 0.0, 1.0)


def silu(x: RelayExpr) -> RelayExpr:
    """``x * sigmoid(x)``."""
    return relay.multiply(x, relay.sigmoid(x))


def gelu(x: RelayExpr) -> RelayExpr:
    """``x * (erf(x / sqrt(2)) + 1) * 0.5``."""
    cdf = relay.add(relay.erf(relay.divide(x, _c(math.sqrt(2.0)))), _c(1.0))
    return relay.multiply(relay.multiply(x, cdf), _c(0.5))


def gelu_tanh(x: RelayExpr) -> RelayExpr:
    """``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))))``."""
    cube = relay.multiply(_c(0.044715), relay.power(x, _c(3.0)))
    inner = relay.tanh(relay.multiply(_c(math.sqrt(2.0 / math.pi)), relay.add(x, cube)))
    return relay.multiply(relay.multiply(_c(0.5), x), relay.add(_c(1.0), inner))


def layer_norm(x: RelayExpr, name: str, dim: int, eps: float = 1e-6) -> RelayExpr:
    """Layer norm over the last axis (of ``dim`` values) as torch writes it below opset 17,
    with ``name_gamma`` and ``name_beta``."""
    mean = relay.mean(x, axis=-1, keepdims=True)
    centred = relay.subtract(x, mean)
    var = relay.mean(relay.power(centred, _c(2.0)), axis=-1, keepdims=True)
    normed = relay.divide(centred, relay.sqrt(relay.add(var, _c(eps))))
    gamma = relay.var(f"{name}_gamma", shape=(dim,), dtype="float32")
    return relay.add(relay.multiply(normed, gamma),
                     relay.var(f"{name}_beta", shape=(dim,), dtype="float32"))


def conv_bias(x: RelayExpr, name: str, channels: int, kernel: int = 1, stride: int = 1,
              groups: int = 1, padding: Any = None) -> RelayExpr:
    """A conv with a bias (its batch norm folded), padding ``kernel // 2`` unless given."""
    pad = (kernel // 2, kernel // 2) if padding is None else padding
    conv = layers.conv2d(x, channels=channels, kernel_size=(kernel, kernel),
                         strides=(stride, stride), padding=pad, groups=groups, name=name)
    return relay.nn.bias_add(conv, relay.var(f"{name}_bias"), axis=1)
