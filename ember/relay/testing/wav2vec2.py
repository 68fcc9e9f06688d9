"""A Wav2Vec2-style audio encoder (Baevski et al. 2020; HF ``Wav2Vec2Model`` with
``feat_extract_norm="group"``, as in wav2vec2-base), written as an exporter writes it.

- Feature extractor: seven 1-D convs without bias over the raw audio, (channels, kernel,
  stride) = (512, 10, 5), 4 x (512, 3, 2), 2 x (512, 2, 2), each followed by GELU; the first
  one's output goes through a GroupNorm with one group per channel (each channel normalised
  over time, then scaled and shifted per channel), spelled out as ReduceMean, Sub, Pow,
  ReduceMean, Add, Sqrt, Div, Mul, Add. 16000 samples (1 s at 16 kHz) give 49 frames.
- Feature projection: layer norm, dense to ``hidden``.
- Positional embedding: a grouped 1-D conv (kernel 128, padding 64, 16 groups) whose last
  output frame is dropped, GELU, added to the frames; then a layer norm.
- ``num_layers`` post-norm transformer layers: ``x = ln(x + attn(x))``, ``x = ln(x +
  fc2(gelu(fc1(x))))`` with separate query/key/value projections.

A 1-D conv is written as ember's ONNX importer runs one: a conv2d on a map of height 1 (so
the twin has 4-D Conv nodes where torch writes 3-D ones). Layer norms and GELU are
spelled out (``exported.py``). The default transformer is small (4 layers of 384, 6 heads,
ffn 1536; wav2vec2-base has 12 of 768, 12 heads, ffn 3072). Input ``data`` (batch_size,
samples) float32 audio; output (batch_size, frames, hidden).
"""
from __future__ import annotations

from collections.abc import Sequence

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload
from .segformer import efficient_attention

# (channels, kernel, stride) of each feature-extractor conv (wav2vec2-base)
FEATURE_CONVS = ((512, 10, 5),) + ((512, 3, 2),) * 4 + ((512, 2, 2),) * 2
POS_KERNEL, POS_GROUPS = 128, 16


def _c(value: float) -> RelayExpr:
    return relay.const(value, "float32")


def channel_group_norm(x: RelayExpr, name: str, channels: int, eps: float = 1e-5) -> RelayExpr:
    """GroupNorm with one group per channel of ``x`` (N, C, 1, L): each channel normalised
    over time, times ``name_gamma`` plus ``name_beta`` (C, 1, 1)."""
    mean = relay.mean(x, axis=-1, keepdims=True)
    centred = relay.subtract(x, mean)
    var = relay.mean(relay.power(centred, _c(2.0)), axis=-1, keepdims=True)
    normed = relay.divide(centred, relay.sqrt(relay.add(var, _c(eps))))
    gamma = relay.var(f"{name}_gamma", shape=(channels, 1, 1), dtype="float32")
    return relay.add(relay.multiply(normed, gamma),
                     relay.var(f"{name}_beta", shape=(channels, 1, 1), dtype="float32"))


def _conv1d(x: RelayExpr, name: str, channels: int, kernel: int, stride: int = 1,
            padding: int = 0, groups: int = 1) -> RelayExpr:
    """A 1-D conv of ``x`` (N, C, 1, L) as a conv2d of height 1."""
    return layers.conv2d(x, channels=channels, kernel_size=(1, kernel), strides=(1, stride),
                         padding=(0, padding), groups=groups, name=name)


def feature_extractor(audio: RelayExpr, batch: int, samples: int,
                      convs: Sequence[tuple[int, int, int]]) -> tuple[RelayExpr, int, int]:
    """The conv stack on ``audio`` (N, samples): (N, C, 1, frames), C and frames."""
    x, length, channels = relay.reshape(audio, (batch, 1, 1, samples)), samples, 1
    for i, (channels, kernel, stride) in enumerate(convs):
        x = _conv1d(x, f"feature_conv{i}", channels, kernel, stride)
        length = (length - kernel) // stride + 1
        if i == 0:
            x = channel_group_norm(x, "feature_norm0", channels)
        x = exported.gelu(x)
    return x, channels, length


def encoder_layer(x: RelayExpr, name: str, batch: int, frames: int, hidden: int, heads: int,
                  ffn: int) -> RelayExpr:
    """One post-norm layer: attention, then the feed-forward, each added and normalised."""
    attn = efficient_attention(x, f"{name}_attn", batch, 1, frames, hidden, heads, 1)
    x = exported.layer_norm(relay.add(x, attn), f"{name}_ln1", hidden, 1e-5)
    h = exported.gelu(layers.dense_add_bias(x, units=ffn, name=f"{name}_fc1"))
    x = relay.add(x, layers.dense_add_bias(h, units=hidden, name=f"{name}_fc2"))
    return exported.layer_norm(x, f"{name}_ln2", hidden, 1e-5)


def get_net(batch_size: int = 1, samples: int = 16000, hidden: int = 384, num_heads: int = 6,
            num_layers: int = 4, ffn: int = 1536,
            convs: Sequence[tuple[int, int, int]] = FEATURE_CONVS,
            dtype: str = "float32") -> Function:
    """The encoder Function of ``data`` (batch_size, samples)."""
    if hidden % num_heads or hidden % POS_GROUPS:
        raise ValueError(f"wav2vec2: hidden ({hidden}) must be a multiple of num_heads "
                         f"({num_heads}) and of {POS_GROUPS} (the positional conv's groups)")
    if min(batch_size, num_layers, ffn) < 1 or not convs:
        raise ValueError("wav2vec2: batch_size, num_layers, ffn must be positive and convs "
                         "non-empty")
    frames = samples
    for channels, kernel, stride in convs:
        frames = (frames - kernel) // stride + 1 if min(channels, kernel, stride) > 0 else 0
    if frames < 1:
        raise ValueError(f"wav2vec2: {samples} samples are too few for the feature convs "
                         f"{tuple(convs)} (need at least one output frame, and positive "
                         f"channels, kernels and strides)")
    data = relay.var("data", shape=(batch_size, samples), dtype=dtype)
    x, channels, frames = feature_extractor(data, batch_size, samples, convs)
    x = relay.transpose(relay.reshape(x, (batch_size, channels, frames)), (0, 2, 1))
    x = exported.layer_norm(x, "projection_ln", channels, 1e-5)
    x = layers.dense_add_bias(x, units=hidden, name="projection")
    pos = relay.reshape(relay.transpose(x, (0, 2, 1)), (batch_size, hidden, 1, frames))
    pos = _conv1d(pos, "pos_conv", hidden, POS_KERNEL, padding=POS_KERNEL // 2,
                  groups=POS_GROUPS)
    pos = relay.nn.bias_add(pos, relay.var("pos_conv_bias"), axis=1)
    pos = relay.strided_slice(pos, [0], [frames], axes=[3])  # SamePad: even kernel, drop one
    pos = relay.transpose(relay.reshape(exported.gelu(pos), (batch_size, hidden, frames)),
                          (0, 2, 1))
    x = exported.layer_norm(relay.add(x, pos), "encoder_ln", hidden, 1e-5)
    for i in range(1, num_layers + 1):
        x = encoder_layer(x, f"layer{i}", batch_size, frames, hidden, num_heads, ffn)
    weights = [v for v in relay.analysis.free_vars(x) if v is not data]
    return relay.Function([data, *weights], x)


def get_workload(batch_size: int = 1, samples: int = 16000, hidden: int = 384,
                 num_heads: int = 6, num_layers: int = 4, ffn: int = 1536,
                 convs: Sequence[tuple[int, int, int]] = FEATURE_CONVS,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the encoder with He-scaled weights (seed 0)."""
    net = get_net(batch_size, samples, hidden, num_heads, num_layers, ffn,
                  tuple(tuple(c) for c in convs), dtype)  # type: ignore[arg-type]
    return create_workload(net)
