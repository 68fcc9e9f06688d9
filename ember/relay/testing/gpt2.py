"""A GPT-2-style decoder (Radford et al. 2019), written as an exporter writes it: the whole
sequence at once with a causal mask (no key/value cache), as a model exported for scoring or
for the first step of generation.

Token and position embeddings (``take``), ``num_layers`` pre-norm blocks

    x = x + proj(causal_attention(layer_norm(x)))    heads of hidden / num_heads
    x = x + fc2(gelu_tanh(fc1(layer_norm(x))))       fc1: 4 * hidden wide

then a layer norm and the language-model head: a dense layer with the token embedding's
weights (tied, as GPT-2). The causal mask is HF transformers': ``where(mask, scores,
-3.4e38)`` with a constant lower-triangular boolean mask, before the softmax. As exported below
opset 17 (``exported.py``): layer norms spelled out, GELU in GPT-2's tanh form
``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``.

The default size is a small one (6 layers of 384, 6 heads, 16384 tokens, 128 positions):
GPT-2 small is ``hidden=768, num_heads=12, num_layers=12, vocab_size=50257``. Input ``data``
(batch_size, seq_len) int32 token ids; output (batch_size, seq_len, vocab_size) logits.
"""
from __future__ import annotations

import math

import numpy as np

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload
from .transformer import _split_heads

MASKED = -3.4028234663852886e38  # torch.finfo(float32).min, what HF's GPT-2 fills in


def causal_attention(x: RelayExpr, name: str, batch: int, seq: int, hidden: int,
                     heads: int) -> RelayExpr:
    """Masked multi-head self-attention: token i attends to tokens 0..i."""
    qkv = layers.dense_add_bias(x, units=3 * hidden, name=f"{name}_qkv")
    q, k, v = (_split_heads(part, batch, seq, heads) for part in relay.split(qkv, 3, axis=-1))
    scale = relay.const(1 / math.sqrt(hidden // heads), "float32")
    scores = relay.multiply(relay.nn.batch_matmul(q, k), scale)  # (batch * heads, seq, seq)
    mask = relay.const(np.tril(np.ones((seq, seq), dtype=bool)))
    scores = relay.where(mask, scores, relay.const(MASKED, "float32"))
    ctx = relay.nn.batch_matmul(relay.nn.softmax(scores, axis=-1), v, transpose_b=False)
    ctx = relay.transpose(relay.reshape(ctx, (batch, heads, seq, -1)), (0, 2, 1, 3))
    return layers.dense_add_bias(relay.reshape(ctx, (batch, seq, hidden)), units=hidden,
                                 name=f"{name}_proj")


def block(x: RelayExpr, name: str, batch: int, seq: int, hidden: int, heads: int) -> RelayExpr:
    """One pre-norm decoder block."""
    x = relay.add(x, causal_attention(exported.layer_norm(x, f"{name}_ln1", hidden, 1e-5),
                                      f"{name}_attn", batch, seq, hidden, heads))
    h = layers.dense_add_bias(exported.layer_norm(x, f"{name}_ln2", hidden, 1e-5),
                              units=4 * hidden, name=f"{name}_fc1")
    return relay.add(x, layers.dense_add_bias(exported.gelu_tanh(h), units=hidden,
                                              name=f"{name}_fc2"))


def get_net(batch_size: int = 1, seq_len: int = 128, hidden: int = 384, num_heads: int = 6,
            num_layers: int = 6, vocab_size: int = 16384, dtype: str = "float32") -> Function:
    """The decoder Function of the token ids ``data`` (batch_size, seq_len)."""
    if hidden % num_heads:
        raise ValueError(f"gpt2: hidden ({hidden}) must be a multiple of num_heads "
                         f"({num_heads})")
    if min(batch_size, seq_len, num_layers, vocab_size) < 1:
        raise ValueError("gpt2: batch_size, seq_len, num_layers and vocab_size must be positive")
    data = relay.var("data", shape=(batch_size, seq_len), dtype="int32")
    wte = relay.var("wte_weight", shape=(vocab_size, hidden), dtype=dtype)
    wpe = relay.var("wpe_weight", shape=(seq_len, hidden), dtype=dtype)
    x = relay.add(relay.take(wte, data, axis=0), wpe)
    for i in range(1, num_layers + 1):
        x = block(x, f"layer{i}", batch_size, seq_len, hidden, num_heads)
    x = exported.layer_norm(x, "ln_f", hidden, 1e-5)
    logits = relay.nn.dense(x, wte)  # tied with the token embedding
    weights = [v for v in relay.analysis.free_vars(logits) if v is not data]
    return relay.Function([data, *weights], logits)


def get_workload(batch_size: int = 1, seq_len: int = 128, hidden: int = 384, num_heads: int = 6,
                 num_layers: int = 6, vocab_size: int = 16384,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the decoder with He-scaled weights (seed 0)."""
    net = get_net(batch_size, seq_len, hidden, num_heads, num_layers, vocab_size, dtype)
    return create_workload(net)
