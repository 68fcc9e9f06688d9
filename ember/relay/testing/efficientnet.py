"""EfficientNet-B0 and EfficientNet-lite0 (Tan and Le 2019), written as an exporter writes them.

A 3x3/2 conv of 32, sixteen MBConv blocks in seven stages (expansion t, kernel k, first stride
s, output channels c, repeats n), a 1x1 conv to 1280, global average pooling and a dense
classifier (logits). An MBConv block expands with a 1x1 conv (t times the input channels;
absent when t is 1), filters with a depthwise k x k, optionally squeezes and excites, projects
with a 1x1 conv and no activation, and adds its input when the shapes match.

- ``variant="b0"`` (torchvision's ``efficientnet_b0``): SiLU everywhere, spelled
  ``x * sigmoid(x)``; squeeze-and-excitation with a quarter of the block's *input* channels:
  global average pool, 1x1 conv + SiLU, 1x1 conv + sigmoid, times the block's input.
- ``variant="lite0"`` (the mobile variant of the TensorFlow Lite release): no
  squeeze-and-excitation and ReLU6 (``clip(x, 0, 6)``) instead of SiLU.

Batch norms are folded into conv biases, as exported models have them. ``alpha`` scales the
widths (rounded to a multiple of 8). Input ``data`` (batch_size, *image_shape) NCHW, 224x224 by
default; output (batch_size, num_classes).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload
from .mobilenet_v2 import make_divisible

# (expansion t, kernel k, first stride s, channels c, repeats n) per stage
STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))
VARIANTS = ("b0", "lite0")


def _act(x: RelayExpr, variant: str) -> RelayExpr:
    return exported.silu(x) if variant == "b0" else relay.clip(x, 0.0, 6.0)


def squeeze_excite(x: RelayExpr, name: str, channels: int, squeezed: int) -> RelayExpr:
    """``x * sigmoid(conv(silu(conv(avg_pool(x)))))``."""
    s = relay.nn.global_avg_pool2d(x)
    s = exported.silu(exported.conv_bias(s, f"{name}_fc1", squeezed))
    return relay.multiply(x, relay.sigmoid(exported.conv_bias(s, f"{name}_fc2", channels)))


def mbconv(x: RelayExpr, name: str, in_channels: int, out_channels: int, expansion: int,
           kernel: int, stride: int, variant: str) -> RelayExpr:
    """expand 1x1 (if t > 1), depthwise, SE (b0), project; plus x when shapes allow."""
    hidden = in_channels * expansion
    y = x if expansion == 1 else _act(exported.conv_bias(x, f"{name}_expand", hidden), variant)
    y = _act(exported.conv_bias(y, f"{name}_dw", hidden, kernel, stride, groups=hidden), variant)
    if variant == "b0":
        y = squeeze_excite(y, f"{name}_se", hidden, max(1, in_channels // 4))
    y = exported.conv_bias(y, f"{name}_project", out_channels)
    return relay.add(y, x) if stride == 1 and in_channels == out_channels else y


def get_net(batch_size: int = 1, variant: str = "b0", num_classes: int = 1000,
            image_shape: tuple[int, int, int] = (3, 224, 224), alpha: float = 1.0,
            dtype: str = "float32") -> Function:
    """The EfficientNet Function of ``data`` (batch_size, *image_shape)."""
    if variant not in VARIANTS:
        raise ValueError(f"efficientnet: variant must be one of {', '.join(VARIANTS)}, got "
                         f"{variant!r}")
    if len(image_shape) != 3 or min(image_shape[1:]) < 32:
        raise ValueError(f"efficientnet: image_shape must be (C, H, W) with H, W >= 32, "
                         f"got {image_shape}")
    if alpha <= 0:
        raise ValueError(f"efficientnet: alpha must be positive, got {alpha}")
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    width = make_divisible(32 * alpha)
    net = _act(exported.conv_bias(data, "stem", width, 3, 2), variant)
    block = 0
    for expansion, kernel, stride, channels, repeats in STAGES:
        out = make_divisible(channels * alpha)
        for i in range(repeats):
            block += 1
            net = mbconv(net, f"block{block}", width, out, expansion, kernel,
                         stride if i == 0 else 1, variant)
            width = out
    net = _act(exported.conv_bias(net, "head", make_divisible(1280 * max(1.0, alpha))), variant)
    net = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(net))
    net = layers.dense_add_bias(net, units=num_classes, name="fc")
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, variant: str = "b0", num_classes: int = 1000,
                 image_shape: tuple[int, int, int] = (3, 224, 224), alpha: float = 1.0,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of EfficientNet ``variant`` ("b0" or "lite0"), He-scaled weights."""
    net = get_net(batch_size, variant, num_classes, tuple(image_shape),  # type: ignore[arg-type]
                  alpha, dtype)
    return create_workload(net)
