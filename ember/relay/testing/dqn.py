"""The DQN network of "Human-level control through deep reinforcement learning" (Nature 2015).

Three conv + bias + relu layers (8x8/4, 4x4/2, 3x3/1; 32, 64, 64 channels), a 512-unit dense
layer with relu and a dense layer of ``num_actions`` Q-values (no softmax). Input ``data``
(batch_size, *image_shape), by default 4 stacked 84x84 frames; output (batch_size,
num_actions).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

# (channels, kernel, stride) of the three convolutions
_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


def get_net(batch_size: int, num_actions: int = 18, image_shape: tuple[int, ...] = (4, 84, 84),
            dtype: str = "float32", layout: str = "NCHW") -> Function:
    """The DQN Function of ``data`` (in ``layout``: NCHW, or NHWC with image_shape (H, W, C))."""
    kernel_layout = layers.conv_kernel_layout(layout)
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    net: RelayExpr = data
    for i, (channels, kernel, stride) in enumerate(_CONVS, start=1):
        net = layers.conv2d(net, kernel_size=(kernel, kernel), strides=(stride, stride),
                            channels=channels, data_layout=layout, kernel_layout=kernel_layout,
                            name=f"conv{i}")
        net = relay.nn.relu(relay.nn.bias_add(net, relay.var(f"conv{i}_bias"),
                                              axis=layout.index("C")))
    net = relay.nn.relu(layers.dense_add_bias(relay.nn.batch_flatten(net), units=512,
                                              name="dense1"))
    net = layers.dense_add_bias(net, units=num_actions, name="dense2")
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int, num_actions: int = 18,
                 image_shape: tuple[int, ...] = (4, 84, 84), dtype: str = "float32",
                 layout: str = "NCHW") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the DQN network with He-scaled Xavier weights (seed 0)."""
    return create_workload(get_net(batch_size, num_actions, tuple(image_shape), dtype, layout))
