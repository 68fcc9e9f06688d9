"""MobileNetV2 (Sandler et al. 2018): inverted residual blocks with linear bottlenecks.

A 3x3/2 conv of 32 + batch norm + ReLU6, seventeen inverted residual blocks in seven stages
(expansion t, output channels c, repeats n, first stride s), a 1x1 conv to 1280 + bn + ReLU6,
global average pooling and a dense classifier. A block expands with a 1x1 conv (t times the
input channels; absent when t is 1) + bn + ReLU6, filters with a depthwise 3x3 (stride s on the
stage's first block) + bn + ReLU6, projects with a 1x1 conv + bn and no activation, and adds its
input when the stride is 1 and the channels match. ReLU6 is ``clip(x, 0, 6)``; convs have no
bias (the batch norms carry it), as in torchvision's ``mobilenet_v2``, whose 3,504,872
parameters this model has at width 1.0. ``alpha`` scales every width (rounded to a multiple of
8; the last conv keeps 1280 below 1.0). Input ``data`` (batch_size, *image_shape) NCHW;
output (batch_size, num_classes) logits (no softmax, as torchvision).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

_EPS = 1e-5
# (expansion t, channels c, repeats n, first stride s) per stage
_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
           (6, 160, 3, 2), (6, 320, 1, 1))


def make_divisible(value: float, divisor: int = 8) -> int:
    """``value`` rounded to the nearest multiple of ``divisor``, never below 90% of it."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def relu6(x: RelayExpr) -> RelayExpr:
    """min(max(x, 0), 6) as ``clip``."""
    return relay.clip(x, 0.0, 6.0)


def conv_bn(x: RelayExpr, name: str, channels: int, kernel: int = 1, stride: int = 1,
            groups: int = 1, act: bool = True) -> RelayExpr:
    """conv (no bias, padding kernel // 2) + batch norm, then ReLU6 if ``act``."""
    conv = layers.conv2d(x, channels=channels, kernel_size=(kernel, kernel),
                         strides=(stride, stride), padding=(kernel // 2, kernel // 2),
                         groups=groups, name=name)
    bn = layers.batch_norm_infer(conv, name=f"{name}_bn", axis=1, epsilon=_EPS)
    return relu6(bn) if act else bn


def inverted_residual(x: RelayExpr, name: str, in_channels: int, out_channels: int,
                      stride: int, expansion: int) -> RelayExpr:
    """expand 1x1 (if t > 1), depthwise 3x3, linear project 1x1; plus x when shapes allow."""
    hidden = in_channels * expansion
    y = x if expansion == 1 else conv_bn(x, f"{name}_expand", hidden)
    y = conv_bn(y, f"{name}_dw", hidden, 3, stride, groups=hidden)
    y = conv_bn(y, f"{name}_project", out_channels, act=False)
    return relay.add(x, y) if stride == 1 and in_channels == out_channels else y


def get_net(batch_size: int = 1, num_classes: int = 1000,
            image_shape: tuple[int, int, int] = (3, 224, 224), alpha: float = 1.0,
            dtype: str = "float32") -> Function:
    """The MobileNetV2 Function of ``data`` (batch_size, *image_shape)."""
    if len(image_shape) != 3 or min(image_shape[1:]) < 32:
        raise ValueError(f"mobilenet_v2: image_shape must be (C, H, W) with H, W >= 32, "
                         f"got {image_shape}")
    if alpha <= 0:
        raise ValueError(f"mobilenet_v2: alpha must be positive, got {alpha}")
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    width = make_divisible(32 * alpha)
    net = conv_bn(data, "conv1", width, 3, 2)
    block = 0
    for expansion, channels, repeats, stride in _STAGES:
        out = make_divisible(channels * alpha)
        for i in range(repeats):
            block += 1
            net = inverted_residual(net, f"block{block}", width, out, stride if i == 0 else 1,
                                    expansion)
            width = out
    net = conv_bn(net, "conv_last", make_divisible(1280 * max(1.0, alpha)))
    net = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(net))
    net = layers.dense_add_bias(net, units=num_classes, name="fc")
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, num_classes: int = 1000,
                 image_shape: tuple[int, int, int] = (3, 224, 224), alpha: float = 1.0,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of MobileNetV2 with He-scaled weights (seed 0)."""
    net = get_net(batch_size, num_classes, tuple(image_shape),  # type: ignore[arg-type]
                  alpha, dtype)
    return create_workload(net)
