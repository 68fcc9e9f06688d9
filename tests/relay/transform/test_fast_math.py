"""FastMath and the fast_exp / fast_tanh / fast_erf ops: the swap as text, the error bounds
against numpy, and the compiled kernels against the interpreter."""
from __future__ import annotations

import math

import numpy as np
import pytest
from _pass_helpers import assert_main_equal, evaluate, run
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember as tvm
from ember import relay
from ember.contrib import cc

BEFORE = """def @main(%x: Tensor[(4, 5), float32]) {
  %0 = fn (%p: Tensor[(4, 5), float32], Primitive=1) { exp(%p) };
  (exp(%x), tanh(%x), erf(%x), sigmoid(%x), %0(%x))
}"""
EXPECTED = """def @main(%x: Tensor[(4, 5), float32]) {
  %0 = fn (%p: Tensor[(4, 5), float32], Primitive=1) { exp(%p) };
  (fast_exp(%x), fast_tanh(%x), fast_erf(%x), sigmoid(%x), %0(%x))
}"""


def test_swaps_exp_tanh_erf_only():
    assert_main_equal(run(relay.transform.FastMath(), BEFORE), EXPECTED)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


FLOATS = hnp.arrays(np.float32, st.integers(1, 40),
                    elements=st.floats(-100, 100, width=32, allow_nan=False))


@settings(max_examples=50, deadline=None)
@given(x=FLOATS)
def test_error_bounds_against_numpy(x):
    """fast_exp: relative 3e-7 on [-87, 88] (clamped outside); tanh and erf absolute."""
    ref = {n: relay.op.get(n).op_def.reference for n in ("fast_exp", "fast_tanh", "fast_erf")}
    x64 = x.astype(np.float64)
    want = np.exp(np.clip(x64, -87, 88))
    np.testing.assert_allclose(ref["fast_exp"](x), want, rtol=3e-7, atol=0)
    np.testing.assert_allclose(ref["fast_tanh"](x), np.tanh(x64), rtol=0, atol=2e-7)
    np.testing.assert_allclose(ref["fast_erf"](x), _erf(x64), rtol=0, atol=6e-7)
    for name in ref:
        assert ref[name](x).dtype == np.float32


def test_other_float_dtypes_are_exact():
    x = np.linspace(-3, 3, 7)
    np.testing.assert_array_equal(relay.op.get("fast_exp").op_def.reference(x), np.exp(x))
    y = relay.op.get("fast_tanh").op_def.reference(x.astype("float16"))
    assert y.dtype == np.float16


def test_interpreter_after_fast_math_is_close():
    mod = relay.transform.InferType()(tvm.parser.fromtext(
        '#[version = "0.0.5"]\ndef @main(%x: Tensor[(64), float32]) {\n'
        '  add(exp(%x), multiply(tanh(%x), erf(%x)))\n}'))
    x = np.linspace(-5, 5, 64, dtype="float32")
    fast = run(relay.transform.FastMath(), mod)
    np.testing.assert_allclose(evaluate(fast, x), evaluate(mod, x), rtol=1e-6, atol=1e-6)


def test_bad_dtype_is_a_type_error():
    with pytest.raises(Exception, match="fast_exp: requires a floating-point tensor, got int32"):
        run(relay.transform.InferType(), 'def @main(%x: Tensor[(3), int32]) { fast_exp(%x) }')


def test_build_at_opt_level_4_runs_the_fast_kernels():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    x = relay.var("x", shape=(3, 33))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.tanh(relay.exp(x) * relay.erf(x))))
    mod = relay.transform.FastMath()(mod)
    lib = relay.build(mod, target="c")
    gm = tvm.contrib.graph_executor.GraphModule(lib["default"](tvm.cpu()))
    data = np.random.default_rng(3).uniform(-3, 3, (3, 33)).astype("float32")
    gm.set_input("x", data)
    gm.run()
    got = gm.get_output(0).numpy()
    np.testing.assert_allclose(got, evaluate(relay.transform.InferType()(mod), data),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, np.tanh(np.exp(data) * _erf(data)), rtol=1e-5, atol=1e-6)
    assert "fused_fast_exp" in lib.get_graph_json()


def test_opt_level_and_name():
    p = relay.transform.FastMath()
    assert p.info.opt_level == 4 and relay.transform.get_pass("fast-math").name == "FastMath"
