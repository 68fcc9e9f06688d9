"""Elementwise and broadcast ops: one module per family, symbolic shapes, hypothesis sizes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import build_funcs, check, rand, run_kernel

import ember
from ember import te, topi

SIDE = st.integers(1, 37)
SETTINGS = settings(max_examples=12, deadline=None)

UNARY = {
    "exp": (topi.exp, np.exp, (-3, 3)), "log": (topi.log, np.log, (0.1, 5)),
    "sqrt": (topi.sqrt, np.sqrt, (0, 5)), "rsqrt": (topi.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 5)),
    "tanh": (topi.tanh, np.tanh, (-3, 3)),
    "sigmoid": (topi.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
    "floor": (topi.floor, np.floor, (-3, 3)), "ceil": (topi.ceil, np.ceil, (-3, 3)),
    "round": (topi.round, lambda x: np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)), (-4, 4)),
    "trunc": (topi.trunc, np.trunc, (-3, 3)), "abs": (topi.abs, np.abs, (-3, 3)),
    "negative": (topi.negative, np.negative, (-3, 3)), "sign": (topi.sign, np.sign, (-3, 3)),
    "relu": (topi.nn.relu, lambda x: np.maximum(x, 0), (-3, 3)),
    "sin": (topi.sin, np.sin, (-3, 3)), "cos": (topi.cos, np.cos, (-3, 3)),
    "log2": (topi.log2, np.log2, (0.1, 5)),
    "leaky_relu": (lambda x: topi.nn.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x),
                   (-3, 3)),
    "clip": (lambda x: topi.clip(x, -0.5, 0.75), lambda x: np.clip(x, -0.5, 0.75), (-2, 2)),
}


@pytest.fixture(scope="module")
def unary_mod():
    n, m = te.size_var("n"), te.size_var("m")
    funcs = {}
    for name, (fn, _, _) in UNARY.items():
        x = te.placeholder((n, m), name="x")
        y = fn(x)
        funcs[f"t_{name}"] = (topi.schedule_injective(y), [x, y])
    return build_funcs(funcs)


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(n=SIDE, m=SIDE)
def test_unary(unary_mod, name, n, m):
    _, ref, (lo, hi) = UNARY[name]
    x = rand((n, m), lo=lo, hi=hi, seed=n * 31 + m)
    out = ember.nd.empty((n, m))
    unary_mod[f"t_{name}"](ember.nd.array(x), out)
    check(out.numpy(), ref(x).astype("float32"), rtol=2e-5, atol=2e-6)


BINARY = {
    "add": (topi.add, np.add), "subtract": (topi.subtract, np.subtract),
    "multiply": (topi.multiply, np.multiply), "divide": (topi.divide, np.divide),
    "maximum": (topi.maximum, np.maximum), "minimum": (topi.minimum, np.minimum),
    "power": (topi.power, lambda a, b: np.power(np.abs(a), b)),
    "floor_mod": (topi.floor_mod, np.mod), "floor_divide": (topi.floor_divide, np.floor_divide),
    "less": (topi.less, np.less), "greater_equal": (topi.greater_equal, np.greater_equal),
    "equal": (topi.equal, np.equal), "not_equal": (topi.not_equal, np.not_equal),
}
# Broadcast patterns: 'n' = a symbolic dimension, 1 = a size-1 dimension.
PATTERNS = [(("n", "m"), ("n", "m")), (("n", "m"), ("m",)), (("n", 1), (1, "m")),
            (("k", "n", "m"), (1, "n", 1)), ((), ("n", "m"))]


def _shape(pattern, syms):
    return tuple(syms[d] if isinstance(d, str) else d for d in pattern)


@pytest.fixture(scope="module")
def binary_mod():
    syms = {c: te.size_var(c) for c in "knm"}
    funcs = {}
    for name, (fn, _) in BINARY.items():
        for p, (pa, pb) in enumerate(PATTERNS):
            a = te.placeholder(_shape(pa, syms), name="a")
            b = te.placeholder(_shape(pb, syms), name="b")
            funcs[f"{name}_{p}"] = (topi.schedule_injective(fn(a, b)), [a, b, fn(a, b)])
    # rebuild with the same output tensor in schedule and args
    out = {}
    for key, (_, (a, b, _)) in funcs.items():
        name = key.rsplit("_", 1)[0]
        c = BINARY[name][0](a, b)
        out[key] = (topi.schedule_injective(c), [a, b, c])
    return build_funcs(out)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("pattern", range(len(PATTERNS)))
@settings(max_examples=6, deadline=None)
@given(k=st.integers(1, 5), n=SIDE, m=SIDE)
def test_broadcast(binary_mod, name, pattern, k, n, m):
    vals = {"k": k, "n": n, "m": m}
    pa, pb = PATTERNS[pattern]
    sa, sb = _shape(pa, vals), _shape(pb, vals)
    a = rand(sa, seed=n + m) if sa else np.float32(rand((1,), seed=k)[0])
    b = rand(sb, seed=n * m + 1)
    if name in ("divide", "floor_mod", "floor_divide"):
        b = np.where(np.abs(b) < 0.25, 1.0, b).astype("float32")
    a_in = a if sa else np.full((), a, dtype="float32")
    want = BINARY[name][1](np.abs(a_in) if name == "power" else a_in, b)
    out = ember.nd.empty(want.shape, "bool" if want.dtype == bool else "float32")
    fn = binary_mod[f"{name}_{pattern}"]
    fn(ember.nd.array(np.abs(a_in) if name == "power" else a_in), ember.nd.array(b), out)
    check(out.numpy(), want.astype(out.dtype), rtol=3e-5, atol=1e-5)


def test_broadcast_error_names_the_dimension():
    a, b = te.placeholder((2, 3)), te.placeholder((4,))
    with pytest.raises(ember.error.OpError, match=r"add: cannot broadcast \(2, 3\) with \(4,\): "
                       r"dimension -1 is 3 vs 4"):
        topi.add(a, b)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 19), m=st.integers(1, 9))
def test_where_and_cast(n, m):
    c = te.placeholder((n, 1), "bool", name="c")
    x = te.placeholder((n, m), name="x")
    y = te.placeholder((m,), name="y")
    out = topi.cast(topi.where(c, x, y), "int32")
    cv, xv, yv = rand((n, 1), "bool"), rand((n, m), lo=-9, hi=9), rand((m,), lo=-9, hi=9, seed=3)
    (got,) = run_kernel(out, [c, x, y], [cv, xv, yv])
    check(got, np.where(cv, xv, yv).astype("int32"))


@pytest.mark.parametrize("dtype", ["int32", "int8", "float64"])
def test_int_and_double_arith(dtype):
    a = te.placeholder((5, 7), dtype, name="a")
    b = te.placeholder((7,), dtype, name="b")
    out = topi.add(topi.multiply(a, b), topi.maximum(a, b))
    av, bv = rand((5, 7), dtype, seed=1), rand((7,), dtype, seed=2)
    (got,) = run_kernel(out, [a, b], [av, bv])
    check(got, (av * bv + np.maximum(av, bv)).astype(dtype))


def test_full_zeros_ones():
    x = te.placeholder((3, 4), name="x")
    out = topi.add(topi.add(x, topi.full((3, 4), "float32", 2.5)), topi.ones((4,)))
    xv = rand((3, 4))
    (got,) = run_kernel(out, [x], [xv])
    check(got, xv + 3.5)


def test_elemwise_sum_refuses_mismatched_or_empty_lists():
    a, b = te.placeholder((4, 3), name="a"), te.placeholder((3, 4), name="b")
    assert topi.elemwise_sum([a, a, a]).shape == a.shape
    with pytest.raises(ember.TVMError, match=r"tensor 1 is float32\(3, 4\), tensor 0 is "
                                             r"float32\(4, 3\)"):
        topi.elemwise_sum([a, b])
    with pytest.raises(ember.TVMError, match="expected a non-empty list of te tensors"):
        topi.elemwise_sum([])
