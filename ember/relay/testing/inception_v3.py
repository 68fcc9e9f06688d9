"""Inception v3 (Szegedy et al. 2015, "Rethinking the Inception Architecture"), 299x299.

Every convolution is conv + batch norm (no scale) + relu. The stem reduces 299 to 35; three
A modules (35x35), a B reduction to 17, four C modules with factorised 1x7/7x1 convolutions,
a D reduction to 8, two E modules with split 1x3/3x1 branches, an 8x8 average pool, dense and
softmax. Input ``data`` (batch_size, *image_shape), NCHW; output (batch_size, num_classes).
The final 8x8 pool fits 299x299 images; ``global_pool=True`` (an ember extra) pools globally
instead and accepts any image from 75x75, e.g. for quick tests.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

Pair = tuple[int, int]


def conv(data: RelayExpr, num_filter: int, kernel: Pair = (1, 1), stride: Pair = (1, 1),
         pad: Pair = (0, 0), name: str = "conv") -> RelayExpr:
    """conv + batch norm (center only) + relu; weights ``name_conv1_weight``, ``name_bn_*``."""
    net = layers.conv2d(data, channels=num_filter, kernel_size=kernel, strides=stride,
                        padding=pad, name=f"{name}_conv1")
    net = layers.batch_norm_infer(net, epsilon=2e-5, scale=False, name=f"{name}_bn")
    return relay.nn.relu(net)


def pool(data: RelayExpr, kind: str, kernel: Pair = (3, 3), stride: Pair = (1, 1),
         pad: Pair = (0, 0)) -> RelayExpr:
    """Max or average pooling (average counts padding, as the original network does)."""
    if kind == "max":
        return relay.nn.max_pool2d(data, pool_size=kernel, strides=stride, padding=pad)
    if kind == "avg":
        return relay.nn.avg_pool2d(data, pool_size=kernel, strides=stride, padding=pad,
                                   count_include_pad=True)
    raise ValueError(f"inception_v3: pooling must be 'max' or 'avg', got {kind!r}")


def _chain(data: RelayExpr, name: str, steps: list[tuple[int, Pair, Pair]],
           stride_last: Pair = (1, 1)) -> RelayExpr:
    """Convolutions one after another: (filters, kernel, pad) each, named name_conv, _conv_1..."""
    for i, (filters, kernel, pad) in enumerate(steps):
        stride = stride_last if i == len(steps) - 1 else (1, 1)
        data = conv(data, filters, kernel, stride, pad, f"{name}_conv" + (f"_{i}" if i else ""))
    return data


_1, _3, _5 = (1, 1), (3, 3), (5, 5)
_17, _71, _13, _31 = (1, 7), (7, 1), (1, 3), (3, 1)
_P0, _P1, _P2 = (0, 0), (1, 1), (2, 2)
_P03, _P30, _P01, _P10 = (0, 3), (3, 0), (0, 1), (1, 0)


def inception_a(data: RelayExpr, n1: int, n3r: int, n3a: int, n3b: int, n5r: int, n5: int,
                kind: str, proj: int, name: str) -> RelayExpr:
    """1x1 | 1x1 -> 5x5 | 1x1 -> 3x3 -> 3x3 | pool -> 1x1 projection."""
    return relay.concatenate((
        conv(data, n1, name=f"{name}_conv"),
        _chain(data, f"{name}_tower", [(n5r, _1, _P0), (n5, _5, _P2)]),
        _chain(data, f"{name}_tower_1", [(n3r, _1, _P0), (n3a, _3, _P1), (n3b, _3, _P1)]),
        conv(pool(data, kind, _3, _1, _P1), proj, name=f"{name}_tower_2_conv")), axis=1)


def inception_b(data: RelayExpr, n3: int, nd3r: int, nd3a: int, nd3b: int,
                name: str) -> RelayExpr:
    """Grid reduction: 3x3/2 | 1x1 -> 3x3 -> 3x3/2 | 3x3/2 max pool."""
    return relay.concatenate((
        conv(data, n3, _3, (2, 2), name=f"{name}_conv"),
        _chain(data, f"{name}_tower", [(nd3r, _1, _P0), (nd3a, _3, _P1), (nd3b, _3, _P0)],
               (2, 2)),
        pool(data, "max", _3, (2, 2))), axis=1)


def inception_c(data: RelayExpr, n1: int, nd7r: int, nd7a: int, nd7b: int, nq7r: int,
                nq7a: int, nq7b: int, nq7c: int, nq7d: int, kind: str, proj: int,
                name: str) -> RelayExpr:
    """1x1 | 1x1 -> 1x7 -> 7x1 | 1x1 -> 7x1 -> 1x7 -> 7x1 -> 1x7 | pool -> 1x1."""
    return relay.concatenate((
        conv(data, n1, name=f"{name}_conv"),
        _chain(data, f"{name}_tower", [(nd7r, _1, _P0), (nd7a, _17, _P03), (nd7b, _71, _P30)]),
        _chain(data, f"{name}_tower_1", [(nq7r, _1, _P0), (nq7a, _71, _P30), (nq7b, _17, _P03),
                                         (nq7c, _71, _P30), (nq7d, _17, _P03)]),
        conv(pool(data, kind, _3, _1, _P1), proj, name=f"{name}_tower_2_conv")), axis=1)


def inception_d(data: RelayExpr, n3r: int, n3: int, nd7r: int, nd7a: int, nd7b: int,
                nd7c: int, name: str) -> RelayExpr:
    """Grid reduction: 1x1 -> 3x3/2 | 1x1 -> 1x7 -> 7x1 -> 3x3/2 | 3x3/2 max pool."""
    return relay.concatenate((
        _chain(data, f"{name}_tower", [(n3r, _1, _P0), (n3, _3, _P0)], (2, 2)),
        _chain(data, f"{name}_tower_1", [(nd7r, _1, _P0), (nd7a, _17, _P03),
                                         (nd7b, _71, _P30), (nd7c, _3, _P0)], (2, 2)),
        pool(data, "max", _3, (2, 2))), axis=1)


def inception_e(data: RelayExpr, n1: int, nd3r: int, nd3a: int, nd3b: int, n33r: int,
                n33: int, n33a: int, n33b: int, kind: str, proj: int, name: str) -> RelayExpr:
    """1x1 | 1x1 -> (1x3 | 3x1) | 1x1 -> 3x3 -> (1x3 | 3x1) | pool -> 1x1."""
    d3 = conv(data, nd3r, name=f"{name}_tower_conv")
    d33 = _chain(data, f"{name}_tower_1", [(n33r, _1, _P0), (n33, _3, _P1)])
    return relay.concatenate((
        conv(data, n1, name=f"{name}_conv"),
        conv(d3, nd3a, _13, pad=_P01, name=f"{name}_tower_mixed_conv"),
        conv(d3, nd3b, _31, pad=_P10, name=f"{name}_tower_mixed_conv_1"),
        conv(d33, n33a, _13, pad=_P01, name=f"{name}_tower_1_mixed_conv"),
        conv(d33, n33b, _31, pad=_P10, name=f"{name}_tower_1_mixed_conv_1"),
        conv(pool(data, kind, _3, _1, _P1), proj, name=f"{name}_tower_2_conv")), axis=1)


def get_net(batch_size: int, num_classes: int, image_shape: tuple[int, ...], dtype: str,
            global_pool: bool = False) -> Function:
    """The Inception v3 Function of ``data`` and its weights."""
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    net = conv(data, 32, _3, (2, 2), name="conv")
    net = conv(net, 32, _3, name="conv_1")
    net = pool(conv(net, 64, _3, pad=_P1, name="conv_2"), "max", _3, (2, 2))
    net = conv(net, 80, _1, name="conv_3")
    net = pool(conv(net, 192, _3, name="conv_4"), "max", _3, (2, 2))
    net = inception_a(net, 64, 64, 96, 96, 48, 64, "avg", 32, "mixed")
    net = inception_a(net, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_1")
    net = inception_a(net, 64, 64, 96, 96, 48, 64, "avg", 64, "mixed_2")
    net = inception_b(net, 384, 64, 96, 96, "mixed_3")
    for i, width in enumerate((128, 160, 160, 192), start=4):
        net = inception_c(net, 192, width, width, 192, width, width, width, width, 192, "avg",
                          192, f"mixed_{i}")
    net = inception_d(net, 192, 320, 192, 192, 192, 192, "mixed_8")
    net = inception_e(net, 320, 384, 384, 384, 448, 384, 384, 384, "avg", 192, "mixed_9")
    net = inception_e(net, 320, 384, 384, 384, 448, 384, 384, 384, "max", 192, "mixed_10")
    net = relay.nn.global_avg_pool2d(net) if global_pool else pool(net, "avg", (8, 8))
    net = relay.nn.dense(relay.nn.batch_flatten(net), relay.var("fc1_weight"), units=num_classes)
    # The Relay-era zoo named this bias fc2_bias; the name is kept so params carry over.
    net = relay.nn.softmax(relay.nn.bias_add(net, relay.var("fc2_bias"), axis=-1))
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, num_classes: int = 1000,
                 image_shape: tuple[int, ...] = (3, 299, 299), dtype: str = "float32", *,
                 global_pool: bool = False) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of Inception v3 with He-scaled Xavier weights (seed 0)."""
    net = get_net(batch_size, num_classes, tuple(image_shape), dtype, global_pool)
    return create_workload(net)
