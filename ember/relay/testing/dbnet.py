"""A DBNet-style text detector (Liao et al. 2020) as PaddleOCR ships it (``det_mv3_db``),
written as an exporter writes it.

- Backbone: MobileNetV3-large (``mobilenet_v3.bottleneck``, width ``alpha``, 0.5 by default);
  its feature maps at strides 4, 8, 16 and 32 (the outputs of the blocks before each stride-2
  block, and of the final 1x1 conv + hardswish).
- FPN: each map to 256 channels by a 1x1 conv; top-down, ``in4 + up2(in5)``, ``in3 +
  up2(out4)``, ``in2 + up2(out3)`` with nearest upsampling; each level to 64 channels by a 3x3
  conv, upsampled by 8, 4, 2 and 1 to stride 4 and concatenated (256 channels).
- Head: 3x3 conv to 64 + ReLU, 2x2/2 ``conv2d_transpose`` to 64 + ReLU, 2x2/2
  ``conv2d_transpose`` to 1 + sigmoid: the probability map at the input's resolution.

Batch norms are folded into conv biases; hardswish and hardsigmoid are spelled out
(``exported.py``). Input ``data`` (batch_size, 3, H, W) with H and W multiples of 32 (640x640 by
default); output (batch_size, 1, H, W).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload
from .mobilenet_v2 import make_divisible
from .mobilenet_v3 import LARGE, bottleneck

FPN_CHANNELS = 256


def backbone(data: RelayExpr, alpha: float) -> list[RelayExpr]:
    """MobileNetV3-large's feature maps at strides 4, 8, 16 and 32."""
    width = make_divisible(16 * alpha)
    net = exported.hardswish(exported.conv_bias(data, "stem", width, 3, 2))
    features = []
    for i, (kernel, expanded, out, se, hs, stride) in enumerate(LARGE, start=1):
        if stride == 2 and i > 2:  # the map before each downsampling (the first: stride 2)
            features.append(net)
        expanded, out = make_divisible(expanded * alpha), make_divisible(out * alpha)
        net = bottleneck(net, f"block{i}", width, kernel, expanded, out, se, hs, stride)
        width = out
    features.append(exported.hardswish(exported.conv_bias(net, "last_conv", 6 * width)))
    return features


def _conv(x: RelayExpr, name: str, channels: int, kernel: int) -> RelayExpr:
    return layers.conv2d(x, channels=channels, kernel_size=(kernel, kernel),
                         padding=(kernel // 2, kernel // 2), name=name)


def _up(x: RelayExpr, scale: int) -> RelayExpr:
    return relay.nn.upsampling(x, scale_h=scale, scale_w=scale, method="nearest_neighbor")


def fpn(features: list[RelayExpr]) -> RelayExpr:
    """The four maps fused into one of ``FPN_CHANNELS`` channels at stride 4."""
    in2, in3, in4, in5 = (_conv(f, f"fpn_in{i}", FPN_CHANNELS, 1)
                          for i, f in enumerate(features, start=2))
    out4 = relay.add(in4, _up(in5, 2))
    out3 = relay.add(in3, _up(out4, 2))
    out2 = relay.add(in2, _up(out3, 2))
    quarter = FPN_CHANNELS // 4
    maps = [_up(_conv(in5, "fpn_p5", quarter, 3), 8), _up(_conv(out4, "fpn_p4", quarter, 3), 4),
            _up(_conv(out3, "fpn_p3", quarter, 3), 2), _conv(out2, "fpn_p2", quarter, 3)]
    return relay.concatenate(maps, axis=1)


def _deconv(x: RelayExpr, name: str, channels: int) -> RelayExpr:
    y = layers.conv2d_transpose(x, channels=channels, kernel_size=(2, 2), strides=(2, 2),
                                name=name)
    return relay.nn.bias_add(y, relay.var(f"{name}_bias"), axis=1)


def head(x: RelayExpr) -> RelayExpr:
    """The probability map: conv 3x3 + ReLU, two 2x upsampling transposed convs, sigmoid."""
    quarter = FPN_CHANNELS // 4
    y = relay.nn.relu(exported.conv_bias(x, "head_conv", quarter, 3))
    y = relay.nn.relu(_deconv(y, "head_deconv1", quarter))
    return relay.sigmoid(_deconv(y, "head_deconv2", 1))


def get_net(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 640, 640),
            alpha: float = 0.5, dtype: str = "float32") -> Function:
    """The detector Function of ``data`` (batch_size, *image_shape)."""
    if len(image_shape) != 3 or min(image_shape[1:]) < 32 or image_shape[1] % 32 or \
            image_shape[2] % 32:
        raise ValueError(f"dbnet: image_shape must be (C, H, W) with H, W multiples of 32, "
                         f"got {image_shape}")
    if alpha <= 0:
        raise ValueError(f"dbnet: alpha must be positive, got {alpha}")
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    net = head(fpn(backbone(data, alpha)))
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 640, 640),
                 alpha: float = 0.5, dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the text detector with He-scaled weights (seed 0)."""
    net = get_net(batch_size, tuple(image_shape), alpha, dtype)  # type: ignore[arg-type]
    return create_workload(net)
