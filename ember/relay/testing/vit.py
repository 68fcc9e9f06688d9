"""A ViT / DeiT-tiny image classifier (Dosovitskiy et al. 2020), written as an exporter writes it.

A 16x16/16 conv embeds the patches (192 channels), flattened to tokens, after a learned class
token, plus a learned position embedding; ``depth`` (12) pre-norm encoder layers:

    x = x + proj(attention(layer_norm(x)))      attention: 3 heads of 64, softmax(q k^T / 8) v
    x = x + fc2(gelu(fc1(layer_norm(x))))       fc1: 4 * 192 wide

then a layer norm and a dense classifier on the class token. As torch writes it below opset 17
(``exported.py``): layer norms spelled out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
Mul, Add), GELU as ``x * (erf(x / sqrt(2)) + 1) * 0.5``; q, k and v come out of one dense
layer, sliced per head. Input ``data`` (batch_size, 3, 224, 224) by default; output
(batch_size, num_classes) logits.
"""
from __future__ import annotations

import math

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload


def attention(x: RelayExpr, name: str, batch: int, seq: int, dim: int,
              heads: int) -> RelayExpr:
    """Multi-head self-attention of ``x`` (batch, seq, dim) with one qkv projection."""
    head_dim = dim // heads
    qkv = layers.dense_add_bias(x, units=3 * dim, name=f"{name}_qkv")
    qkv = relay.transpose(relay.reshape(qkv, (batch, seq, 3, heads, head_dim)), (2, 0, 3, 1, 4))
    qkv = relay.reshape(qkv, (3, batch * heads, seq, head_dim))
    q, k, v = (relay.squeeze(part, axis=[0]) for part in relay.split(qkv, 3, axis=0))
    scores = relay.multiply(relay.nn.batch_matmul(q, k),
                            relay.const(1 / math.sqrt(head_dim), "float32"))
    ctx = relay.nn.batch_matmul(relay.nn.softmax(scores, axis=-1), v, transpose_b=False)
    ctx = relay.transpose(relay.reshape(ctx, (batch, heads, seq, head_dim)), (0, 2, 1, 3))
    return layers.dense_add_bias(relay.reshape(ctx, (batch, seq, dim)), units=dim,
                                 name=f"{name}_proj")


def encoder_layer(x: RelayExpr, name: str, batch: int, seq: int, dim: int, heads: int,
                  mlp: int) -> RelayExpr:
    """One pre-norm layer: attention and MLP, each added back to its input."""
    x = relay.add(x, attention(exported.layer_norm(x, f"{name}_ln1", dim), f"{name}_attn",
                               batch, seq, dim, heads))
    h = exported.gelu(layers.dense_add_bias(exported.layer_norm(x, f"{name}_ln2", dim),
                                            units=mlp, name=f"{name}_fc1"))
    return relay.add(x, layers.dense_add_bias(h, units=dim, name=f"{name}_fc2"))


def get_net(batch_size: int = 1, image_size: int = 224, patch: int = 16, dim: int = 192,
            depth: int = 12, heads: int = 3, mlp_ratio: int = 4, num_classes: int = 1000,
            dtype: str = "float32") -> Function:
    """The classifier Function of ``data`` (batch_size, 3, image_size, image_size)."""
    if image_size % patch or image_size < patch or dim % heads:
        raise ValueError(f"vit: image_size ({image_size}) must be a multiple of patch ({patch}) "
                         f"and dim ({dim}) of heads ({heads})")
    if min(depth, mlp_ratio, num_classes) < 1:
        raise ValueError("vit: depth, mlp_ratio and num_classes must be positive")
    data = relay.var("data", shape=(batch_size, 3, image_size, image_size), dtype=dtype)
    tokens = (image_size // patch) ** 2
    seq = tokens + 1
    x = exported.conv_bias(data, "patch_embed", dim, patch, patch, padding=(0, 0))
    x = relay.transpose(relay.reshape(x, (batch_size, dim, tokens)), (0, 2, 1))
    cls = relay.var("cls_token_weight", shape=(1, 1, dim), dtype=dtype)
    cls = relay.broadcast_to(cls, (batch_size, 1, dim)) if batch_size > 1 else cls
    x = relay.concatenate([cls, x], axis=1)
    x = relay.add(x, relay.var("pos_embed_weight", shape=(1, seq, dim), dtype=dtype))
    for i in range(1, depth + 1):
        x = encoder_layer(x, f"layer{i}", batch_size, seq, dim, heads, mlp_ratio * dim)
    x = exported.layer_norm(x, "norm", dim)
    x = relay.reshape(relay.strided_slice(x, [0], [1], axes=[1]), (batch_size, dim))
    out = layers.dense_add_bias(x, units=num_classes, name="head")
    weights = [v for v in relay.analysis.free_vars(out) if v is not data]
    return relay.Function([data, *weights], out)


def get_workload(batch_size: int = 1, image_size: int = 224, patch: int = 16, dim: int = 192,
                 depth: int = 12, heads: int = 3, mlp_ratio: int = 4, num_classes: int = 1000,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the classifier with He-scaled weights (seed 0)."""
    net = get_net(batch_size, image_size, patch, dim, depth, heads, mlp_ratio, num_classes,
                  dtype)
    return create_workload(net)
