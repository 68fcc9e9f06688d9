"""nn.contrib_channel_shuffle_nchwc: the type relation (a run-time batch, another output
blocking) and what it refuses, with messages naming the op and the argument."""
from __future__ import annotations

import pytest

import ember
from ember import relay
from ember.ir.types import Any as AnyDim
from ember.relay.transform import InferType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError


def _typed(a_shape, b_shape, dtype="float32", **attrs):
    a, b = relay.var("a", shape=a_shape, dtype=dtype), relay.var("b", shape=b_shape, dtype=dtype)
    attrs = {"channels": (58, 58), "groups": 2, "begin": 0, "end": 116, **attrs}
    y = relay.nn.contrib_channel_shuffle_nchwc(a, b, **attrs)
    return InferType()(ember.IRModule.from_expr(relay.Function([a, b], y)))["main"].body.checked_type


def test_output_blocks_the_range_in_the_inputs_or_its_own_lanes():
    assert tuple(_typed((2, 4, 3, 5, 16), (2, 4, 3, 5, 16)).shape) == (2, 8, 3, 5, 16)
    assert tuple(_typed((2, 4, 3, 5, 16), (2, 4, 3, 5, 16), begin=58, end=116, lanes=8).shape
                 ) == (2, 8, 3, 5, 8)
    out = _typed((AnyDim(), 4, 3, 5, 16), (AnyDim(), 4, 3, 5, 16), end=58)
    assert isinstance(out.shape[0], AnyDim) and tuple(out.shape[1:]) == (4, 3, 5, 16)


@pytest.mark.parametrize("attrs, match", [
    ({"groups": 3}, "groups must be a divisor of the 116 channels"),
    ({"begin": 5, "end": 5}, "end must be in"),
    ({"end": 117}, "end must be in"),
    ({"channels": (58, 0)}, "channels"),
    ({"lanes": 32}, "lanes must be in"),
])
def test_bad_attributes_are_refused(attrs, match):
    with pytest.raises(OpAttributeInvalid, match=match):
        _typed((2, 4, 3, 5, 16), (2, 4, 3, 5, 16), **attrs)


@pytest.mark.parametrize("a, b, dtype, match", [
    ((2, 5, 3, 5, 16), (2, 4, 3, 5, 16), "float32", "a .* does not hold 58 channels"),
    ((2, 4, 3, 5, 16), (2, 4, 3, 6, 16), "float32", "a .* and b .* differ in batch, height, width or block"),
    ((2, 4, 3, 5, 16), (2, 8, 3, 5, 8), "float32", "a .* and b .* differ in batch, height, width or block"),
    ((2, 4, 3, 5, 16), (2, 4, 3, 5, 16), "float16", "a must be a float32 NCHW.L.c map"),
    ((2, 64, 3, 5), (2, 4, 3, 5, 16), "float32", "a must be a float32 NCHW.L.c map"),
])
def test_bad_inputs_are_refused(a, b, dtype, match):
    with pytest.raises(TypeInferenceError, match=rf"nn.contrib_channel_shuffle_nchwc: {match}"):
        _typed(a, b, dtype)
