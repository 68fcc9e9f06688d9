"""Reductions: axis/keepdims/exclude, arg-reductions, variance/std, dynamic dims, errors."""
from __future__ import annotations

import numpy as np
import pytest
from _op_helpers import check, infer, ref
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import arrays_for, axes_for, dtypes, shapes

from ember import relay
from ember.ir.types import Any, ShapeVar, TensorType
from ember.runtime.errors import TypeInferenceError

REDUCERS = ["sum", "mean", "max", "min", "prod", "all", "any"]


def _numpy_axes(ndim, axis, exclude):
    if axis is None:
        return tuple(range(ndim))
    axes = {a % ndim for a in axis}
    return tuple(i for i in range(ndim) if (i in axes) != exclude)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(REDUCERS), shapes(1, 4), st.booleans(), st.booleans(), st.data())
def test_reduce_relation_matches_numpy(name, shape, keepdims, exclude, data):
    dtype = data.draw(dtypes("float" if name == "mean" else "all"))
    x = data.draw(arrays_for(dtype, shape, -3, 3))
    axis = data.draw(axes_for(len(shape)))
    out = check(name, x, axis=axis, keepdims=keepdims, exclude=exclude)
    axes = _numpy_axes(len(shape), axis, exclude)
    fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
          "all": np.all, "any": np.any}[name]
    want = fn(x, axis=axes, keepdims=keepdims)
    np.testing.assert_allclose(out, np.asarray(want).astype(x.dtype), rtol=1e-5, atol=1e-5)


def test_integer_mean_truncates():
    x = np.array([[1, 2], [-3, -4]], "int32")
    np.testing.assert_array_equal(check("mean", x, axis=(1,)), [1, -3])


@settings(max_examples=60, deadline=None)
@given(shapes(1, 4), st.booleans(), st.booleans(), st.data())
def test_argmax_argmin_flatten_reduced_axes_row_major(shape, keepdims, last, data):
    x = data.draw(arrays_for("int8", shape, -2, 2))  # small range: many ties
    axis = data.draw(axes_for(len(shape)))
    axes = _numpy_axes(len(shape), axis, False)
    kept = [i for i in range(len(shape)) if i not in axes]
    flat = x.transpose(kept + list(axes)).reshape([shape[i] for i in kept] + [-1])
    for name, pick in (("argmax", np.argmax), ("argmin", np.argmin)):
        out = check(name, x, axis=axis, keepdims=keepdims, select_last_index=last)
        want = flat.shape[-1] - 1 - pick(flat[..., ::-1], -1) if last else pick(flat, -1)
        np.testing.assert_array_equal(out.reshape(-1), want.reshape(-1))
        assert out.dtype == np.int32


@given(shapes(1, 3, min_side=2), st.booleans(), st.booleans(), st.data())
def test_variance_and_std_match_numpy(shape, keepdims, unbiased, data):
    x = data.draw(arrays_for("float64", shape, -3, 3))
    axis = data.draw(axes_for(len(shape)).filter(lambda a: a is None or len(a) > 0))
    axes = _numpy_axes(len(shape), axis, False)
    mean = x.mean(axis=axes, keepdims=True)
    out = check("variance", x, mean, axis=axis, keepdims=keepdims, unbiased=unbiased)
    np.testing.assert_allclose(out, np.var(x, axis=axes, keepdims=keepdims, ddof=int(unbiased)))


def test_std_is_sqrt_of_variance_call():
    x = relay.var("x", shape=(3, 4))
    s = relay.std(x, axis=1, unbiased=True)
    assert s.op.name == "sqrt" and s.args[0].op.name == "variance"
    assert s.args[0].args[1].op.name == "mean" and s.args[0].args[1].attrs.keepdims
    mv = relay.mean_variance(x, axis=1)
    assert len(mv) == 2 and mv[1].tuple_value.fields[1].op.name == "variance"


def test_reduce_keeps_dynamic_dims():
    n = ShapeVar("n")
    out = infer("sum", TensorType((n, Any(), 4)), axis=(2,))
    assert out.shape[0] is n and out.shape[1] == Any()
    assert infer("max", TensorType((n, 3)), axis=(0,), keepdims=True) == TensorType((1, 3))
    assert infer("sum", TensorType((2, 3, 4)), axis=(1,), exclude=True) == TensorType((3,))


def test_reduce_errors():
    with pytest.raises(TypeInferenceError, match=r"sum: axis 2 is out of range for rank 2 "
                                                  r"\(valid -2..1\)"):
        infer("sum", TensorType((2, 3)), axis=(2,))
    with pytest.raises(TypeInferenceError, match="names an axis twice"):
        infer("mean", TensorType((2, 3)), axis=(1, -1))
    with pytest.raises(TypeInferenceError, match="argmax: cannot reduce an axis of size 0"):
        infer("argmax", TensorType((0, 3)), axis=(0,))


def test_api_defaults_and_int_axis():
    x = relay.var("x", shape=(2, 3))
    assert relay.sum(x).attrs.axis is None
    assert relay.sum(x, axis=1, keepdims=True).attrs.axis == (1,)
    assert relay.argmax(x, axis=[0]).attrs.axis == (0,)
    assert ref("sum", np.ones((2, 3), "float32")).dtype == np.float32
