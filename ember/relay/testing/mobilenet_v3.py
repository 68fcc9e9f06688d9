"""MobileNetV3 (Howard et al. 2019), small and large, written as an exporter writes it.

The layers of torchvision's ``mobilenet_v3_small`` / ``mobilenet_v3_large``: a 3x3/2 conv of
16 + hardswish, the bottleneck blocks of the paper's tables (expand 1x1, depthwise k x k with
stride s, optional squeeze-and-excitation, linear project 1x1; an input of the output's shape
is added back), a 1x1 conv to 6x the last block's width + hardswish, global average pooling,
a 1x1 conv (dense) to 1280 (1024 small) + hardswish and the classifier (dense; logits, no
softmax). Squeeze-and-excitation: global average pool, 1x1 conv to a quarter of the channels
(rounded to 8) + ReLU, 1x1 conv back + hardsigmoid, times the block's input.

As exported models have them (``exported.py``): batch norms folded into conv biases,
hardswish spelled ``x * clip(x + 3, 0, 6) / 6`` and hardsigmoid ``clip(x * 0.2 + 0.5, 0, 1)``
(paddle's slope, as in PaddleOCR's MobileNetV3). ``alpha`` scales the widths (rounded to a
multiple of 8), as torchvision's ``width_mult``. Input ``data`` (batch_size, *image_shape) NCHW,
224x224 by default (the issue's orientation classifier: small, alpha 0.35, 3x48x192, 2
classes); output (batch_size, num_classes).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload
from .mobilenet_v2 import make_divisible

# (kernel, expanded, out, squeeze-excite, hardswish (else ReLU), stride) per block
LARGE = ((3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2),
         (3, 72, 24, False, False, 1), (5, 72, 40, True, False, 2),
         (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
         (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1),
         (3, 184, 80, False, True, 1), (3, 184, 80, False, True, 1),
         (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
         (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1),
         (5, 960, 160, True, True, 1))
SMALL = ((3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
         (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
         (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
         (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1),
         (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1),
         (5, 576, 96, True, True, 1))
MODES = {"large": (LARGE, 1280), "small": (SMALL, 1024)}


def _act(x: RelayExpr, hardswish: bool) -> RelayExpr:
    return exported.hardswish(x) if hardswish else relay.nn.relu(x)


def squeeze_excite(x: RelayExpr, name: str, channels: int) -> RelayExpr:
    """``x * hardsigmoid(conv(relu(conv(avg_pool(x)))))``."""
    s = relay.nn.global_avg_pool2d(x)
    s = relay.nn.relu(exported.conv_bias(s, f"{name}_fc1", make_divisible(channels // 4)))
    s = exported.hardsigmoid(exported.conv_bias(s, f"{name}_fc2", channels))
    return relay.multiply(x, s)


def bottleneck(x: RelayExpr, name: str, in_channels: int, kernel: int, expanded: int,
               out_channels: int, se: bool, hardswish: bool, stride: int) -> RelayExpr:
    """expand 1x1 (unless the width stays), depthwise, SE, project; plus x if shapes allow."""
    y = x
    if expanded != in_channels:
        y = _act(exported.conv_bias(y, f"{name}_expand", expanded), hardswish)
    y = _act(exported.conv_bias(y, f"{name}_dw", expanded, kernel, stride, groups=expanded),
             hardswish)
    if se:
        y = squeeze_excite(y, f"{name}_se", expanded)
    y = exported.conv_bias(y, f"{name}_project", out_channels)
    return relay.add(y, x) if stride == 1 and in_channels == out_channels else y


def get_net(batch_size: int = 1, mode: str = "large", num_classes: int = 1000,
            image_shape: tuple[int, int, int] = (3, 224, 224), alpha: float = 1.0,
            dtype: str = "float32") -> Function:
    """The MobileNetV3 Function of ``data`` (batch_size, *image_shape)."""
    if mode not in MODES:
        raise ValueError(f"mobilenet_v3: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if len(image_shape) != 3 or min(image_shape[1:]) < 32:
        raise ValueError(f"mobilenet_v3: image_shape must be (C, H, W) with H, W >= 32, "
                         f"got {image_shape}")
    if alpha <= 0:
        raise ValueError(f"mobilenet_v3: alpha must be positive, got {alpha}")
    blocks, last = MODES[mode]
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    width = make_divisible(16 * alpha)
    net = exported.hardswish(exported.conv_bias(data, "stem", width, 3, 2))
    for i, (kernel, expanded, out, se, hs, stride) in enumerate(blocks, start=1):
        expanded, out = make_divisible(expanded * alpha), make_divisible(out * alpha)
        net = bottleneck(net, f"block{i}", width, kernel, expanded, out, se, hs, stride)
        width = out
    net = exported.hardswish(exported.conv_bias(net, "last_conv", 6 * width))
    net = relay.nn.global_avg_pool2d(net)
    net = exported.hardswish(exported.conv_bias(net, "head", make_divisible(last * alpha)
                                                if alpha > 1 else last))
    net = layers.dense_add_bias(relay.nn.batch_flatten(net), units=num_classes, name="fc")
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, mode: str = "large", num_classes: int = 1000,
                 image_shape: tuple[int, int, int] = (3, 224, 224), alpha: float = 1.0,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of MobileNetV3 ``mode`` ("large" or "small"), He-scaled weights."""
    net = get_net(batch_size, mode, num_classes, tuple(image_shape),  # type: ignore[arg-type]
                  alpha, dtype)
    return create_workload(net)
