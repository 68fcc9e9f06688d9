"""ResNet-8, the CIFAR-10 image-classification network of MLPerf Tiny.

A 3x3 conv of 16 filters + batch norm + relu, then three residual stacks of 16, 32 and 64
filters: conv 3x3 (stride 1, 2, 2) + bn + relu, conv 3x3 + bn, added to the stack's input (a
strided 1x1 conv projects it where the width changes), then relu. An average pool over the
final 8x8 map, dense to ``num_classes`` and softmax. Convs have biases and TensorFlow's "same"
padding (a strided 3x3 pads one pixel after, none before), batch norms Keras's epsilon 1e-3,
so the weights map one to one onto the reference Keras model's 78,666. Input ``data``
(batch_size, 3, 32, 32) NCHW; output (batch_size, num_classes) probabilities.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .dscnn import same_padding
from .init import create_workload

_EPS = 1e-3
_FILTERS = (16, 32, 64)


def _conv(x: RelayExpr, name: str, channels: int, kernel: int, stride: int,
          size: int) -> RelayExpr:
    """conv + bias with "same" padding on a square ``size`` x ``size`` input."""
    before, after = same_padding(size, kernel, stride)
    conv = layers.conv2d(x, channels=channels, kernel_size=(kernel, kernel),
                         strides=(stride, stride), padding=(before, before, after, after),
                         name=name)
    return relay.nn.bias_add(conv, relay.var(f"{name}_bias"), axis=1)


def _bn(x: RelayExpr, name: str) -> RelayExpr:
    return layers.batch_norm_infer(x, name=name, axis=1, epsilon=_EPS)


def residual_stack(x: RelayExpr, name: str, channels: int, stride: int, size: int,
                   project: bool) -> RelayExpr:
    """relu(x' + bn(conv(relu(bn(conv(x)))))), with x' a 1x1 projection of x if ``project``."""
    y = relay.nn.relu(_bn(_conv(x, f"{name}_conv1", channels, 3, stride, size), f"{name}_bn1"))
    y = _bn(_conv(y, f"{name}_conv2", channels, 3, 1, -(-size // stride)), f"{name}_bn2")
    shortcut = _conv(x, f"{name}_proj", channels, 1, stride, size) if project else x
    return relay.nn.relu(relay.add(shortcut, y))


def get_net(batch_size: int = 1, num_classes: int = 10, image_size: int = 32,
            dtype: str = "float32") -> Function:
    """The ResNet-8 Function of ``data`` (batch_size, 3, image_size, image_size)."""
    if image_size < 8:
        raise ValueError(f"resnet8: image_size must be at least 8, got {image_size}")
    data = relay.var("data", shape=(batch_size, 3, image_size, image_size), dtype=dtype)
    net = relay.nn.relu(_bn(_conv(data, "conv1", _FILTERS[0], 3, 1, image_size), "bn1"))
    size, width = image_size, _FILTERS[0]
    for i, channels in enumerate(_FILTERS, start=1):
        stride = 1 if i == 1 else 2
        net = residual_stack(net, f"stack{i}", channels, stride, size, channels != width)
        size, width = -(-size // stride), channels
    net = relay.nn.batch_flatten(relay.nn.avg_pool2d(net, pool_size=(size, size)))
    net = relay.nn.softmax(layers.dense_add_bias(net, units=num_classes, name="fc"))
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, num_classes: int = 10, image_size: int = 32,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of ResNet-8 with He-scaled weights (seed 0)."""
    return create_workload(get_net(batch_size, num_classes, image_size, dtype))
