"""A SegFormer-style segmenter (Xie et al. 2021; MiT-b0 encoder), written as an exporter writes
it (HF transformers' ``SegformerForSemanticSegmentation``, batch norm folded).

Encoder: four stages of (channels, depth, heads, sr_ratio) = (32, 2, 1, 8), (64, 2, 2, 4),
(160, 2, 5, 2), (256, 2, 8, 1) by default. Each stage:

- overlapping patch embedding: a conv (7x7/4 pad 3 for the first stage, 3x3/2 pad 1 after),
  flattened to tokens, layer norm;
- ``depth`` pre-norm blocks ``x = x + attn(ln(x))``, ``x = x + mix_ffn(ln(x))`` where the
  efficient attention takes its keys and values from a map shrunk by a ``sr_ratio`` x
  ``sr_ratio`` strided conv (then a layer norm), and Mix-FFN is ``fc2(gelu(dwconv3x3(fc1(x))))``
  with the tokens viewed as a map around the depthwise conv;
- a layer norm, and the tokens back to a (N, C, H, W) map.

Decoder (all-MLP): each stage's map to ``decoder_dim`` (256) channels by a dense layer, resized
bilinearly (``align_corners=False``, torch's ``pytorch_half_pixel``) to stride 4, concatenated
(deepest first), fused by a 1x1 conv + ReLU and classified by a 1x1 conv. Layer norms and GELU
are spelled out (``exported.py``). Input ``data`` (batch_size, 3, H, W), H and W multiples of
32 (256x256 by default); output (batch_size, num_classes, H / 4, W / 4) logits.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload

# per stage: (channels, depth, heads, sr_ratio); MiT-b0
MIT_B0 = ((32, 2, 1, 8), (64, 2, 2, 4), (160, 2, 5, 2), (256, 2, 8, 1))


def _tokens(x: RelayExpr, batch: int, dim: int, hw: int) -> RelayExpr:
    """(N, C, H, W) -> (N, H * W, C)."""
    return relay.transpose(relay.reshape(x, (batch, dim, hw)), (0, 2, 1))


def _image(x: RelayExpr, batch: int, dim: int, h: int, w: int) -> RelayExpr:
    """(N, H * W, C) -> (N, C, H, W)."""
    return relay.reshape(relay.transpose(x, (0, 2, 1)), (batch, dim, h, w))


def _heads(x: RelayExpr, batch: int, seq: int, heads: int, head_dim: int) -> RelayExpr:
    """(N, seq, heads * head_dim) -> (N * heads, seq, head_dim)."""
    x = relay.transpose(relay.reshape(x, (batch, seq, heads, head_dim)), (0, 2, 1, 3))
    return relay.reshape(x, (batch * heads, seq, head_dim))


def efficient_attention(x: RelayExpr, name: str, batch: int, h: int, w: int, dim: int,
                        heads: int, sr: int) -> RelayExpr:
    """Self-attention whose keys and values come from the map shrunk ``sr`` times by a conv."""
    head_dim, seq = dim // heads, h * w
    q = _heads(layers.dense_add_bias(x, units=dim, name=f"{name}_query"), batch, seq, heads,
               head_dim)
    kv, kv_seq = x, seq
    if sr > 1:
        shrunk = exported.conv_bias(_image(x, batch, dim, h, w), f"{name}_sr", dim, sr, sr,
                                    padding=(0, 0))
        kv_seq = (h // sr) * (w // sr)
        kv = exported.layer_norm(_tokens(shrunk, batch, dim, kv_seq), f"{name}_sr_ln", dim, 1e-5)
    k = _heads(layers.dense_add_bias(kv, units=dim, name=f"{name}_key"), batch, kv_seq, heads,
               head_dim)
    v = _heads(layers.dense_add_bias(kv, units=dim, name=f"{name}_value"), batch, kv_seq,
               heads, head_dim)
    scores = relay.divide(relay.nn.batch_matmul(q, k),
                          relay.const(math.sqrt(head_dim), "float32"))
    ctx = relay.nn.batch_matmul(relay.nn.softmax(scores, axis=-1), v, transpose_b=False)
    ctx = relay.transpose(relay.reshape(ctx, (batch, heads, seq, head_dim)), (0, 2, 1, 3))
    return layers.dense_add_bias(relay.reshape(ctx, (batch, seq, dim)), units=dim,
                                 name=f"{name}_proj")


def mix_ffn(x: RelayExpr, name: str, batch: int, h: int, w: int, dim: int) -> RelayExpr:
    """``fc2(gelu(dwconv(fc1(x))))``, the 3x3 depthwise conv on the tokens seen as a map."""
    hidden = 4 * dim
    y = _image(layers.dense_add_bias(x, units=hidden, name=f"{name}_fc1"), batch, hidden, h, w)
    y = exported.conv_bias(y, f"{name}_dwconv", hidden, 3, groups=hidden)
    y = exported.gelu(_tokens(y, batch, hidden, h * w))
    return layers.dense_add_bias(y, units=dim, name=f"{name}_fc2")


def stage(x: RelayExpr, name: str, batch: int, h: int, w: int, dim: int,
          depth: int, heads: int, sr: int, first: bool) -> tuple[RelayExpr, int, int]:
    """One encoder stage on the map ``x``; its output map and size."""
    kernel, stride = (7, 4) if first else (3, 2)
    y = exported.conv_bias(x, f"{name}_patch", dim, kernel, stride)
    h, w = (h - 1) // stride + 1, (w - 1) // stride + 1  # padding kernel // 2
    t = exported.layer_norm(_tokens(y, batch, dim, h * w), f"{name}_patch_ln", dim, 1e-5)
    for i in range(1, depth + 1):
        block = f"{name}_block{i}"
        t = relay.add(t, efficient_attention(exported.layer_norm(t, f"{block}_ln1", dim, 1e-5),
                                             f"{block}_attn", batch, h, w, dim, heads, sr))
        t = relay.add(t, mix_ffn(exported.layer_norm(t, f"{block}_ln2", dim, 1e-5),
                                 f"{block}_ffn", batch, h, w, dim))
    t = exported.layer_norm(t, f"{name}_ln", dim, 1e-5)
    return _image(t, batch, dim, h, w), h, w


def decoder(maps: Sequence[tuple[RelayExpr, int, int, int]], batch: int, decoder_dim: int,
            num_classes: int) -> RelayExpr:
    """The all-MLP head on ``(map, channels, h, w)`` per stage."""
    _, _, out_h, out_w = maps[0]
    parts = []
    for i, (x, dim, h, w) in reversed(list(enumerate(maps, start=1))):
        y = layers.dense_add_bias(_tokens(x, batch, dim, h * w), units=decoder_dim,
                                  name=f"decode_mlp{i}")
        y = _image(y, batch, decoder_dim, h, w)
        if (h, w) != (out_h, out_w):
            y = relay.image.resize2d(y, size=(out_h, out_w), method="linear",
                                     coordinate_transformation_mode="pytorch_half_pixel")
        parts.append(y)
    y = relay.nn.relu(exported.conv_bias(relay.concatenate(parts, axis=1), "decode_fuse",
                                         decoder_dim))
    return exported.conv_bias(y, "decode_classifier", num_classes)


def get_net(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 256, 256),
            stages: Sequence[tuple[int, int, int, int]] = MIT_B0, decoder_dim: int = 256,
            num_classes: int = 150, dtype: str = "float32") -> Function:
    """The segmenter Function of ``data`` (batch_size, *image_shape)."""
    if len(image_shape) != 3 or image_shape[1] % 32 or image_shape[2] % 32 or \
            min(image_shape[1:]) < 32:
        raise ValueError(f"segformer: image_shape must be (C, H, W) with H, W multiples of 32, "
                         f"got {image_shape}")
    if min(batch_size, decoder_dim, num_classes) < 1 or not stages:
        raise ValueError("segformer: batch_size, decoder_dim, num_classes must be positive and "
                         "stages non-empty")
    for i, (dim, depth, heads, sr) in enumerate(stages, start=1):
        if min(dim, depth, heads, sr) < 1 or dim % heads:
            raise ValueError(f"segformer: stage {i} (channels={dim}, depth={depth}, "
                             f"heads={heads}, sr_ratio={sr}) needs positive values and "
                             f"channels a multiple of heads")
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x, (h, w) = data, image_shape[1:]
    maps = []
    for i, (dim, depth, heads, sr) in enumerate(stages, start=1):
        x, h, w = stage(x, f"stage{i}", batch_size, h, w, dim, depth, heads, sr, i == 1)
        if h % sr or w % sr:
            raise ValueError(f"segformer: stage {i}'s map {h}x{w} is not a multiple of its "
                             f"sr_ratio {sr}")
        maps.append((x, dim, h, w))
    out = decoder(maps, batch_size, decoder_dim, num_classes)
    weights = [v for v in relay.analysis.free_vars(out) if v is not data]
    return relay.Function([data, *weights], out)


def get_workload(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 256, 256),
                 stages: Sequence[tuple[int, int, int, int]] = MIT_B0, decoder_dim: int = 256,
                 num_classes: int = 150, dtype: str = "float32"
                 ) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the segmenter with He-scaled weights (seed 0)."""
    net = get_net(batch_size, tuple(image_shape), tuple(stages), decoder_dim,  # type: ignore
                  num_classes, dtype)
    return create_workload(net)
