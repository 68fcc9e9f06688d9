"""zeros/ones/full (+ _like), arange and one_hot."""
from __future__ import annotations

import numpy as np
import pytest
from _op_helpers import check, infer, ref
from hypothesis import given
from hypothesis import strategies as st
from strategies import dtypes, shapes

from ember import relay
from ember.ir.types import Any, TensorType
from ember.runtime.errors import TypeInferenceError


@given(shapes(), dtypes())
def test_init_ops_match_their_relation(shape, dtype):
    for name, fill in (("zeros", 0), ("ones", 1)):
        out = check(name, shape=shape, dtype=dtype)
        assert out.shape == shape and out.dtype == np.dtype(dtype) and (out == fill).all()
    x = np.full(shape, 3, dtype)
    assert (check("zeros_like", x) == 0).all() and (check("ones_like", x) == 1).all()
    fill = np.array(1, dtype)
    np.testing.assert_array_equal(check("full_like", x, fill), np.full(shape, fill))


def test_full_takes_the_fill_dtype_unless_given():
    fill = np.array(2.5, "float64")
    assert check("full", fill, shape=(2, 3)).dtype == np.float64
    out = check("full", fill, shape=(2,), dtype="int32")
    np.testing.assert_array_equal(out, [2, 2])
    with pytest.raises(TypeInferenceError, match="full: fill_value must be a scalar"):
        infer("full", TensorType((2,)), shape=(3,))


def test_api_accepts_int_shape_and_dispatches_a_dynamic_shape():
    assert relay.zeros(3, "int8").attrs.shape == (3,)
    assert relay.ones((2, 1)).attrs.dtype == "float32"
    assert relay.zeros(relay.var("s", shape=(2,), dtype="int64")).op.name == "dyn.zeros"


@given(st.integers(-5, 5), st.integers(-5, 12), st.sampled_from([1, 2, 3, -1, -2]))
def test_arange_matches_numpy(start, stop, step):
    attrs = {"start": start, "stop": stop, "step": step, "dtype": "int32"}
    scalars = [np.array(v, "int32") for v in (start, stop, step)]
    out = check("arange", *scalars, **attrs)
    np.testing.assert_array_equal(out, np.arange(start, stop, step, dtype="int32"))


def test_arange_float_and_unknown_length():
    out = ref("arange", np.float32(0), np.float32(1), np.float32(0.25), start=0, stop=1, step=0.25)
    np.testing.assert_allclose(out, [0, 0.25, 0.5, 0.75])
    scalar = TensorType((), "float32")
    assert infer("arange", scalar, scalar, scalar) == TensorType((Any(),))
    call = relay.arange(relay.const(5.0))
    assert (call.attrs.start, call.attrs.stop, call.attrs.step) == (0.0, 5.0, 1.0)
    assert relay.arange(relay.var("n", "float32")).attrs.stop is None


@given(shapes(0, 3, max_side=4), st.integers(1, 5), st.data())
def test_one_hot_matches_manual_encoding(shape, depth, data):
    idx = np.random.default_rng(0).integers(-1, depth + 1, shape).astype("int32")
    axis = data.draw(st.integers(-1, len(shape)))
    out = check("one_hot", idx, np.float32(1), np.float32(0), depth=depth, axis=axis)
    manual = (idx[..., None] == np.arange(depth)).astype("float32")
    np.testing.assert_array_equal(np.moveaxis(manual, -1, axis if axis >= 0 else -1), out)
