"""A small transformer encoder (BERT-style, post-LayerNorm).

``num_layers`` (2) layers of multi-head self-attention and a feed-forward network, each
followed by a residual add and a LayerNorm (post-LN, as BERT and the original Transformer):

    x = layer_norm(x + attention(x))
    x = layer_norm(x + dense(gelu(dense(x))))

Attention has ``num_heads`` (2) heads of ``hidden // num_heads``: q, k and v are dense layers,
reshaped and transposed to (batch * heads, seq, head_dim); scores are
``nn.batch_matmul(q, k) / sqrt(head_dim)``, softmax over the keys, then
``nn.batch_matmul(probs, v)``, heads merged back and a dense output projection. GELU is the
exact erf form ``0.5 * x * (1 + erf(x / sqrt(2)))``. There is no mask (every token attends to
every token).

Input ``data``: (batch_size, seq_len, hidden) float embeddings, or with ``vocab_size`` set,
(batch_size, seq_len) int32 token ids looked up (``take``) in ``embed_weight`` plus a learned
position embedding, then a LayerNorm. Output (batch_size, seq_len, hidden): the encoder's
last hidden states.
"""
from __future__ import annotations

import math

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

_EPS = 1e-5


def gelu(x: RelayExpr, dtype: str = "float32") -> RelayExpr:
    """``0.5 * x * (1 + erf(x / sqrt(2)))``."""
    def const(value: float) -> RelayExpr:
        return relay.const(value, dtype)

    cdf = relay.add(const(1.0), relay.erf(relay.multiply(x, const(1 / math.sqrt(2)))))
    return relay.multiply(relay.multiply(x, cdf), const(0.5))


def layer_norm(x: RelayExpr, name: str) -> RelayExpr:
    """LayerNorm over the last axis with ``name_gamma`` and ``name_beta``."""
    return relay.nn.layer_norm(x, relay.var(f"{name}_gamma"), relay.var(f"{name}_beta"),
                               axis=-1, epsilon=_EPS)


def _split_heads(x: RelayExpr, batch: int, seq: int, heads: int) -> RelayExpr:
    """(batch, seq, hidden) -> (batch * heads, seq, head_dim)."""
    x = relay.transpose(relay.reshape(x, (batch, seq, heads, -1)), (0, 2, 1, 3))
    return relay.reshape(x, (batch * heads, seq, -1))


def attention(x: RelayExpr, name: str, batch: int, seq: int, hidden: int, heads: int,
              dtype: str) -> RelayExpr:
    """Multi-head self-attention of ``x`` (batch, seq, hidden), output projection included."""
    q, k, v = (_split_heads(layers.dense_add_bias(x, units=hidden, name=f"{name}_{p}"),
                            batch, seq, heads) for p in ("q", "k", "v"))
    scale = relay.const(1 / math.sqrt(hidden // heads), dtype)
    scores = relay.multiply(relay.nn.batch_matmul(q, k), scale)  # (b * h, seq, seq)
    ctx = relay.nn.batch_matmul(relay.nn.softmax(scores, axis=-1), v, transpose_b=False)
    ctx = relay.transpose(relay.reshape(ctx, (batch, heads, seq, -1)), (0, 2, 1, 3))
    ctx = relay.reshape(ctx, (batch, seq, hidden))
    return layers.dense_add_bias(ctx, units=hidden, name=f"{name}_out")


def encoder_layer(x: RelayExpr, name: str, batch: int, seq: int, hidden: int, heads: int,
                  ffn: int, dtype: str) -> RelayExpr:
    """One post-LN encoder layer: attention and feed-forward, each + residual + LayerNorm."""
    x = layer_norm(relay.add(x, attention(x, f"{name}_attn", batch, seq, hidden, heads, dtype)),
                   f"{name}_ln1")
    h = gelu(layers.dense_add_bias(x, units=ffn, name=f"{name}_ffn1"), dtype)
    h = layers.dense_add_bias(h, units=hidden, name=f"{name}_ffn2")
    return layer_norm(relay.add(x, h), f"{name}_ln2")


def _embed(batch: int, seq: int, hidden: int, vocab_size: int | None,
           dtype: str) -> tuple[RelayExpr, RelayExpr]:
    """(the ``data`` variable, the embedded input (batch, seq, hidden))."""
    if vocab_size is None:
        data = relay.var("data", shape=(batch, seq, hidden), dtype=dtype)
        return data, data
    data = relay.var("data", shape=(batch, seq), dtype="int32")
    tokens = relay.take(relay.var("embed_weight", shape=(vocab_size, hidden), dtype=dtype),
                        data, axis=0)
    positions = relay.var("pos_embed_weight", shape=(seq, hidden), dtype=dtype)
    return data, layer_norm(relay.add(tokens, positions), "embed_ln")


def get_net(batch_size: int = 1, seq_len: int = 128, hidden: int = 128, num_heads: int = 2,
            ffn: int = 512, num_layers: int = 2, vocab_size: int | None = None,
            dtype: str = "float32") -> Function:
    """The encoder Function of ``data`` (see the module docstring for its two forms)."""
    if hidden % num_heads:
        raise ValueError(f"transformer: hidden ({hidden}) must be a multiple of num_heads "
                         f"({num_heads})")
    if min(batch_size, seq_len, ffn, num_layers) < 1 or (vocab_size is not None and vocab_size < 1):
        raise ValueError("transformer: batch_size, seq_len, ffn, num_layers and vocab_size "
                         "must be positive")
    data, net = _embed(batch_size, seq_len, hidden, vocab_size, dtype)
    for i in range(1, num_layers + 1):
        net = encoder_layer(net, f"layer{i}", batch_size, seq_len, hidden, num_heads, ffn, dtype)
    weights = [v for v in relay.analysis.free_vars(net) if v is not data]
    return relay.Function([data, *weights], net)


def get_workload(batch_size: int = 1, seq_len: int = 128, hidden: int = 128,
                 num_heads: int = 2, ffn: int = 512, num_layers: int = 2,
                 vocab_size: int | None = None,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the encoder with He-scaled weights (seed 0)."""
    net = get_net(batch_size, seq_len, hidden, num_heads, ffn, num_layers, vocab_size, dtype)
    return create_workload(net)
