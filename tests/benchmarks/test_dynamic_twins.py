"""benchmarks/_dynamic_twins.py: a workload built at two shapes becomes one with ``?`` in its
input, whose reshapes, slices and broadcasts follow the input; what cannot follow it is
named. Type inference only (no C build)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from ember import relay
from ember.ir.module import IRModule
from ember.ir.types import Any as AnyDim
from ember.relay.transform import InferType

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
twins = importlib.import_module("_dynamic_twins")


def _typed(body_of, shape):
    x = relay.var("data", shape=shape, dtype="float32")
    return InferType()(IRModule.from_expr(relay.Function([x], body_of(x, shape))))


def _out_shape(twin, shape):
    ty = InferType()(twins.with_input_shape(twin, shape))["main"].checked_type.ret_type
    return tuple(int(d) for d in ty.shape)


def _twin(body_of, base, probe, axes):
    return twins.dynamic_twin(_typed(body_of, base), _typed(body_of, probe), axes)


@pytest.mark.parametrize("src, dst, src2, dst2, want", [
    # one output dimension moves: -1 finds it
    ((1, 16, 8), (1, 16, 2, 4), (2, 16, 8), (2, 16, 2, 4), [-1, 16, 2, 4]),
    # batch and sequence move: copies, merges, splits
    ((1, 16, 32), (1, 16, 2, 16), (2, 24, 32), (2, 24, 2, 16), [0, 0, -4, 2, 16]),
    ((1, 2, 16, 16), (2, 16, 16), (2, 2, 24, 16), (4, 24, 16), [-3, 0, 16]),
    ((2, 16, 16), (1, 2, 16, 16), (4, 24, 16), (2, 2, 24, 16), [-4, -1, 2, 0, 16]),
    # a fixed axis split between two moving ones (a detector's head: batch, anchors)
    ((1, 64, 84), (1, 4, 16, 84), (2, 64, 252), (2, 4, 16, 252), [0, -4, 4, 16, 0]),
    ((1, 72, 8, 8), (1, 72, 64), (2, 72, 12, 16), (2, 72, 192), [0, 72, -3]),
])
def test_reshape_values(src, dst, src2, dst2, want):
    assert twins.reshape_values(src, dst, src2, dst2) == want


def test_a_reshape_that_splits_two_moving_dimensions_has_no_values():
    # H*W -> (H, W): the input does not say how to split it
    assert twins.reshape_values((1, 16, 256), (1, 16, 16, 16), (2, 16, 768),
                                (2, 16, 24, 32)) is None


def test_axes_of_size_one_become_squeeze_and_expand_dims():
    def body(x, shape):
        return relay.reshape(x, (shape[0], 1, 1, shape[1]))
    twin = _twin(body, (1, 1600), (2, 2000), axes=(0, 1))
    text = str(twin["main"].body)
    assert "expand_dims" in text and "reshape" not in text
    assert _out_shape(twin, (3, 77)) == (3, 1, 1, 77)


def test_the_twin_follows_the_input_at_shapes_never_built():
    def body(x, shape):
        b, s, d = shape
        y = relay.reshape(x, (b, s, 2, d // 2))
        y = relay.reshape(relay.transpose(y, (0, 2, 1, 3)), (b * 2, s, d // 2))
        return relay.strided_slice(y, [0], [s - 1], axes=[1])  # drop the last position
    twin = _twin(body, (1, 16, 32), (2, 24, 32), axes=(0, 1))
    dims = twin["main"].params[0].type_annotation.shape
    assert isinstance(dims[0], AnyDim) and isinstance(dims[1], AnyDim) and dims[2] == 32
    for shape in [(1, 1 + 1, 32), (3, 37, 32), (5, 2, 32)]:
        assert _out_shape(twin, shape) == (shape[0] * 2, shape[1] - 1, 16)


def test_a_broadcast_to_a_moving_shape_follows_a_tensor_of_that_shape():
    def body(x, shape):  # a class token per image, before the patches
        cls = relay.broadcast_to(relay.const(1.0, "float32"), (shape[0], 1, shape[2]))
        return relay.concatenate([cls, x], axis=1)
    twin = _twin(body, (2, 16, 8), (3, 16, 8), axes=(0,))
    assert "broadcast_to_like" in str(twin["main"].body)
    assert _out_shape(twin, (5, 16, 8)) == (5, 17, 8)


def _relu(x, shape):
    return relay.nn.relu(x)


@pytest.mark.parametrize("body, base, probe, message", [
    (lambda x, s: relay.add(x, relay.const(np.ones(s, "float32"))),
     (1, 4), (2, 4), r"a constant of shape \(1, 4\) is \(2, 4\)"),
    (lambda x, s: relay.reshape(x, (s[0], 1, 4, 4)) if s[1] == 16 else relay.reshape(
        relay.nn.relu(x), (s[0], 1, 6, 6)),
     (1, 16), (1, 36), "structure depends on the shape"),
    (lambda x, s: relay.image.resize2d(x, size=(s[2] * 2, s[3] * 2)),
     (1, 3, 8, 8), (1, 3, 16, 8), r"image.resize2d's attributes depend on the input shape"),
    (lambda x, s: relay.reshape(x, (s[0], 4, *{256: (16, 16), 768: (24, 32)}[s[2]])),
     (1, 4, 256), (1, 4, 768), r"no symbolic form for reshape \(1, 4, 256\)"),
])
def test_what_cannot_follow_the_input_is_named(body, base, probe, message):
    axes = tuple(i for i, (a, b) in enumerate(zip(base, probe)) if a != b)
    with pytest.raises(ValueError, match=message):
        _twin(body, base, probe, axes)


def test_a_probe_that_moves_other_axes_is_refused():
    with pytest.raises(ValueError, match=r"differs from \(1, 4\) at axes \[0\], not at the "
                                         r"symbolic axes \[1\]"):
        _twin(_relu, (1, 4), (2, 4), axes=(1,))


def test_a_weight_that_moves_is_named():
    def module(k):
        x, w = relay.var("data", shape=(1, k)), relay.var("w", shape=(k, 3))
        return InferType()(IRModule.from_expr(relay.Function([x, w], relay.nn.matmul(x, w))))
    with pytest.raises(ValueError, match=r"parameter 'w' has shape \(4, 3\) at the base shape "
                                         r"but \(6, 3\) at the probe"):
        twins.dynamic_twin(module(4), module(6), (1,))
