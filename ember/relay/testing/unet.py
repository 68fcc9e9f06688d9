"""A U-Net segmenter (Ronneberger et al. 2015), small, written as an exporter writes it.

``levels`` (4) resolutions: at each, two 3x3 convs + ReLU (batch norms folded into the conv
biases); between them a 2x2/2 max pool on the way down and a 2x2/2 ``conv2d_transpose`` (half
the channels) on the way up, whose output is concatenated with the encoder's map of the same
resolution (the skip connection) before the level's two convs. Channels ``base`` (16) at the
top, doubled at each level down. A 1x1 conv gives ``num_classes`` logits per pixel.

Input ``data`` (batch_size, 3, H, W) with H and W multiples of ``2 ** (levels - 1)`` (256x256
by default); output (batch_size, num_classes, H, W).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported, layers
from .init import create_workload


def double_conv(x: RelayExpr, name: str, channels: int) -> RelayExpr:
    """Two 3x3 conv + bias + ReLU."""
    x = relay.nn.relu(exported.conv_bias(x, f"{name}_conv1", channels, 3))
    return relay.nn.relu(exported.conv_bias(x, f"{name}_conv2", channels, 3))


def up(x: RelayExpr, skip: RelayExpr, name: str, channels: int) -> RelayExpr:
    """2x upsampling by a transposed conv to ``channels``, skip concat, double conv."""
    y = layers.conv2d_transpose(x, channels=channels, kernel_size=(2, 2), strides=(2, 2),
                                name=f"{name}_up")
    y = relay.nn.bias_add(y, relay.var(f"{name}_up_bias"), axis=1)
    return double_conv(relay.concatenate([skip, y], axis=1), name, channels)


def get_net(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 256, 256),
            levels: int = 4, base: int = 16, num_classes: int = 2,
            dtype: str = "float32") -> Function:
    """The segmenter Function of ``data`` (batch_size, *image_shape)."""
    if levels < 2 or min(base, num_classes, batch_size) < 1:
        raise ValueError(f"unet: levels must be >= 2 and base, num_classes, batch_size "
                         f"positive, got levels={levels}, base={base}, "
                         f"num_classes={num_classes}, batch_size={batch_size}")
    step = 2 ** (levels - 1)
    if len(image_shape) != 3 or image_shape[1] % step or image_shape[2] % step or \
            min(image_shape[1:]) < step:
        raise ValueError(f"unet: image_shape must be (C, H, W) with H, W multiples of {step} "
                         f"(2 ** (levels - 1)), got {image_shape}")
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    skips, x = [], data
    for level in range(levels - 1):
        x = double_conv(x, f"down{level}", base * 2 ** level)
        skips.append(x)
        x = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2))
    x = double_conv(x, "bottom", base * 2 ** (levels - 1))
    for level in reversed(range(levels - 1)):
        x = up(x, skips[level], f"up{level}", base * 2 ** level)
    out = layers.conv2d(x, channels=num_classes, kernel_size=(1, 1), name="head")
    out = relay.nn.bias_add(out, relay.var("head_bias"), axis=1)
    return relay.Function(relay.analysis.free_vars(out), out)


def get_workload(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 256, 256),
                 levels: int = 4, base: int = 16, num_classes: int = 2,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the segmenter with He-scaled weights (seed 0)."""
    net = get_net(batch_size, tuple(image_shape), levels, base, num_classes,  # type: ignore
                  dtype)
    return create_workload(net)
