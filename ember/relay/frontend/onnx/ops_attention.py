"""The com.microsoft attention operators that onnxruntime's transformer optimiser leaves in
models: Attention (one input projected to Q, K and V) and MultiHeadAttention (Q, K and V
given), decomposed into batch_matmul, softmax and masks.

Both compute, per head, ``softmax(Q K^T * scale + masks) V`` with scale 1/sqrt(head size)
unless given. Masks: a 0/1 key mask (Attention's 2-D or 3-D ``mask_index``,
MultiHeadAttention's ``key_padding_mask``), or key lengths (1-D, right padding), adds
``mask_filter_value`` (default -10000) where it is 0; ``attention_bias`` is added;
``unidirectional`` masks the future (causal). When there are more keys than queries (T > S),
the queries are the last S positions, as they are behind a key/value cache: query i sees keys
0 .. T - S + i. onnxruntime's CPU kernel instead lets query i < S - 1 see keys 0 .. i and the
last query see every key, which agrees with this only when S == T (the exported models' case).

The batch and the sequence lengths may be symbolic (``dim_param``): reshapes then use Relay's
copy/merge/split codes and the causal and key-length masks are computed from the run-time
lengths, so one import runs at every sequence length. Not supported: ``past``/``present`` key and
value caches, packed QKV layouts, rotary embeddings.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from ._node import Node
from ._util import scalar, static

DEFAULT_FILTER = -10000.0


# A batch or sequence length is an int, or a symbolic size of the model (known at run time).
Dim = Any


def _split_batch(x: RelayExpr, batch: Dim, heads: int, rest: tuple[Dim, ...]) -> RelayExpr:
    """(B * N, *rest) -> (B, N, *rest)."""
    if static((batch, *rest)):
        return _op.reshape(x, (batch, heads, *rest))
    return _op.reshape(x, (-4, -1, heads, -2))  # split the first axis, keep the others


def _merge_batch(x: RelayExpr, batch: Dim, heads: int, rest: tuple[Dim, ...]) -> RelayExpr:
    """(B, N, *rest) -> (B * N, *rest)."""
    if static((batch, *rest)):
        return _op.reshape(x, (batch * heads, *rest))
    return _op.reshape(x, (-3, -2))  # merge the first two axes, keep the others


def _heads(x: RelayExpr, batch: Dim, seq: Dim, heads: int, size: int) -> RelayExpr:
    """(B, S, N * H) -> (B * N, S, H)."""
    lead = (batch, seq) if static((batch, seq)) else (0, 0)
    x = _op.transpose(_op.reshape(x, (*lead, heads, size)), (0, 2, 1, 3))
    return _merge_batch(x, batch, heads, (seq, size))


def _merge(x: RelayExpr, batch: Dim, seq: Dim, heads: int, size: int) -> RelayExpr:
    """(B * N, S, H) -> (B, S, N * H)."""
    x = _op.transpose(_split_batch(x, batch, heads, (seq, size)), (0, 2, 1, 3))
    lead = (batch, seq) if static((batch, seq)) else (0, 0)
    return _op.reshape(x, (*lead, heads * size))


def _length(x: RelayExpr, axis: int, size: Dim) -> Any:
    """``size`` when it is an int, else x's run-time length on ``axis`` (an int32 scalar)."""
    if isinstance(size, int):
        return size
    return _op.take(_op.shape_of(x, "int32"), const(np.int32(axis)))


def _positions(length: Any) -> RelayExpr:
    """int32 0 .. length - 1, a constant for an int length."""
    if isinstance(length, int):
        return const(np.arange(length, dtype="int32"))
    return _op.arange(scalar(0, "int32"), length, scalar(1, "int32"), dtype="int32")


def _key_mask(node: Node, mask: RelayExpr, batch: Dim, total: Any, dtype: str) -> RelayExpr:
    """An additive (B, 1, S or 1, T) mask: ``mask_filter_value`` where a key is masked;
    ``total`` is the number of keys (an int, or a run-time int32 scalar)."""
    filt = scalar(node.attr("mask_filter_value", DEFAULT_FILTER), dtype)
    zero = scalar(0.0, dtype)
    shape = node.type_of(mask).shape
    if len(shape) == 1:  # key lengths: keys at or after the length are padding
        if static((shape[0], batch)) and shape[0] != batch:
            raise node.unsupported(f"a 1-D mask of {shape[0]} values (only key lengths, one "
                                   "per batch)")
        keep = _op.less(_op.expand_dims(_positions(total), 0),
                        _op.expand_dims(_op.cast(mask, "int32"), 1))  # (B, T)
        return _op.expand_dims(_op.where(keep, zero, filt), 1, 2)
    keep = _op.not_equal(_op.cast(mask, "int32"), scalar(0, "int32"))
    if len(shape) == 2:  # (B, T)
        return _op.expand_dims(_op.where(keep, zero, filt), 1, 2)
    if len(shape) == 3:  # (B, S, T)
        return _op.expand_dims(_op.where(keep, zero, filt), 1)
    raise node.unsupported(f"a mask of rank {len(shape)} (1-D key lengths, 2-D or 3-D 0/1 "
                           "masks)")


def _causal(seq: Any, total: Any, dtype: str, filt: float) -> RelayExpr:
    """Query i (the last ``seq`` of ``total`` positions) sees keys up to its own position:
    a constant for int lengths, else computed from the run-time lengths (int32 scalars)."""
    if isinstance(seq, int) and isinstance(total, int):
        q = np.arange(seq)[:, None] + (total - seq)
        k = np.arange(total)[None, :]
        return const(np.where(k <= q, 0.0, filt).astype(dtype).reshape(1, 1, seq, total))
    seq, total = (n if not isinstance(n, int) else scalar(n, "int32") for n in (seq, total))
    q = _op.add(_positions(seq), _op.subtract(total, seq))
    keep = _op.less_equal(_op.expand_dims(_positions(total), 0), _op.expand_dims(q, 1))
    mask = _op.where(keep, scalar(0.0, dtype), scalar(filt, dtype))  # (S, T)
    return _op.expand_dims(mask, 0, 2)


def attend(node: Node, q: RelayExpr, k: RelayExpr, v: RelayExpr, dims: tuple[int, ...],
           masks: list[RelayExpr], dtype: str) -> RelayExpr:
    """softmax(Q K^T * scale + sum(masks)) V for Q (B, S, N*Hq), K (B, T, N*Hq),
    V (B, T, N*Hv); masks broadcast against (B, N, S, T). Result (B, S, N*Hv)."""
    batch, seq, total, heads, hq, hv = dims
    scale = node.attr("scale", 0.0) or 1.0 / math.sqrt(hq)
    seq_len, total_len = _length(q, 1, seq), _length(k, 1, total)
    qh = _heads(q, batch, seq, heads, hq)
    kh = _heads(k, batch, total, heads, hq)
    vh = _heads(v, batch, total, heads, hv)
    scores = _op.multiply(_op.nn.batch_matmul(qh, kh), scalar(scale, dtype))  # (B*N, S, T)
    if node.attr("unidirectional", 0):
        masks = [*masks, _causal(seq_len, total_len, dtype,
                                 node.attr("mask_filter_value", DEFAULT_FILTER))]
    if masks:
        scores = _split_batch(scores, batch, heads, (seq, total))
        for m in masks:
            scores = _op.add(scores, m)
        scores = _merge_batch(scores, batch, heads, (seq, total))
    probs = _op.nn.softmax(scores, -1)
    out = _op.nn.batch_matmul(probs, vh, transpose_b=False)
    return _merge(out, batch, seq, heads, hv)


def _no_cache(node: Node, inputs: tuple[int, ...], outputs: tuple[int, ...]) -> None:
    for i in inputs:
        if node.has_input(i):
            raise node.unsupported(f"input {i} (a past key/value cache) is not supported")
    for i in outputs:
        if node.wants_output(i):
            raise node.unsupported(f"output {i} (present key/value or qk) is not supported")
    if node.attr("do_rotary", 0):
        raise node.unsupported_attr("do_rotary", node.attr("do_rotary"), "0")


def _shape3(node: Node, i: int, what: str) -> tuple[Any, ...]:
    """The (B, S, D) shape of input ``i``: D must be known at import (the heads split it); the
    batch and sequence lengths may be symbolic."""
    shape = node.shape(i)
    if len(shape) != 3 or not isinstance(shape[2], int):
        raise node.unsupported(f"input {i} ({what}) has shape {list(shape)}; this case needs "
                               "rank 3 with a known last (hidden) size")
    return shape


def _bias_mask(node: Node, i: int) -> list[RelayExpr]:
    return [node.input(i)] if node.has_input(i) else []


def attention(node: Node) -> Any:
    """com.microsoft Attention: input (B, S, D) @ weights (D, Dq + Dk + Dv) + bias, split
    into Q, K, V (``qkv_hidden_sizes``, default three equal parts), then ``attend``."""
    _no_cache(node, (4, 6), (1,))
    x, dtype = node.input(0, "input"), node.dtype(0)
    batch, seq, _ = _shape3(node, 0, "input")
    width = node.static_shape(1, "weights")[1]
    heads = node.attr("num_heads")
    sizes = node.attr("qkv_hidden_sizes", None) or [width // 3] * 3
    if len(sizes) != 3 or sum(sizes) != width or sizes[0] != sizes[1] or any(
            s % heads for s in sizes):
        raise node.fail(f"qkv_hidden_sizes {list(sizes)} must be three sizes (Q and K equal) "
                        f"that add up to the weights' width {width} and divide by "
                        f"num_heads={heads}")
    qkv = _op.nn.dense(x, _op.transpose(node.input(1, "weights"), (1, 0)))
    if node.has_input(2):
        qkv = _op.add(qkv, node.input(2))
    bounds = np.cumsum([0, *sizes])
    q, k, v = (_op.strided_slice(qkv, [int(lo)], [int(hi)], axes=[2])
               for lo, hi in zip(bounds, bounds[1:]))
    masks = _bias_mask(node, 5)
    if node.has_input(3):
        masks.insert(0, _key_mask(node, node.input(3), batch, _length(x, 1, seq), dtype))
    dims = (batch, seq, seq, heads, sizes[0] // heads, sizes[2] // heads)
    return [attend(node, q, k, v, dims, masks, dtype), None]


def multi_head_attention(node: Node) -> Any:
    """com.microsoft MultiHeadAttention with query (B, S, D), key (B, T, D) and value
    (B, T, Dv) (optional ``bias`` of D + D + Dv added to them), then ``attend``."""
    _no_cache(node, (6, 7, 8, 9), (1, 2, 3))
    q, dtype = node.input(0, "query"), node.dtype(0)
    if node.ndim(0) != 3 or not node.has_input(1) or not node.has_input(2) or node.ndim(1) != 3:
        raise node.unsupported("only separate query (B, S, D), key (B, T, D) and value "
                               "(B, T, Dv) are supported (no packed QKV or BNSH key/value)")
    batch, seq, width = _shape3(node, 0, "query")
    total, v_width = _shape3(node, 1, "key")[1], _shape3(node, 2, "value")[2]
    heads = node.attr("num_heads")
    if width % heads or v_width % heads:
        raise node.fail(f"hidden sizes {width} and {v_width} must divide by num_heads={heads}")
    k, v = node.input(1, "key"), node.input(2, "value")
    if node.has_input(3):
        bias, bounds = node.input(3), [0, width, 2 * width, 2 * width + v_width]
        q, k, v = (_op.add(t, _op.strided_slice(bias, [lo], [hi], axes=[0]))
                   for t, lo, hi in zip((q, k, v), bounds, bounds[1:]))
    masks = _bias_mask(node, 5)
    if node.has_input(4):
        masks.insert(0, _key_mask(node, node.input(4), batch, _length(k, 1, total), dtype))
    dims = (batch, seq, total, heads, width // heads, v_width // heads)
    return [attend(node, q, k, v, dims, masks, dtype)]
