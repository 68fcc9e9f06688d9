"""reshape (special values), transpose, squeeze, expand_dims, broadcast_to, tile, repeat,
reverse, layout_transform, shape_of."""
from __future__ import annotations

import numpy as np
import pytest
from _op_helpers import check, infer, ref
from hypothesis import given
from hypothesis import strategies as st
from strategies import broadcastable_pair, shapes

from ember import relay
from ember.ir.types import Any, ShapeVar, TensorType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError


def _arr(shape, dtype="float32"):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


@pytest.mark.parametrize("shape, newshape, expected", [
    ((2, 3, 4), (6, 4), (6, 4)),
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (0, -1), (2, 12)),
    ((2, 3, 4), (-1, 0), (8, 3)),  # -1 consumes an input dim, so 0 copies dim 1 (TVM rule)
    ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (2, -2), (2, 3, 4)),
    ((2, 3, 4), (-3, 4), (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),
    ((2, 3, 4), (-4, -1, 1, -2), (2, 1, 3, 4)),
    ((2, 3, 4), (0, 0, 2, 2), (2, 3, 2, 2)),
    ((), (1, 1), (1, 1)),
])
def test_reshape_special_values(shape, newshape, expected):
    out = check("reshape", _arr(shape), newshape=newshape)
    assert out.shape == expected
    np.testing.assert_array_equal(out.reshape(-1), _arr(shape).reshape(-1))


@given(shapes(1, 4), st.data())
def test_reshape_to_any_factorisation(shape, data):
    size = int(np.prod(shape))
    first = data.draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
    assert check("reshape", _arr(shape), newshape=(first, -1)).shape == (first, size // first)


def test_reverse_reshape_matches_from_the_right():
    assert check("contrib_reverse_reshape", _arr((10, 5, 4)), newshape=(-1, 0)).shape == (50, 4)
    assert relay.reverse_reshape(relay.var("x"), (-1, 0)).op.name == "contrib_reverse_reshape"


def test_reshape_with_dynamic_dims():
    n = ShapeVar("n")
    assert infer("reshape", TensorType((n, 3, 4)), newshape=(0, -1)).shape[0] is n
    assert infer("reshape", TensorType((n, 3, 4)), newshape=(0, -1)).shape[1] == 12
    assert infer("reshape", TensorType((Any(), 6)), newshape=(-1, 2)) == TensorType((Any(), 2))
    assert infer("reshape", TensorType((Any(), 6)), newshape=(3, 2, -1)) == TensorType(
        (3, 2, Any()))


@pytest.mark.parametrize("shape, newshape, message", [
    ((2, 3), (4, 2), r"reshape: cannot reshape \(2, 3\) into \(4, 2\): 6 elements vs 8"),
    ((2, 3), (-1, -1), "more than one -1"),
    ((2, 3), (4, -1), "6 elements do not divide by 4"),
    ((2, 3), (0, 0, 0), "0 \\(copy a dimension\\) has no input dimension left"),
    ((2, 3), (-4, 4, -1, 3), "-4 splits a dimension of 2 into 4 x"),
])
def test_reshape_errors(shape, newshape, message):
    with pytest.raises(TypeInferenceError, match=message):
        infer("reshape", TensorType(shape), newshape=newshape)


def test_reshape_like_with_ranges():
    x = _arr((2, 3, 4))
    assert check("reshape_like", x, np.zeros((4, 6), "int8")).shape == (4, 6)
    out = check("reshape_like", x, np.zeros((7, 12)), lhs_begin=1, rhs_begin=1)
    assert out.shape == (2, 12)  # data[:1] + like[1:]
    assert check("reshape_like", x, np.zeros((6, 5)), lhs_end=2, rhs_end=1).shape == (6, 4)
    with pytest.raises(TypeInferenceError, match="cannot reshape .* like"):
        infer("reshape_like", TensorType((2, 3)), TensorType((5,)))


@given(shapes(0, 4), st.data())
def test_transpose_is_numpy_transpose(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    x = _arr(shape)
    np.testing.assert_array_equal(check("transpose", x, axes=perm), x.transpose(perm))
    np.testing.assert_array_equal(check("transpose", x), x.T)


def test_transpose_rejects_non_permutation():
    with pytest.raises(TypeInferenceError, match=r"axes \(0, 0\) is not a permutation"):
        infer("transpose", TensorType((2, 3)), axes=(0, 0))


def test_squeeze_and_expand_dims():
    x = _arr((1, 3, 1, 2))
    assert check("squeeze", x).shape == (3, 2)
    assert check("squeeze", x, axis=(-2,)).shape == (1, 3, 2)
    assert check("expand_dims", x, axis=-1, num_newaxis=2).shape == (1, 3, 1, 2, 1, 1)
    assert check("expand_dims", x, axis=0).shape == (1, 1, 3, 1, 2)
    with pytest.raises(OpAttributeInvalid, match="num_newaxis must be an int >= 0 and <= 64"):
        relay.expand_dims(relay.var("x", shape=(2,)), 0, num_newaxis=10**9)
    assert infer("squeeze", TensorType((Any(), 1))) == TensorType((Any(),))
    with pytest.raises(TypeInferenceError, match="dimension 1 of .* has size 3"):
        infer("squeeze", TensorType((1, 3)), axis=(1,))
    with pytest.raises(TypeInferenceError, match="expand_dims: axis 3 is out of range"):
        infer("expand_dims", TensorType((1,)), axis=3)


@given(broadcastable_pair())
def test_broadcast_to_matches_numpy(pair):
    target = np.broadcast_shapes(*pair)
    out = check("broadcast_to", _arr(pair[0]), shape=target)
    np.testing.assert_array_equal(out, np.broadcast_to(_arr(pair[0]), target))
    assert check("broadcast_to_like", _arr(pair[1]), np.zeros(target)).shape == target


def test_broadcast_to_errors():
    with pytest.raises(TypeInferenceError, match=r"cannot broadcast \(3,\) to \(4,\): dimension"):
        infer("broadcast_to", TensorType((3,)), shape=(4,))
    with pytest.raises(TypeInferenceError, match="the target has fewer dimensions"):
        infer("broadcast_to", TensorType((1, 3)), shape=(3,))


@given(shapes(0, 3, max_side=3), st.lists(st.integers(1, 3), min_size=1, max_size=4))
def test_tile_matches_numpy(shape, reps):
    np.testing.assert_array_equal(check("tile", _arr(shape), reps=reps), np.tile(_arr(shape), reps))


@given(shapes(1, 3), st.integers(1, 3), st.data())
def test_repeat_and_reverse_match_numpy(shape, repeats, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _arr(shape)
    np.testing.assert_array_equal(check("repeat", x, repeats=repeats, axis=axis),
                                  np.repeat(x, repeats, axis))
    np.testing.assert_array_equal(check("reverse", x, axis=axis), np.flip(x, axis))


@pytest.mark.parametrize("src, dst, shape, expected", [
    ("NCHW", "NHWC", (2, 3, 4, 5), (2, 4, 5, 3)),
    ("NHWC", "NCHW", (2, 4, 5, 3), (2, 3, 4, 5)),
    ("NCHW", "NCHW4c", (1, 8, 2, 3), (1, 2, 2, 3, 4)),
    ("NCHW4c", "NCHW", (1, 2, 2, 3, 4), (1, 8, 2, 3)),
    ("NCHW2c", "NCHW4c", (1, 4, 2, 3, 2), (1, 2, 2, 3, 4)),
    ("NHWC", "NCHW8c", (1, 2, 3, 16), (1, 2, 2, 3, 8)),
])
def test_layout_transform_shapes_and_round_trip(src, dst, shape, expected):
    x = _arr(shape)
    out = check("layout_transform", x, src_layout=src, dst_layout=dst)
    assert out.shape == expected
    np.testing.assert_array_equal(ref("layout_transform", out, src_layout=dst, dst_layout=src), x)


def test_layout_transform_blocked_element_mapping():
    x = _arr((1, 8, 2, 2))
    out = ref("layout_transform", x, src_layout="NCHW", dst_layout="NCHW4c")
    # channel c lands in block c // 4, lane c % 4
    assert out[0, 1, 1, 0, 3] == x[0, 7, 1, 0]


def test_layout_transform_errors():
    with pytest.raises(TypeInferenceError, match="does not split into blocks of 4"):
        infer("layout_transform", TensorType((1, 6, 2, 2)), src_layout="NCHW",
              dst_layout="NCHW4c")
    with pytest.raises(TypeInferenceError, match="do not have the same primal axes"):
        infer("layout_transform", TensorType((1, 6, 2, 2)), src_layout="NCHW", dst_layout="NCDW")
    with pytest.raises(OpAttributeInvalid, match="layout_transform: attribute src_layout"):
        relay.layout_transform(relay.var("x"), "NC4", "NCHW")
    assert infer("layout_transform", TensorType((Any(), 8, 2, 2)), src_layout="NCHW",
                 dst_layout="NHWC4c") == TensorType((Any(), 2, 2, 2, 4))


def test_shape_of():
    out = check("shape_of", _arr((2, 3, 1)))
    np.testing.assert_array_equal(out, [2, 3, 1])
    assert out.dtype == np.int32
    assert infer("shape_of", TensorType((Any(), 2)), dtype="int64") == TensorType((2,), "int64")
