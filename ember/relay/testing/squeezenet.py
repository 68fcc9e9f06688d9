"""SqueezeNet 1.0 and 1.1 (Iandola et al. 2016): fire modules of a 1x1 squeeze conv feeding
parallel 1x1 and 3x3 expand convs whose outputs are concatenated.

Input ``data`` (batch_size, *image_shape), NCHW; output (batch_size, num_classes) softmax
probabilities from a 1x1 conv classifier and global average pooling. 1.1 has a 3x3 stem and
pools earlier (2.4x less computation, about the same accuracy).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

# Per version: stem (channels, kernel, stride, padding), then the body: a fire module is
# (squeeze, expand1x1, expand3x3); "pool" is a 3x3/2 max pool.
_Fire = tuple[int, int, int]
_FIRES_10: list[_Fire | str] = [
    (16, 64, 64), (16, 64, 64), (32, 128, 128), "pool", (32, 128, 128), (48, 192, 192),
    (48, 192, 192), (64, 256, 256), "pool", (64, 256, 256)]
_FIRES_11: list[_Fire | str] = [
    (16, 64, 64), (16, 64, 64), "pool", (32, 128, 128), (32, 128, 128), "pool",
    (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)]
_SPECS = {"1.0": ((96, 7, 2, 3), _FIRES_10), "1.1": ((64, 3, 2, 1), _FIRES_11)}


def _conv_relu(net: RelayExpr, channels: int, kernel: int, padding: int, name: str,
               stride: int = 1) -> RelayExpr:
    net = layers.conv2d(net, channels=channels, kernel_size=(kernel, kernel),
                        strides=(stride, stride), padding=(padding, padding), name=name)
    return relay.nn.relu(relay.nn.bias_add(net, relay.var(f"{name}_bias")))


def _fire(net: RelayExpr, squeeze: int, expand1x1: int, expand3x3: int,
          prefix: str) -> RelayExpr:
    net = _conv_relu(net, squeeze, 1, 0, f"{prefix}_input_conv")
    left = _conv_relu(net, expand1x1, 1, 0, f"{prefix}_left_conv")
    right = _conv_relu(net, expand3x3, 3, 1, f"{prefix}_right_conv")
    return relay.concatenate((left, right), axis=1)


def _max_pool(net: RelayExpr) -> RelayExpr:
    return relay.nn.max_pool2d(net, pool_size=(3, 3), strides=(2, 2))


def get_net(batch_size: int, image_shape: tuple[int, ...], num_classes: int, version: str,
            dtype: str) -> Function:
    """The SqueezeNet ``version`` ("1.0" or "1.1") Function of ``data`` and its weights."""
    if version not in _SPECS:
        raise ValueError(f"squeezenet: unsupported version {version!r}; expected '1.0' or '1.1'")
    (channels, kernel, stride, padding), body = _SPECS[version]
    net: RelayExpr = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    net = _max_pool(_conv_relu(net, channels, kernel, padding, "conv1", stride))
    fire = 0
    for item in body:
        if isinstance(item, str):  # "pool"
            net = _max_pool(net)
        else:
            fire += 1
            net = _fire(net, *item, f"fire{fire}")
    net = relay.nn.dropout(net, rate=0.5)
    net = _conv_relu(net, num_classes, 1, 0, "conv_final")
    net = relay.nn.softmax(relay.nn.batch_flatten(relay.nn.global_avg_pool2d(net)))
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, num_classes: int = 1000, version: str = "1.0",
                 image_shape: tuple[int, ...] = (3, 224, 224),
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of SqueezeNet with He-scaled Xavier weights (seed 0)."""
    return create_workload(get_net(batch_size, tuple(image_shape), num_classes, version, dtype))
