"""VGG 11/13/16/19 (Simonyan & Zisserman 2014), optionally with batch norm.

Five stages of 3x3 conv + bias (+ batch norm) + relu, each closed by a 2x2/2 max pool, then
dense 4096, 4096 (relu, dropout) and ``num_classes`` with a softmax. Input ``data``
(batch_size, *image_shape), NCHW, height and width multiples of 32; output
(batch_size, num_classes).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

_FILTERS = (64, 128, 256, 512, 512)
# num_layers -> convolutions per stage
_SPEC = {11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}


def get_feature(net: RelayExpr, convs_per_stage: tuple[int, ...], filters: tuple[int, ...],
                batch_norm: bool = False) -> RelayExpr:
    """The convolutional stages; weights ``conv{stage}_{i}_weight``/``_bias``, ``bn{..}_*``."""
    for stage, (count, channels) in enumerate(zip(convs_per_stage, filters), start=1):
        for i in range(1, count + 1):
            name = f"{stage}_{i}"
            net = layers.conv2d(net, kernel_size=(3, 3), padding=(1, 1), channels=channels,
                                name=f"conv{name}")
            net = relay.nn.bias_add(net, relay.var(f"conv{name}_bias"))
            if batch_norm:
                net = layers.batch_norm_infer(net, name=f"bn{name}")
            net = relay.nn.relu(net)
        net = relay.nn.max_pool2d(net, pool_size=(2, 2), strides=(2, 2))
    return net


def get_classifier(net: RelayExpr, num_classes: int) -> RelayExpr:
    """flatten, fc6 / fc7 (4096, relu, dropout), fc8 (num_classes)."""
    net = relay.nn.batch_flatten(net)
    for name in ("fc6", "fc7"):
        net = relay.nn.relu(layers.dense_add_bias(net, units=4096, name=name))
        net = relay.nn.dropout(net, rate=0.5)
    return layers.dense_add_bias(net, units=num_classes, name="fc8")


def get_net(batch_size: int, image_shape: tuple[int, ...], num_classes: int, dtype: str,
            num_layers: int = 11, batch_norm: bool = False) -> Function:
    """The VGG-``num_layers`` Function of ``data`` and its weights."""
    if num_layers not in _SPEC:
        raise ValueError(f"vgg: no {num_layers}-layer network; choose one of {sorted(_SPEC)}")
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    net = get_feature(data, _SPEC[num_layers], _FILTERS, batch_norm)
    net = relay.nn.softmax(get_classifier(net, num_classes))
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int, num_classes: int = 1000,
                 image_shape: tuple[int, ...] = (3, 224, 224), dtype: str = "float32",
                 num_layers: int = 11,
                 batch_norm: bool = False) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of VGG with He-scaled Xavier weights (seed 0)."""
    net = get_net(batch_size, tuple(image_shape), num_classes, dtype, num_layers, batch_norm)
    return create_workload(net)
