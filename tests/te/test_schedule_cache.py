"""cache_read and cache_write, and the GEMM-on-CPU recipe (blocking, loop permutation, array
packing, write cache, parallel), written as the Relay-era tutorial calls them."""
from __future__ import annotations

import numpy as np
import pytest

import ember as tvm
from ember import te
from ember.contrib import cc
from ember.runtime.errors import OpError

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _gemm_schedule(M, N, K, bn):
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute((M, N), lambda x, y: te.sum(
        A[x, k] * packedB[y // bn, k, tvm.tir.indexmod(y, bn)], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    s[C].parallel(xo)
    x, y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    return s, [A, B, C]


@needs_cc
def test_gemm_tutorial_schedule_matches_numpy():
    M, N, K, bn = 48, 32, 20, 16
    s, args = _gemm_schedule(M, N, K, bn)
    text = str(tvm.lower(s, args, simple_mode=True))
    # the write cache is one bn x bn block, computed inside y_outer
    assert "allocate C_global: float32[16, 16] (local)" in text
    assert text.index("y_outer") < text.index("C_global")
    func = tvm.build(s, args, target="llvm", name="mmult")
    rng = np.random.default_rng(0)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    c = tvm.nd.array(np.zeros((M, N), dtype="float32"))
    func(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_cache_write_moves_the_reduction_into_the_cache_stage():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    assert BL.op.name == "B.local" and list(s[BL].op.reduce_axis) == [k]
    assert s[B].op.reduce_axis == [] and [iv.var.name for iv in s[BL].op.axis] == ["i.c"]
    assert [st.op.name for st in s.stages] == ["A", "B.local", "B"]


@needs_cc
def test_cache_read_stages_an_input_for_two_readers():
    n = 12
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [B, C])
    assert AA.op.name == "A.local"
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[AA].compute_at(s[C], xo)
    s[B].compute_at(s[C], xo)
    text = str(tvm.lower(s, [A, C], simple_mode=True))
    assert "allocate A_local: float32[4] (local)" in text
    a = np.arange(n, dtype="float32")
    f = tvm.build(s, [A, C], "llvm")
    out = tvm.nd.array(np.zeros(n, dtype="float32"))
    f(tvm.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), a + a * 2.0)


def test_cache_bad_input():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 3.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(OpError, match="C does not read A"):
        s.cache_read(A, "global", [C])
    with pytest.raises(OpError, match="needs at least one reader"):
        s.cache_read(A, "global", [])
    with pytest.raises(OpError, match="expected a te tensor, got str"):
        s.cache_read("A", "global", [B])
    with pytest.raises(OpError, match="only a compute stage can be cached, A is PlaceholderOp"):
        s.cache_write(A, "global")
    s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(OpError, match="call cache_write before scheduling C"):
        s.cache_write(C, "global")
