"""DS-CNN, the keyword-spotting network of MLPerf Tiny (Zhang et al., "Hello Edge", 2017).

A 10x4/2 conv of 64 filters (Keras "same" padding) + batch norm + relu, four
depthwise-separable blocks (depthwise 3x3 + bn + relu, pointwise 1x1 of 64 + bn + relu), an
average pool over the whole 25x5 map, a dense layer of ``num_classes`` (12 keywords) and
softmax. Every conv has a bias, as Keras layers do by default; batch norms use Keras's
epsilon 1e-3. Input ``data`` (batch_size, 1, 49, 10) NCHW: 49 frames of 10 MFCC features;
output (batch_size, num_classes) probabilities. ``filters`` narrows the network for tests.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

_EPS = 1e-3


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(before, after) padding of TensorFlow's "same" along one axis: output
    ``ceil(size / stride)``, any odd extra pixel going after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _bn_relu(x: RelayExpr, name: str) -> RelayExpr:
    return relay.nn.relu(layers.batch_norm_infer(x, name=name, axis=1, epsilon=_EPS))


def _conv_bias(x: RelayExpr, name: str, channels: int, kernel: tuple[int, int],
               strides: tuple[int, int] = (1, 1), padding: tuple[int, ...] = (0, 0),
               groups: int = 1) -> RelayExpr:
    conv = layers.conv2d(x, channels=channels, kernel_size=kernel, strides=strides,
                         padding=padding, groups=groups, name=name)
    return relay.nn.bias_add(conv, relay.var(f"{name}_bias"), axis=1)


def separable_block(x: RelayExpr, name: str, channels: int) -> RelayExpr:
    """Depthwise 3x3 (same padding) + bn + relu, then pointwise 1x1 + bn + relu."""
    x = _conv_bias(x, f"{name}_dw", channels, (3, 3), padding=(1, 1), groups=channels)
    x = _bn_relu(x, f"{name}_dw_bn")
    x = _conv_bias(x, f"{name}_pw", channels, (1, 1))
    return _bn_relu(x, f"{name}_pw_bn")


def classifier(features: RelayExpr, input_shape: tuple[int, int], filters: int = 64,
               num_blocks: int = 4, num_classes: int = 12) -> RelayExpr:
    """The network over ``features`` (batch, 1, frames, features): the 10x4/2 conv, the
    separable blocks, the pool over the whole map, the dense layer and softmax."""
    if len(input_shape) != 2 or min(input_shape) < 4:
        raise ValueError(f"dscnn: input_shape must be (frames, features), each >= 4, "
                         f"got {input_shape}")
    height, width = input_shape
    (top, bottom), (left, right) = same_padding(height, 10, 2), same_padding(width, 4, 2)
    net = _conv_bias(features, "conv1", filters, (10, 4), (2, 2), (top, left, bottom, right))
    net = _bn_relu(net, "conv1_bn")
    for i in range(1, num_blocks + 1):
        net = separable_block(net, f"block{i}", filters)
    pool = (-(-height // 2), -(-width // 2))  # the whole feature map, as Keras's pool_size
    net = relay.nn.batch_flatten(relay.nn.avg_pool2d(net, pool_size=pool))
    return relay.nn.softmax(layers.dense_add_bias(net, units=num_classes, name="fc"))


def get_net(batch_size: int = 1, num_classes: int = 12, input_shape: tuple[int, int] = (49, 10),
            filters: int = 64, num_blocks: int = 4, dtype: str = "float32") -> Function:
    """The DS-CNN Function of ``data`` (batch_size, 1, frames, features)."""
    data = relay.var("data", shape=(batch_size, 1, *input_shape), dtype=dtype)
    net = classifier(data, input_shape, filters, num_blocks, num_classes)
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, num_classes: int = 12,
                 input_shape: tuple[int, int] = (49, 10), filters: int = 64,
                 num_blocks: int = 4, dtype: str = "float32",
                 ) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of DS-CNN with He-scaled weights (seed 0)."""
    net = get_net(batch_size, num_classes, tuple(input_shape), filters,  # type: ignore[arg-type]
                  num_blocks, dtype)
    return create_workload(net)
