"""concatenate, stack, split, take, strided_slice."""
from __future__ import annotations

import numpy as np
import pytest
from _op_helpers import check, infer, ref
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import shapes

from ember import relay
from ember.ir.types import Any, ShapeVar, TensorType, TupleType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError


def _arr(shape, dtype="float32"):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


@given(shapes(1, 4), st.lists(st.integers(1, 3), min_size=1, max_size=3), st.data())
def test_concatenate_matches_numpy(shape, sizes, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for s in sizes:
        part_shape = list(shape)
        part_shape[axis] = s
        parts.append(_arr(part_shape))
    np.testing.assert_array_equal(check("concatenate", parts, axis=axis),
                                  np.concatenate(parts, axis))


@given(shapes(0, 3), st.integers(1, 3), st.data())
def test_stack_matches_numpy(shape, count, data):
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    parts = [_arr(shape) + i for i in range(count)]
    np.testing.assert_array_equal(check("stack", parts, axis=axis), np.stack(parts, axis))


def test_concatenate_dynamic_and_errors():
    n = ShapeVar("n")
    tup = TupleType((TensorType((n, 2)), TensorType((Any(), 3))))
    out = infer("concatenate", tup, axis=1)
    assert out.shape[0] is n and out.shape[1] == 5
    with pytest.raises(TypeInferenceError, match="dimension 1 differs"):
        infer("concatenate", TupleType((TensorType((2, 2)), TensorType((2, 3)))), axis=0)
    with pytest.raises(TypeInferenceError, match="tensor 0 is float32 but tensor 1 is int32"):
        infer("concatenate", TupleType((TensorType((2,)), TensorType((2,), "int32"))), axis=0)
    with pytest.raises(TypeInferenceError, match="concatenate: axis 2 is out of range"):
        infer("concatenate", TupleType((TensorType((2, 2)),)), axis=2)
    with pytest.raises(TypeInferenceError, match="argument data must be a tuple of tensors"):
        infer("concatenate", TensorType((2, 2)), axis=0)


def test_concatenate_api_wraps_lists_in_a_tuple():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(3,))
    c = relay.concatenate([x, y], axis=0)
    assert isinstance(c.args[0], relay.Tuple) and c.args[0].fields == (x, y)
    assert relay.stack((x, x), axis=0).attrs.axis == 0


@given(shapes(1, 3), st.data())
def test_split_sections_and_indices(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    d = shape[axis]
    sections = data.draw(st.sampled_from([k for k in range(1, d + 1) if d % k == 0]))
    x = _arr(shape)
    for got, want in zip(check("split", x, indices_or_sections=sections, axis=axis),
                         np.split(x, sections, axis)):
        np.testing.assert_array_equal(got, want)
    idx = sorted(data.draw(st.lists(st.integers(0, d + 1), max_size=3)))
    for got, want in zip(check("split", x, indices_or_sections=idx, axis=axis),
                         np.split(x, idx, axis)):
        np.testing.assert_array_equal(got, want)


def test_split_api_errors_and_dynamic():
    parts = relay.split(relay.var("x", shape=(6, 4)), 3, axis=0)
    assert len(parts) == 3 and parts[2].index == 2
    assert len(relay.split(relay.var("x"), [1, 3])) == 3
    with pytest.raises(TypeInferenceError, match="cannot split a dimension of size 10 into 3"):
        infer("split", TensorType((10,)), indices_or_sections=3)
    with pytest.raises(OpAttributeInvalid, match="increasing split indices"):
        relay.split(relay.var("x"), [3, 1])
    out = infer("split", TensorType((Any(), 2)), indices_or_sections=[1])
    assert out == TupleType((TensorType((1, 2)), TensorType((Any(), 2))))


@settings(max_examples=60, deadline=None)
@given(shapes(1, 3), shapes(0, 2), st.sampled_from(["clip", "wrap"]), st.data())
def test_take_modes(shape, idx_shape, mode, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    x = _arr(shape)
    size = x.size if axis is None else shape[axis]
    idx = np.random.default_rng(1).integers(-2 * size, 2 * size, idx_shape).astype("int32")
    out = check("take", x, idx, axis=axis, mode=mode)
    fixed = np.clip(idx, 0, size - 1) if mode == "clip" else np.mod(idx, size)
    np.testing.assert_array_equal(out, np.take(x, fixed, axis=axis))


def test_take_batch_dims_and_fast_mode():
    x = _arr((2, 3, 4))
    idx = np.array([[0, 2], [1, 1]], "int64")
    out = check("take", x, idx, axis=1, batch_dims=1)
    np.testing.assert_array_equal(out[1, 0], x[1, 1])
    assert out.shape == (2, 2, 4)
    with pytest.raises(IndexError, match="index 5 out of range for an axis of size 3"):
        ref("take", x, np.array([5]), axis=1, mode="fast")
    with pytest.raises(TypeInferenceError, match="take: indices must be an integer tensor"):
        infer("take", TensorType((3,)), TensorType((2,), "float32"), axis=0)


slice_bounds = st.integers(-9, 9)


@settings(max_examples=100, deadline=None)
@given(shapes(1, 3), st.data())
def test_strided_slice_matches_python_slicing(shape, data):
    n = data.draw(st.integers(1, len(shape)))
    begin = data.draw(st.lists(slice_bounds, min_size=n, max_size=n))
    end = data.draw(st.lists(slice_bounds, min_size=n, max_size=n))
    strides = data.draw(st.lists(st.sampled_from([1, 2, -1, -2, 3]), min_size=n, max_size=n))
    x = _arr(shape)
    out = check("strided_slice", x, begin=begin, end=end, strides=strides)
    # Relay's clamping rules are exactly Python's slice rules
    index = tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))
    np.testing.assert_array_equal(out, x[index])


def test_strided_slice_size_mode_axes_and_dynamic():
    x = _arr((4, 5, 6))
    out = check("strided_slice", x, begin=[1, 2], end=[2, -1], axes=[0, 2], slice_mode="size")
    np.testing.assert_array_equal(out, x[1:3, :, 2:])
    assert infer("strided_slice", TensorType((Any(), 5)), begin=[0, 1], end=[1, 3]) == \
        TensorType((Any(), 2))
    with pytest.raises(TypeInferenceError, match="begin has 3 entries but data has rank 2"):
        infer("strided_slice", TensorType((2, 2)), begin=[0, 0, 0], end=[1, 1, 1])
    with pytest.raises(OpAttributeInvalid, match="strides must be non-zero"):
        relay.strided_slice(relay.var("x"), [0], [1], [0])
    c = relay.strided_slice(relay.var("x"), relay.const([0, 1]), [2, 2])
    assert c.attrs.begin == (0, 1) and c.attrs.strides == (1,)
