"""The Reduction tutorial's shapes: symbolic sizes, splitting the reduce axis and the row
axis, a custom comm_reducer, lowered and built for the CPU."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import te
from ember.contrib import cc

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


@needs_cc
def test_row_sum_with_split_reduce_axis_and_symbolic_shape():
    n = te.var("n")
    m = te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
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
