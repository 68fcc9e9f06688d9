"""Schedules and lowering: split/fuse/reorder with tails, inline, compute_at bound inference,
reductions with conditions, custom reducers, scalar params, extern stages calling Python."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import te, tir
from ember.contrib import cc
from ember.runtime.errors import OpError

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _build_run(s, args, arrays, out_shapes, name="f", dtypes=None):
    mod = tir.build(s, args, name=name)
    outs = [ember.nd.empty(sh, (dtypes or ["float32"] * len(out_shapes))[i])
            for i, sh in enumerate(out_shapes)]
    mod[name](*[ember.nd.array(a) if isinstance(a, np.ndarray) else a for a in arrays], *outs)
    return [o.numpy() for o in outs]


@needs_cc
@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 23), m=st.integers(1, 19), f1=st.integers(1, 8), f2=st.integers(1, 8),
       order=st.booleans())
def test_split_fuse_reorder_with_tails(n, m, f1, f2, order):
    a = te.placeholder((n, m), name="A")
    b = te.compute((n, m), lambda i, j: a[i, j] * 2.0 + tir.Cast("float32", i * 100 + j), name="B")
    s = te.create_schedule(b.op)
    i, j = b.op.axis
    io, ii = s[b].split(i, f1)
    jo, ji = s[b].split(j, nparts=f2) if order else s[b].split(j, f2)
    s[b].reorder(io, jo, ii, ji)
    fused = s[b].fuse(io, jo)
    s[b].parallel(fused)
    s[b].vectorize(ji)
    av = np.random.default_rng(n).random((n, m), dtype=np.float32)
    (got,) = _build_run(s, [a, b], [av], [(n, m)])
    want = av * 2 + (np.arange(n)[:, None] * 100 + np.arange(m)[None, :])
    np.testing.assert_allclose(got, want, rtol=1e-6)


@needs_cc
def test_compute_at_infers_the_stencil_region():
    n, m = 10, 12
    a = te.placeholder((n, m + 2), name="A")
    b = te.compute((n, m + 2), lambda i, j: a[i, j] * 3.0, name="B")
    c = te.compute((n, m), lambda i, j: b[i, j] + b[i, j + 1] + b[i, j + 2], name="C")
    s = te.create_schedule(c.op)
    jo, ji = s[c].split(c.op.axis[1], 4)
    s[b].compute_at(s[c], jo)
    text = str(te.lower(s, [a, c], "stencil"))
    assert "allocate B: float32[1, 6] (local)" in text
    av = np.random.default_rng(0).random((n, m + 2), dtype=np.float32)
    (got,) = _build_run(s, [a, c], [av], [(n, m)])
    bv = av * 3
    np.testing.assert_allclose(got, bv[:, :-2] + bv[:, 1:-1] + bv[:, 2:], rtol=1e-6)


@needs_cc
def test_compute_inline_and_multi_output():
    a = te.placeholder((7,), name="A")
    b = te.compute((7,), lambda i: a[i] + 1.0, name="B")
    c, d = te.compute((7,), lambda i: (b[i] * 2.0, b[i] - 5.0), name="CD")
    s = te.create_schedule([c.op])
    s[b].compute_inline()
    assert "B[" not in str(te.lower(s, [a, c, d], "f"))
    av = np.arange(7, dtype="float32")
    got_c, got_d = _build_run(s, [a, c, d], [av], [(7,), (7,)])
    np.testing.assert_allclose(got_c, (av + 1) * 2)
    np.testing.assert_allclose(got_d, av + 1 - 5)


@needs_cc
def test_reduce_with_where_and_custom_reducer():
    a = te.placeholder((5, 9), name="A")
    k = te.reduce_axis((0, 9), "k")
    pos = te.compute((5,), lambda i: te.sum(a[i, k], axis=k, where=a[i, k] > 0), name="pos")
    absmax = te.comm_reducer(lambda x, y: tir.max(tir.abs(x), tir.abs(y)),
                             lambda t: tir.const(0, t), "absmax")
    k2 = te.reduce_axis((0, 9), "k2")
    am = te.compute((5,), lambda i: absmax(a[i, k2], axis=k2), name="am")
    s = te.create_schedule([pos.op, am.op])
    av = np.random.default_rng(1).normal(size=(5, 9)).astype("float32")
    got_p, got_a = _build_run(s, [a, pos, am], [av], [(5,), (5,)])
    np.testing.assert_allclose(got_p, np.where(av > 0, av, 0).sum(1), rtol=1e-5)
    np.testing.assert_allclose(got_a, np.abs(av).max(1), rtol=1e-6)


@needs_cc
def test_scalar_parameter():
    n = te.size_var("n")
    alpha = te.var("alpha", "float32")
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * alpha, name="B")
    s = te.create_schedule(b.op)
    mod = tir.build(s, [a, alpha, b], name="scale")
    out = ember.nd.empty((4,))
    mod["scale"](ember.nd.array(np.arange(4, dtype="float32")), 2.5, out)
    np.testing.assert_allclose(out.numpy(), np.arange(4) * 2.5)


@needs_cc
def test_extern_stage_calls_a_registered_python_function():
    calls = []

    @ember.register_func("test.te.add_one", override=True)
    def add_one(x, y):
        calls.append(tuple(x.shape))
        y.copyfrom(x.numpy() + 1)

    a = te.placeholder((3, 4), name="A")
    b = te.extern((3, 4), [a], lambda ins, outs: tir.call_packed("test.te.add_one", ins[0],
                                                                 outs[0]), name="B")
    c = te.compute((3, 4), lambda i, j: b[i, j] * 2.0, name="C")
    s = te.create_schedule(c.op)
    assert "tir.call_packed" in str(te.lower(s, [a, c], "ext"))
    av = np.arange(12, dtype="float32").reshape(3, 4)
    (got,) = _build_run(s, [a, c], [av], [(3, 4)], name="ext")
    np.testing.assert_allclose(got, (av + 1) * 2)
    assert calls == [(3, 4)]


def test_schedule_errors_name_the_stage():
    a = te.placeholder((4, 4), name="A")
    b = te.compute((4, 4), lambda i, j: a[i, j], name="B")
    s = te.create_schedule(b.op)
    i, j = b.op.axis
    with pytest.raises(OpError, match="B: can only fuse adjacent loops"):
        io, ii = s[b].split(i, 2)
        s[b].fuse(io, j)
    with pytest.raises(OpError, match="i is not a leaf loop of this stage"):
        s[b].split(i, 2)
    with pytest.raises(OpError, match="input A is not in the argument list"):
        te.lower(te.create_schedule(b.op), [b], "f")
    k = te.reduce_axis((0, 4), "k")
    with pytest.raises(OpError, match="a reduction must be the whole body"):
        te.compute((4,), lambda i: te.sum(a[i, k], axis=k) + 1.0, name="bad")


def test_expression_api():
    x = te.var("x")
    y = te.size_var("y")
    e = (x + 1) * 2 - y // 3 + y % 4
    assert str(e) == "((((x + 1) * 2) - floordiv(y, 3)) + floormod(y, 4))"
    assert isinstance(tir.const(3), tir.IntImm) and int(tir.const(3)) == 3
    assert tir.const(2.5).dtype == "float32"
    assert (x.astype("float32")).dtype == "float32"
    assert str(te.if_then_else(x > 0, x, 0)) == "if_then_else((x > 0), x, 0)"
    assert tir.max_value("int8").value == 127 and tir.min_value("float32").value < -3e38
    assert bool(x == x) and not bool(x == y)
    assert {x: 1}[x] == 1


def test_constant_comparisons_are_python_truthy():
    assert tir.const(1) == 1 and not (tir.const(1) != 1)
    assert tir.const(4) == tir.const(4)
    assert not tir.const(0)
    x = te.var("x")
    assert not bool(x == 1)


@needs_cc
def test_vectorize_or_parallel_on_a_reduction_axis_stays_correct():
    a = te.placeholder((3, 40), name="A")
    k = te.reduce_axis((0, 40), "k")
    b = te.compute((3,), lambda i: te.sum(a[i, k], axis=k), name="B")
    s = te.create_schedule(b.op)
    ko, ki = s[b].split(k, 8)
    s[b].vectorize(ki)
    s[b].parallel(ko)
    text = str(te.lower(s, [a, b], "f"))
    assert "vectorized" not in text and "parallel" not in text
    av = np.random.default_rng(2).random((3, 40), dtype=np.float32)
    (got,) = _build_run(s, [a, b], [av], [(3,)])
    np.testing.assert_allclose(got, av.sum(1), rtol=1e-5)
