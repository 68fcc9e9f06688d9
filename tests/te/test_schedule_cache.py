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


@needs_cc
def test_read_caches_computed_at_a_split_reduction_inside_a_write_cache():
    M, N, K = 12, 10, 16
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "local", [C])
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 5)
    s[CL].compute_at(s[C], jo)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], 4)
    s[AA].compute_at(s[CL], ko)
    s[BB].compute_at(s[CL], ko)
    text = str(tvm.lower(s, [A, B, C]))
    # bounds at k_outer: one row of A and one column of B, 4 elements of k each
    assert "allocate A_local: float32[1, 4] (local)" in text
    assert "allocate B_local: float32[4, 1] (local)" in text
    assert "allocate C_local: float32[4, 5] (local)" in text
    rng = np.random.default_rng(5)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    c = tvm.nd.array(np.zeros((M, N), dtype="float32"))
    tvm.build(s, [A, B, C], "llvm")(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


@needs_cc
def test_cache_write_of_a_multi_output_stage():
    X = te.placeholder((6,), name="X")
    P, Q = te.compute((6,), lambda i: (X[i] + 1.0, X[i] * 3.0), name="PQ")
    s = te.create_schedule(P.op)
    PL, QL = s.cache_write([P, Q], "global")
    assert PL.op is QL.op and PL.op.name == "PQ.global"
    x = np.arange(6, dtype="float32")
    p, q = tvm.nd.array(np.zeros(6, "float32")), tvm.nd.array(np.zeros(6, "float32"))
    tvm.build(s, [X, P, Q], "llvm")(tvm.nd.array(x), p, q)
    np.testing.assert_allclose(p.numpy(), x + 1)
    np.testing.assert_allclose(q.numpy(), x * 3)
