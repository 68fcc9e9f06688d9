"""Elementwise and broadcasting ops: relation vs reference, C-like semantics, dynamic dims,
error messages."""
from __future__ import annotations

import math

import numpy as np
import pytest
from _op_helpers import check, infer, ref
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import ALL_DTYPES, arrays_for, broadcastable_pair, dtypes, shapes

from ember import relay
from ember.ir.types import Any, ShapeVar, TensorType, TupleType
from ember.relay.op import tensor as tensor_ops
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError

UNARY = list(tensor_ops._UNARY)
BINARY = list(tensor_ops._BINARY)
FLOAT_ONLY = [n for n, (_, kind, _) in tensor_ops._UNARY.items() if kind is tensor_ops.FLOAT]
NUMERIC_ONLY = {"negative", "sign", "round", "subtract"}
INT_ONLY = {"bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"}


def _dtype_for(name: str) -> st.SearchStrategy[str]:
    if name in FLOAT_ONLY:
        return dtypes("float")
    if name in NUMERIC_ONLY:
        return st.sampled_from([d for d in ALL_DTYPES if d != "bool"])
    return dtypes("int") if name in INT_ONLY else dtypes("all")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(UNARY), shapes(), st.data())
def test_unary_relation_matches_reference(name, shape, data):
    dtype = data.draw(_dtype_for(name))
    x = data.draw(arrays_for(dtype, shape, 0.5 if name in FLOAT_ONLY else -10, 10))
    check(name, x)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(BINARY), broadcastable_pair(), st.data())
def test_binary_relation_matches_reference(name, pair, data):
    dtype = data.draw(_dtype_for(name))
    a = data.draw(arrays_for(dtype, pair[0]))
    b = data.draw(arrays_for(dtype, pair[1], 1, 5))  # positive: no division by zero
    out = check(name, a, b)
    assert out.shape == np.broadcast_shapes(pair[0], pair[1])


def test_integer_divide_truncates_toward_zero():
    a, b = np.array([-7, 7, -7, 7, 6], "int32"), np.array([2, 2, -2, -2, 3], "int32")
    np.testing.assert_array_equal(ref("divide", a, b), [-3, 3, 3, -3, 2])
    np.testing.assert_array_equal(ref("floor_divide", a, b), [-4, 3, 3, -4, 2])


def test_mod_is_c_fmod_and_floor_mod_follows_the_divisor():
    a, b = np.array([-7, 7, -7, 7], "int32"), np.array([2, 2, -2, -2], "int32")
    np.testing.assert_array_equal(ref("mod", a, b), [-1, 1, -1, 1])
    np.testing.assert_array_equal(ref("floor_mod", a, b), [1, 1, -1, -1])
    fa, fb = a.astype("float32"), b.astype("float32")
    np.testing.assert_array_equal(ref("floor_mod", fa, fb), [1, 1, -1, -1])
    np.testing.assert_array_equal(ref("floor_divide", fa, fb), [-4, 3, 3, -4])


def test_round_is_half_away_from_zero_like_c():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -1.2], "float32")
    np.testing.assert_array_equal(ref("round", x), [1, 2, 3, -1, -3, 0, -1])
    assert ref("round", np.array([3, -4], "int8")).dtype == np.int8


def test_integer_power_with_negative_exponent_truncates():
    a, b = np.array([2, 1, -1, 3], "int32"), np.array([-1, -2, -3, 2], "int32")
    np.testing.assert_array_equal(ref("power", a, b), [0, 1, -1, 9])


def test_float_math_stays_in_float32():
    x = np.linspace(0.1, 3, 7, dtype="float32")
    for name in ("exp", "sqrt", "rsqrt", "sigmoid", "erf", "tanh", "log"):
        assert ref(name, x).dtype == np.float32, name
    np.testing.assert_allclose(ref("erf", x), [math.erf(v) for v in x], rtol=1e-6)
    np.testing.assert_allclose(ref("sigmoid", x), 1 / (1 + np.exp(-x.astype("float64"))),
                               rtol=1e-6)


def test_comparisons_return_bool():
    a, b = np.array([1, 2, 3], "int8"), np.array([2], "int8")
    for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
        assert check(name, a, b).dtype == np.bool_
    np.testing.assert_array_equal(ref("less", a, b), [True, False, False])


@given(st.sampled_from(ALL_DTYPES), st.sampled_from(ALL_DTYPES), shapes(0, 3))
def test_cast_between_any_dtypes(src, dst, shape):
    x = np.ones(shape, src)
    out = check("cast", x, dtype=dst)
    assert out.dtype == np.dtype(dst)
    assert check("cast_like", x, np.zeros((), dst)).dtype == np.dtype(dst)


def test_clip_applies_bounds_in_the_tensor_dtype():
    x = np.array([-300, -3, 0, 3, 300], "int16")
    np.testing.assert_array_equal(check("clip", x, a_min=-2.5, a_max=1e9), [-2, -2, 0, 3, 300])
    f = np.array([-1.0, 0.25, 7.0], "float32")
    np.testing.assert_array_equal(check("clip", f, a_min=0, a_max=1), [0, 0.25, 1])


def test_where_broadcasts_all_three():
    c = np.array([[True], [False]])
    x, y = np.arange(3, dtype="float32"), np.float32(-1) * np.ones((2, 1, 1), "float32")
    out = check("where", c, x, y)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out[0, 0], [0, 1, 2])
    np.testing.assert_array_equal(out[0, 1], [-1, -1, -1])


def test_predicates_give_bool():
    x = np.array([np.nan, np.inf, 1.0], "float32")
    np.testing.assert_array_equal(check("isnan", x), [True, False, False])
    np.testing.assert_array_equal(check("isfinite", x), [False, False, True])


# ---------------------------------------------------------------- dynamic dimensions
N, M = ShapeVar("n"), ShapeVar("m")


@pytest.mark.parametrize("lhs, rhs, expected", [
    ((Any(), 3), (3,), (Any(), 3)),
    ((Any(),), (3,), (3,)),
    ((Any(),), (1,), (Any(),)),
    ((1,), (Any(),), (Any(),)),
    ((N, 4), (N, 1), (N, 4)),
    ((N,), (M,), (Any(),)),
    ((N,), (1,), (N,)),
    ((N,), (5,), (5,)),
    ((N,), (Any(),), (Any(),)),
])
def test_broadcast_with_dynamic_dims(lhs, rhs, expected):
    out = infer("add", TensorType(lhs), TensorType(rhs))
    assert out == TensorType(expected)
    if N in expected:
        assert out.shape[expected.index(N)] is N


# ---------------------------------------------------------------- errors
def test_broadcast_error_names_shapes_and_dimension():
    with pytest.raises(TypeInferenceError) as err:
        infer("add", TensorType((2, 3)), TensorType((4,)))
    assert str(err.value) == "add: cannot broadcast (2, 3) with (4,): dimension -1 is 3 vs 4"


def test_dtype_mismatch_is_reported():
    with pytest.raises(TypeInferenceError, match="multiply: lhs is float32 but rhs is int32"):
        infer("multiply", TensorType((2,), "float32"), TensorType((2,), "int32"))


def test_float_only_op_rejects_integers():
    with pytest.raises(TypeInferenceError, match="exp: requires a floating-point tensor, got int"):
        infer("exp", TensorType((2,), "int32"))
    with pytest.raises(TypeInferenceError, match="bitwise_and: requires an integer"):
        infer("bitwise_and", TensorType((2,)), TensorType((2,)))


def test_wrong_argument_count_and_kind():
    with pytest.raises(TypeInferenceError, match=r"add: expected 2 argument\(s\) \(lhs, rhs\)"):
        infer("add", TensorType((2,)))
    with pytest.raises(TypeInferenceError, match="argument rhs must be a tensor"):
        infer("add", TensorType((2,)), TupleType((TensorType((2,)),)))


def test_bad_attributes_raise_op_attribute_invalid():
    with pytest.raises(OpAttributeInvalid, match="cast: attribute dtype must be a dtype"):
        relay.cast(relay.var("x", shape=(2,)), "floaty")
    with pytest.raises(OpAttributeInvalid, match="clip: attribute a_min"):
        relay.clip(relay.var("x", shape=(2,)), 3, 1)


# ---------------------------------------------------------------- API
def test_api_builds_calls_with_typed_attrs():
    x, y = relay.var("x", shape=(2, 3)), relay.var("y", shape=(3,))
    c = relay.add(x, y)
    assert c.op.name == "add" and c.args == (x, y) and c.attrs is None
    assert relay.cast(x, "int8").attrs.dtype == "int8"
    assert relay.clip(x, 0, 6).attrs.a_max == 6.0
    assert relay.op.add is relay.add and relay.op.tensor.exp is relay.exp
    assert relay.subtract(x, 1.0).args[1].data.numpy().dtype == np.float32
    with pytest.raises(TypeError, match="takes 2 argument"):
        relay.add(x)
