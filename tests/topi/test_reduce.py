"""Reductions (axis / keepdims / exclude), arg reductions, softmax family against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import build_funcs, check, rand, run_kernel

import ember
from ember import te, topi

REDUCE = {"sum": (topi.sum, np.sum), "mean": (topi.mean, np.mean), "max": (topi.max, np.max),
          "min": (topi.min, np.min), "prod": (topi.prod, np.prod),
          "variance": (topi.variance, np.var), "std": (topi.std, np.std)}
AXES = [None, 0, 1, 2, (0, 2), -1]


def _key(name, axis, keepdims):
    a = "all" if axis is None else "_".join(str(x % 3) for x in np.atleast_1d(axis))
    return f"r_{name}_{a}_{int(keepdims)}"


@pytest.fixture(scope="module")
def reduce_mod():
    n, m, k = te.size_var("n"), te.size_var("m"), te.size_var("k")
    funcs = {}
    for name, (fn, _) in REDUCE.items():
        for axis in AXES:
            for keepdims in (False, True):
                x = te.placeholder((n, m, k), name="x")
                y = fn(x, axis=axis, keepdims=keepdims)
                funcs[_key(name, axis, keepdims)] = (topi.schedule_reduce(y), [x, y])
    return build_funcs(funcs)


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 6), m=st.integers(1, 21), k=st.integers(1, 9))
def test_reduce(reduce_mod, name, axis, keepdims, n, m, k):
    x = rand((n, m, k), lo=0.5 if name == "prod" else -2, hi=1.5 if name == "prod" else 2,
             seed=n + m + k)
    want = np.asarray(REDUCE[name][1](x.astype("float64"), axis=axis, keepdims=keepdims))
    out = ember.nd.empty(want.shape)
    reduce_mod[_key(name, axis, keepdims)](ember.nd.array(x), out)
    check(out.numpy(), want.astype("float32"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("exclude", [False, True])
def test_reduce_exclude(exclude):
    x = te.placeholder((3, 4, 5), name="x")
    y = topi.sum(x, axis=1, keepdims=True, exclude=exclude)
    xv = rand((3, 4, 5))
    (got,) = run_kernel(y, [x], [xv])
    axes = (0, 2) if exclude else (1,)
    check(got, xv.sum(axis=axes, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("fn,ref", [(topi.argmax, np.argmax), (topi.argmin, np.argmin)])
@pytest.mark.parametrize("axis", [0, 1, None])
@settings(max_examples=3, deadline=None)  # each example compiles a kernel
@given(n=st.integers(1, 9), m=st.integers(1, 17))
def test_arg_reduce(fn, ref, axis, n, m):
    x = te.placeholder((n, m), name="x")
    y = fn(x, axis=axis)
    xv = np.round(rand((n, m), seed=n * m), 1)  # ties: the first index wins, as numpy
    (got,) = run_kernel(y, [x], [xv])
    check(got, np.asarray(ref(xv, axis=axis)).astype("int32"))


def test_all_any_bool():
    x = te.placeholder((4, 6), "bool", name="x")
    ya, yb = topi.all(x, axis=1), topi.any(x, axis=0)
    xv = rand((4, 6), "bool", seed=5)
    got_a, got_b = run_kernel([ya, yb], [x], [xv])
    check(got_a, xv.all(axis=1))
    check(got_b, xv.any(axis=0))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 1])
@settings(max_examples=4, deadline=None)  # each example compiles a kernel
@given(n=st.integers(1, 5), m=st.integers(1, 33))
def test_softmax_and_log_softmax(axis, n, m):
    x = te.placeholder((n, m, 3), name="x")
    a, b = topi.nn.softmax(x, axis), topi.nn.log_softmax(x, axis)
    xv = rand((n, m, 3), lo=-30, hi=30, seed=m)
    got_a, got_b = run_kernel([a, b], [x], [xv])
    check(got_a, _softmax(xv.astype("float64"), axis), rtol=1e-5, atol=1e-6)
    check(got_b, np.log(_softmax(xv.astype("float64"), axis)), rtol=1e-5, atol=1e-5)
