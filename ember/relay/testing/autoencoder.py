"""The dense autoencoder of MLPerf Tiny's anomaly detection benchmark (ToyADMOS machines).

640 inputs (5 frames of a 128-band log-mel spectrogram), four dense layers of 128 each with
batch norm and relu, a bottleneck of 8 (dense + bn + relu), four more dense 128 + bn + relu,
and a dense layer back to 640 (no activation: the reconstruction, whose error against the input
is the anomaly score). Batch norms use Keras's epsilon 1e-3; the weights map one to one onto
the reference Keras model's 269,992. Input ``data`` (batch_size, input_dim); output the same
shape. ``hidden``/``bottleneck`` narrow the network for tests.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

_EPS = 1e-3


def dense_bn_relu(x: RelayExpr, name: str, units: int) -> RelayExpr:
    """relu(batch_norm(dense(x) + bias)) with weights ``name_weight``, ``name_bias``,
    ``name_bn_*``."""
    x = layers.dense_add_bias(x, units=units, name=name)
    return relay.nn.relu(layers.batch_norm_infer(x, name=f"{name}_bn", axis=1, epsilon=_EPS))


def get_net(batch_size: int = 1, input_dim: int = 640, hidden: int = 128, bottleneck: int = 8,
            depth: int = 4, dtype: str = "float32") -> Function:
    """The autoencoder Function of ``data`` (batch_size, input_dim)."""
    if min(input_dim, hidden, bottleneck, depth) < 1:
        raise ValueError(f"autoencoder: input_dim, hidden, bottleneck and depth must be "
                         f"positive, got {input_dim}, {hidden}, {bottleneck}, {depth}")
    data = relay.var("data", shape=(batch_size, input_dim), dtype=dtype)
    net: RelayExpr = data
    for i in range(1, depth + 1):
        net = dense_bn_relu(net, f"enc{i}", hidden)
    net = dense_bn_relu(net, "bottleneck", bottleneck)
    for i in range(1, depth + 1):
        net = dense_bn_relu(net, f"dec{i}", hidden)
    net = layers.dense_add_bias(net, units=input_dim, name="out")
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, input_dim: int = 640, hidden: int = 128,
                 bottleneck: int = 8, depth: int = 4,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the autoencoder with He-scaled weights (seed 0)."""
    return create_workload(get_net(batch_size, input_dim, hidden, bottleneck, depth, dtype))
