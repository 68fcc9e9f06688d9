"""Divisions by a run-time size in an innermost loop: computed once before the loop when they
do not depend on it (under a test of the divisor where it may be zero) (``tir/hoist_division.py``), so that the C compiler
vectorises the loop as it does the static build's; and the bounds that prove them safe."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay, tir
from ember.contrib import cc
from ember.ir.transform import PassContext
from ember.tir.simplify import bound

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")

I, N = tir.Var("i"), tir.SizeVar("n")


@settings(max_examples=60, deadline=None)
@given(i=st.integers(0, 10_000), n=st.integers(0, 50), k=st.integers(1, 3))
def test_bounds_of_a_division_by_a_positive_run_time_size_hold(i: int, n: int, k: int) -> None:
    ranges = {I: (0, None)}
    d = n + k
    for e, value in [(tir.floordiv(I, N + k), i // d), (tir.floormod(I, N + k), i % d),
                     (tir.Div(I, N + k, "int32"), i // d), (tir.Mod(I, N + k, "int32"), i % d)]:
        lo, hi = bound(e, ranges)
        assert lo is not None and lo <= value, str(e)
        assert hi is None or value <= hi, str(e)


def test_no_bound_from_a_divisor_that_may_be_zero_or_a_negative_dividend() -> None:
    assert bound(tir.floordiv(I, N), {I: (0, None)}) == (None, None)
    assert bound(tir.Div(I, N + 1, "int32"), {I: (-5, None)}) == (None, None)
    assert bound(tir.floordiv(I, N + 1), {I: (-5, None)})[0] is None


def _grouped_conv(width):
    x = relay.var("x", shape=(1, 8, 1, width))
    w = relay.const(np.random.default_rng(1).standard_normal((8, 2, 1, 9)).astype("float32"))
    y = relay.nn.conv2d(x, w, padding=(0, 4, 0, 4), groups=4, channels=8, kernel_size=(1, 9))
    return ember.IRModule.from_expr(relay.Function([x], y)), w.data.numpy()


def _reference(x: np.ndarray, w: np.ndarray, groups: int, pad: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (0, 0), (pad, pad)))
    o, i, _, k = w.shape
    og, width = o // groups, xp.shape[3] - k + 1
    out = np.zeros((1, o, 1, width), "float32")
    for co in range(o):
        for c in range(i):
            row = xp[0, (co // og) * i + c, 0]
            for t in range(k):
                out[0, co, 0] += w[co, c, 0, t] * row[t:t + width]
    return out


@requires_cc
def test_a_symbolic_grouped_conv_divides_once_per_row_and_matches_numpy() -> None:
    mod, w = _grouped_conv(relay.Any())
    with PassContext(opt_level=3, config={"relay.AlterOpLayout.desired_layout": "NCHW"}):
        exe = relay.vm.compile(mod, target="llvm")
    src = exe.lib.get_source()
    assert re.search(r"const int32_t ember_q\w* = \(any_dim != 0 \? ", src)
    # the tap loop (a vectorised sum) indexes through the hoisted quotient, no division
    tap_loops = re.findall(r"EMBER_SIMD_SUM\(\w+\)\n\s*for \(int32_t \w+ = 0; \w+ < 9;[^\n]*\n"
                           r"([^\n]*)\n", src)
    assert tap_loops and not any(re.search(r"[/%] \(?any_dim|ember_floor", line)
                                 for line in tap_loops)
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())
    rng = np.random.default_rng(0)
    for width in (1, 7, 16, 37):
        x = rng.standard_normal((1, 8, 1, width)).astype("float32")
        got = vm.invoke("main", x).numpy()
        np.testing.assert_allclose(got, _reference(x, w, 4, 4), rtol=1e-5, atol=1e-5)


def test_divisions_that_vary_or_read_memory_stay_in_the_loop() -> None:
    from ember.tir.expr import BufferLoad
    from ember.tir.hoist_division import invariant_divisions
    from ember.tir.stmt import Evaluate, For, ForKind

    j, m = tir.Var("j"), tir.Var("m")
    buf = tir.decl_buffer((16,), "int32", "b")
    exprs = [tir.Div(I, N + 1, "int32"),  # invariant, divisor >= 1: hoisted
             tir.Div(j, N + 1, "int32"),  # reads the loop variable
             tir.Div(I, m, "int32"),  # m may be zero: hoisted (the C code tests it)
             tir.Div(BufferLoad(buf, (I,)), N + 1, "int32")]  # reads memory
    loop = For(j, tir.const(0, "int32"), tir.const(8, "int32"), ForKind.SERIAL,
               Evaluate(tir.Call("int32", "tir.ember_test_sink", tuple(exprs))))
    found = invariant_divisions(loop, lambda d: True)
    assert found == [exprs[0], exprs[2]]


@requires_cc
def test_a_parallel_loop_inside_a_loop_that_hoisted_a_quotient_recomputes_it() -> None:
    """The quotient hoisted at the top of an outer loop's body is a local of the enclosing
    function; the parallel loop inside is outlined into a task function that cannot see it
    (GPT-2's KV-cache concat: `reshape(x, [0, -1, 4, 64])`, then a transpose into a concat,
    at run-time batch and lengths, failed to compile)."""
    x = relay.var("x", shape=(relay.Any(), relay.Any(), 256))
    past = relay.var("past", shape=(relay.Any(), 4, relay.Any(), 64))
    y = relay.transpose(relay.reshape(x, [0, -1, 4, 64]), [0, 2, 1, 3])
    mod = ember.IRModule.from_expr(relay.Function([x, past], relay.concatenate([past, y], 2)))
    run = ember.compile(mod)
    rng = np.random.default_rng(0)
    for batch, new, old in ((2, 3, 5), (1, 1, 0), (3, 17, 9)):
        a = rng.standard_normal((batch, new, 256)).astype("float32")
        p = rng.standard_normal((batch, 4, old, 64)).astype("float32")
        want = np.concatenate([p, a.reshape(batch, new, 4, 64).transpose(0, 2, 1, 3)], 2)
        np.testing.assert_array_equal(run(a, p), want)
