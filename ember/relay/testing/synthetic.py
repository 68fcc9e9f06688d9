"""A small synthetic network that touches many op kinds on one odd-shaped input.

Two rounds of: dense over the last axis (reshape to 2-D, reshape_like back) beside a 3x3
convolution with a softmax, added together, then bias_add and batch norm (first round only).
Input ``data`` ``input_shape`` (default (1, 3, 24, 12), NCHW); output has the same shape.
``wtype`` is the weights' dtype (default: ``dtype``).
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import Xavier, create_workload


def _dense_beside_conv(x: RelayExpr, data: RelayExpr, input_shape: tuple[int, ...], wtype: str,
                       tag: str) -> RelayExpr:
    """relu(dense over the last axis) + softmax(3x3 conv), with weights dense{tag}_weight
    and conv{tag}_weight (the Relay-era names: "" for the first round, "2" for the second)."""
    _, channels, _, width = input_shape
    dense_w = relay.var(f"dense{tag}_weight", shape=(width, width), dtype=wtype)
    dense = relay.nn.relu(relay.nn.dense(relay.reshape(x, (-1, width)), dense_w))
    dense = relay.reshape_like(dense, data)
    conv_w = relay.var(f"conv{tag}_weight", shape=(channels, channels, 3, 3), dtype=wtype)
    conv = relay.nn.softmax(relay.nn.conv2d(x, conv_w, padding=(1, 1), kernel_size=(3, 3)))
    return relay.add(dense, conv)


def get_net(input_shape: tuple[int, ...] = (1, 3, 24, 12), dtype: str = "float32",
            wtype: str | None = None) -> Function:
    """The synthetic network as a Function of ``data`` and its weights."""
    if len(input_shape) != 4:
        raise ValueError(f"synthetic: input_shape must be (N, C, H, W), got {input_shape}")
    wtype = wtype or dtype
    data = relay.var("data", shape=input_shape, dtype=dtype)
    net = _dense_beside_conv(data, data, input_shape, wtype, "")
    net = relay.nn.bias_add(net, relay.var("bias", shape=(input_shape[1],), dtype=wtype))
    net = layers.batch_norm_infer(net, name="batch_norm")
    net = _dense_beside_conv(net, data, input_shape, wtype, "2")
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(input_shape: tuple[int, ...] = (1, 3, 24, 12), dtype: str = "float32",
                 wtype: str | None = None) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the synthetic network with Xavier weights (seed 0)."""
    net = get_net(tuple(input_shape), dtype, wtype)
    return create_workload(net, initializer=Xavier())
