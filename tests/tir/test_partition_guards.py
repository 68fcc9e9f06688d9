"""partition_guards: innermost loops whose store is a guarded read split into plain loops
(fills and copies), the guard's loop-invariant terms hoisted; the values stay numpy's."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import te, tir, topi
from ember.contrib import cc
from ember.tir.codegen import generate_c

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _stores(outs, args) -> list[str]:
    code = generate_c([te.lower(topi.schedule_injective(outs), [*args, *outs], "k")])
    return [ln for ln in code.splitlines() if "] = " in ln and ln.startswith("    ")]


def _run(out, args, arrays, shape):
    mod = tir.build(topi.schedule_injective([out]), [*args, out], name="k")
    res = ember.nd.empty(shape, out.dtype)
    mod["k"](*[ember.nd.array(a) for a in arrays], res)
    return res.numpy()


def test_a_pad_is_fills_and_a_copy():
    x = te.placeholder((1, 4, 6, 5), name="x")
    stores = _stores([topi.nn.pad(x, (0, 0, 1, 2), (0, 0, 1, 3))], [x])
    assert stores and not any(" ? " in s for s in stores)  # was one select per element
    assert sum("x[" in s for s in stores) == 1


def test_a_guard_that_is_not_the_stored_value_stays():
    x = te.placeholder((16,), name="x")
    y = te.compute((20,), lambda i: tir.if_then_else(
        tir.all(i >= 2, i < 18), x[i - 2], tir.const(0.0, "float32")) + 1.0, name="y")
    assert any(" ? " in s for s in _stores([y], [x]))


def test_a_guard_on_a_value_stays():
    x = te.placeholder((16,), name="x")
    y = te.compute((16,), lambda i: tir.if_then_else(
        x[i] > 0, x[i], tir.const(0.0, "float32")), name="y")
    assert any(" ? " in s for s in _stores([y], [x]))


@needs_cc
@settings(max_examples=12, deadline=None)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 9)),
       before=st.tuples(st.integers(0, 3), st.integers(0, 4)),
       after=st.tuples(st.integers(0, 3), st.integers(0, 4)),
       value=st.sampled_from([0.0, -1.5]))
def test_pad_values_match_numpy(shape, before, after, value):
    x = te.placeholder(shape, name="x")
    out = topi.nn.pad(x, before, after, pad_value=value)
    a = np.random.default_rng(0).standard_normal(shape).astype("float32")
    want = np.pad(a, list(zip(before, after)), constant_values=value)
    np.testing.assert_array_equal(_run(out, [x], [a], want.shape), want)


@needs_cc
def test_guards_over_run_time_sizes_and_bounds_beyond_the_loop():
    """Bounds from a run-time size (clamped into the loop, either side empty), and a window
    read (i in [lo, hi) of a symbolic width) with the invariant row term hoisted."""
    n, w = te.size_var("n"), te.size_var("w")
    x = te.placeholder((n, w), name="x")
    y = te.compute((n, 8), lambda r, i: tir.if_then_else(
        tir.all(r % 2 == 0, i >= 3, i < w + 3), x[r, i - 3], tir.const(7.0, "float32")),
        name="y")
    for rows, width in ((3, 2), (4, 9), (1, 5)):
        a = np.arange(rows * width, dtype="float32").reshape(rows, width)
        want = np.full((rows, 8), 7.0, "float32")
        for r in range(0, rows, 2):
            k = min(width, 5)
            want[r, 3:3 + k] = a[r, :k]
        np.testing.assert_array_equal(_run(y, [x], [a], (rows, 8)), want)


def test_simplify_forgets_a_loop_bound_across_sibling_loops_of_one_variable():
    """partition_guards' parts reuse the loop's variable over other ranges: in the second
    loop ``i < n`` is a real test, not what the first loop ``[0, n)`` proved."""
    from ember.tir.expr import LT, BufferLoad, Call, IntImm, Var
    from ember.tir.simplify import simplify
    from ember.tir.stmt import Buffer, BufferStore, For, ForKind, SeqStmt

    i, n = Var("i", "int32"), Var("n", "int32")
    x, y = Buffer("x", (n,)), Buffer("y", (n + 4,))
    first = For(i, IntImm("int32", 0), n, ForKind.SERIAL,
                BufferStore(y, BufferLoad(x, (i,)), (i,)))
    guarded = Call("float32", "if_then_else", (LT(i, n), BufferLoad(x, (i,)),
                                              tir.const(0.0, "float32")))
    second = For(i, n, IntImm("int32", 4), ForKind.SERIAL, BufferStore(y, guarded, (i,)))
    out = simplify(SeqStmt((first, second)))
    assert "if_then_else" in str(out.seq[1])
