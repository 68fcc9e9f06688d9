"""DenseNet 121/161/169/201 (Huang et al. 2017).

A 7x7/2 conv stem with batch norm, relu and a 3x3/2 max pool; four dense blocks whose layers
(bn, relu, 1x1 conv to ``bn_size * growth_rate``, bn, relu, 3x3 conv to ``growth_rate``) each
see the concatenation of the block's input and every earlier layer's output; transitions
(bn, relu, 1x1 conv halving the channels, 2x2/2 average pool) between blocks; a final bn and
relu, global average pooling and a dense classifier (logits, no softmax). Input ``data``
(batch_size, *image_shape), NCHW; output (batch_size, classes). Images of at least 32x32 work.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

# densenet_size -> (num_init_features, growth_rate, layers per block)
_SPECS = {121: (64, 32, (6, 12, 24, 16)), 161: (96, 48, (6, 12, 36, 24)),
          169: (64, 32, (6, 12, 32, 32)), 201: (64, 32, (6, 12, 48, 32))}


def _bn_relu(x: RelayExpr, name: str) -> RelayExpr:
    return relay.nn.relu(layers.batch_norm_infer(x, name=name))


def _dense_layer(data: RelayExpr, growth_rate: int, bn_size: int, index: str) -> RelayExpr:
    net = layers.conv2d(_bn_relu(data, f"batch_1_{index}"), channels=bn_size * growth_rate,
                        kernel_size=(1, 1), name=f"conv2d_1_{index}")
    return layers.conv2d(_bn_relu(net, f"batch_2_{index}"), channels=growth_rate,
                         kernel_size=(3, 3), padding=(1, 1), name=f"conv2d_2_{index}")


def _dense_block(data: RelayExpr, num_layers: int, bn_size: int, growth_rate: int,
                 index: int) -> RelayExpr:
    features = [data]
    for i in range(num_layers):
        seen = features[0] if len(features) == 1 else relay.concatenate(features, axis=1)
        features.append(_dense_layer(seen, growth_rate, bn_size, f"{index}_{i}"))
    return relay.concatenate(features, axis=1)


def _transition(data: RelayExpr, channels: int, index: int) -> RelayExpr:
    net = layers.conv2d(_bn_relu(data, f"batch_t_{index}"), channels=channels,
                        kernel_size=(1, 1), name=f"conv_t_{index}")
    return relay.nn.avg_pool2d(net, pool_size=(2, 2), strides=(2, 2))


def get_net(num_init_features: int, growth_rate: int, block_config: tuple[int, ...],
            data_shape: tuple[int, ...], data_dtype: str = "float32", bn_size: int = 4,
            classes: int = 1000) -> Function:
    """A DenseNet Function from its hyper-parameters (any ``block_config``)."""
    data = relay.var("data", shape=data_shape, dtype=data_dtype)
    net = layers.conv2d(data, channels=num_init_features, kernel_size=(7, 7), strides=(2, 2),
                        padding=(3, 3), name="conv1")
    net = relay.nn.max_pool2d(_bn_relu(net, "batch1"), pool_size=(3, 3), strides=(2, 2),
                              padding=(1, 1))
    channels = num_init_features
    for i, num_layers in enumerate(block_config):
        net = _dense_block(net, num_layers, bn_size, growth_rate, i)
        channels += num_layers * growth_rate
        if i != len(block_config) - 1:
            channels //= 2
            net = _transition(net, channels, i)
    net = relay.nn.global_avg_pool2d(_bn_relu(net, "batch2"))
    net = layers.dense_add_bias(relay.nn.batch_flatten(net), units=classes, name="dense")
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(densenet_size: int = 121, classes: int = 1000, batch_size: int = 4,
                 image_shape: tuple[int, ...] = (3, 224, 224),
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of DenseNet-``densenet_size`` with He-scaled Xavier weights (seed 0).

    The argument order and ``batch_size=4`` default are the Relay-era zoo's."""
    if densenet_size not in _SPECS:
        raise ValueError(f"densenet: no DenseNet-{densenet_size}; choose one of "
                         f"{sorted(_SPECS)}")
    init_features, growth_rate, block_config = _SPECS[densenet_size]
    net = get_net(init_features, growth_rate, block_config, (batch_size, *image_shape), dtype,
                  classes=classes)
    return create_workload(net)
