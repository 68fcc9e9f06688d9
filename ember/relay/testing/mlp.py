"""A multi-layer perceptron: flatten, three dense layers (128, 64, classes), softmax.

Input ``data`` (batch_size, *image_shape); output (batch_size, num_classes) probabilities.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload


def get_net(batch_size: int, num_classes: int = 10, image_shape: tuple[int, ...] = (1, 28, 28),
            dtype: str = "float32") -> Function:
    """The MLP as a Function of ``data`` and its (unannotated) weights."""
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    net: RelayExpr = relay.nn.batch_flatten(data)
    for i, units in enumerate((128, 64), start=1):
        net = relay.nn.relu(layers.dense_add_bias(net, units=units, name=f"fc{i}"))
    net = layers.dense_add_bias(net, units=num_classes, name="fc3")
    net = relay.nn.softmax(net)
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int, num_classes: int = 10,
                 image_shape: tuple[int, ...] = (1, 28, 28),
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the MLP with Xavier weights (seed 0)."""
    return create_workload(get_net(batch_size, num_classes, tuple(image_shape), dtype))
