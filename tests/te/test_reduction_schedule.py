"""The Reduction tutorial's shapes: symbolic sizes, splitting the reduce axis and the row
axis, a custom comm_reducer, lowered and built for the CPU."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import te
from ember.contrib import cc

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _row_sum_split16():
    # the tutorial's sum of rows over symbolic n x m, reduce axis split by 16
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    return A, B, s, ki


@needs_cc
def test_row_sum_with_split_reduce_axis_and_symbolic_shape():
    A, B, s, ki = _row_sum_split16()
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].parallel(xo)
    text = str(tvm.lower(s, [A, B], simple_mode=True))
    assert "k_outer" in text and "k_inner" in text
    f = tvm.build(s, [A, B], "llvm")
    for rows, cols in ((5, 37), (70, 16)):
        a = np.random.default_rng(rows).random((rows, cols), dtype=np.float32)
        out = tvm.nd.array(np.zeros(rows, dtype="float32"))
        f(tvm.nd.array(a), out)
        np.testing.assert_allclose(out.numpy(), a.sum(axis=1), rtol=1e-5)


@needs_cc
def test_custom_reducer_and_fused_reduce_loops():
    n, m = 6, 10
    mysum = te.comm_reducer(lambda x, y: x + y, lambda t: tvm.tir.const(0, dtype=t),
                            name="mysum")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: mysum(A[i, k] * A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, nparts=3)
    s[B].unroll(ki)
    a = np.random.default_rng(7).random((n, m), dtype=np.float32)
    f = tvm.build(s, [A, B], "llvm")
    out = tvm.nd.array(np.zeros(n, dtype="float32"))
    f(tvm.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), (a * a).sum(axis=1), rtol=1e-5)


@needs_cc
def test_rfactor_makes_partial_sums_over_the_inner_reduce_loop():
    A, B, s, ki = _row_sum_split16()
    BF = s.rfactor(B, ki)
    assert BF.op.name == "B.rf" and [iv.var.name for iv in BF.op.axis] == ["k_inner", "i"]
    assert [iv.var.name for iv in s[B].op.reduce_axis] == ["k_inner.v"]
    text = str(tvm.lower(s, [A, B], simple_mode=True))
    assert "allocate B_rf: float32[16, n] (global)" in text
    assert "(((k_outer * 16) + k_inner) < m)" in text  # the tail guard of the split
    f = tvm.build(s, [A, B], "llvm")
    for rows, cols in ((3, 37), (4, 16)):
        a = np.random.default_rng(cols).random((rows, cols), dtype=np.float32)
        out = tvm.nd.array(np.zeros(rows, dtype="float32"))
        f(tvm.nd.array(a), out)
        np.testing.assert_allclose(out.numpy(), a.sum(axis=1), rtol=1e-5)


@needs_cc
def test_rfactor_with_factor_axis_computed_at_the_new_reduce_loop():
    A = te.placeholder((4, 35), name="A")
    k = te.reduce_axis((0, 35), "k")
    B = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, nparts=4)
    BF = s.rfactor(B, ko, factor_axis=1)
    assert [iv.var.name for iv in BF.op.axis] == ["i", "k_outer"]
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    assert "allocate B_rf: float32[1, 1] (local)" in str(tvm.lower(s, [A, B]))
    a = np.random.default_rng(9).normal(size=(4, 35)).astype("float32")
    out = tvm.nd.array(np.zeros(4, dtype="float32"))
    tvm.build(s, [A, B], "llvm")(tvm.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), a.max(axis=1))


def test_rfactor_bad_input():
    from ember.runtime.errors import OpError

    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((4,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(OpError, match="rfactor of C: needs a reduction stage"):
        s.rfactor(C, C.op.axis[0])
    with pytest.raises(OpError, match=r"i is not a reduce loop of the stage \(reduce loops: \['k'\]\)"):
        s.rfactor(B, B.op.axis[0])
    with pytest.raises(OpError, match=r"factor_axis must be in \[0, 1\], got 5"):
        s.rfactor(B, k, factor_axis=5)
    ko, ki = s[B].split(k, 2)
    s[B].fuse(ko, ki)
    with pytest.raises(OpError, match="reduce loops fused together are not supported"):
        s.rfactor(B, s[B].leaf_iter_vars[-1])


@needs_cc
def test_rfactor_over_a_whole_reduce_axis_with_where():
    A = te.placeholder((3, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    B = te.compute((3,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] > 0.5), name="B")
    s = te.create_schedule(B.op)
    BF = s.rfactor(B, k)
    assert BF.op.reduce_axis == [] and BF.shape[0].value == 6
    a = np.random.default_rng(11).random((3, 6), dtype=np.float32)
    out = tvm.nd.array(np.zeros(3, dtype="float32"))
    tvm.build(s, [A, B], "llvm")(tvm.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), np.where(a > 0.5, a, 0).sum(axis=1), rtol=1e-6)
