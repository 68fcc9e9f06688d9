"""dense / matmul / batch_matmul and conv2d (all layouts and groupings) against numpy,
including fused bias + relu epilogues."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import check, rand, run_kernel

from ember import te, topi

TOL = {"rtol": 1e-4, "atol": 1e-4}


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 19), n=st.integers(1, 40), k=st.integers(1, 37), fuse=st.booleans())
def test_dense(m, n, k, fuse):
    a, w, b = te.placeholder((m, k), name="a"), te.placeholder((n, k), name="w"), \
        te.placeholder((n,), name="b")
    out = topi.nn.dense(a, w)
    if fuse:
        out = topi.nn.relu(topi.add(out, b))
    av, wv, bv = rand((m, k), seed=1), rand((n, k), seed=2), rand((n,), seed=3)
    (got,) = run_kernel(out, [a, w, b] if fuse else [a, w], [av, wv, bv] if fuse else [av, wv])
    want = av.astype("float64") @ wv.T.astype("float64")
    check(got, np.maximum(want + bv, 0) if fuse else want, **TOL)


def test_dense_bias_argument_and_single_row():
    a, w, b = te.placeholder((1, 70), name="a"), te.placeholder((33, 70), name="w"), \
        te.placeholder((33,), name="b")
    av, wv, bv = rand((1, 70)), rand((33, 70), seed=4), rand((33,), seed=5)
    (got,) = run_kernel(topi.nn.dense(a, w, b), [a, w, b], [av, wv, bv])
    check(got, av @ wv.T + bv, **TOL)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes(ta, tb):
    sa, sb = ((9, 6) if ta else (6, 9)), ((13, 9) if tb else (9, 13))
    a, b = te.placeholder(sa, name="a"), te.placeholder(sb, name="b")
    av, bv = rand(sa, seed=1), rand(sb, seed=2)
    (got,) = run_kernel(topi.nn.matmul(a, b, ta, tb), [a, b], [av, bv])
    check(got, (av.T if ta else av) @ (bv.T if tb else bv), **TOL)


@settings(max_examples=6, deadline=None)
@given(bt=st.integers(1, 3), m=st.integers(1, 9), n=st.integers(1, 21), k=st.integers(1, 17),
       bcast=st.booleans())
def test_batch_matmul(bt, m, n, k, bcast):
    x, y = te.placeholder((bt, m, k), name="x"), te.placeholder((1 if bcast else bt, n, k), name="y")
    xv, yv = rand((bt, m, k), seed=1), rand((1 if bcast else bt, n, k), seed=2)
    (got,) = run_kernel(topi.nn.batch_matmul(x, y), [x, y], [xv, yv])
    check(got, np.matmul(xv, yv.transpose(0, 2, 1)), **TOL)


def conv_ref(x, w, stride, pads, dil, groups):
    """NCHW / OIHW reference in float64."""
    n, c, h, wd = x.shape
    co, cig, kh, kw = w.shape
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - ((kh - 1) * dil + 1)) // stride + 1
    ow = (wd + pl + pr - ((kw - 1) * dil + 1)) // stride + 1
    out = np.zeros((n, co, oh, ow))
    cog = co // groups
    for o in range(co):
        g = o // cog
        for i in range(cig):
            for y in range(kh):
                for z in range(kw):
                    patch = xp[:, g * cig + i, y * dil:y * dil + stride * (oh - 1) + 1:stride,
                               z * dil:z * dil + stride * (ow - 1) + 1:stride]
                    out[:, o] += patch * w[o, i, y, z]
    return out


conv_cases = st.fixed_dictionaries({
    "n": st.integers(1, 2), "c": st.integers(1, 5), "h": st.integers(3, 11),
    "w": st.integers(3, 13), "co": st.integers(1, 19), "k": st.sampled_from([1, 2, 3]),
    "stride": st.integers(1, 2), "pad": st.integers(0, 2), "dil": st.integers(1, 2),
    "groups": st.sampled_from(["one", "depthwise", "grouped"]), "fuse": st.booleans()})


def _conv_case(case, layout):
    c, co, g = case["c"], case["co"], 1
    if case["groups"] == "depthwise":
        g, co = c, c * (1 + case["co"] % 2)
    elif case["groups"] == "grouped" and c > 1:
        g = c
        c, co = c * 2, co * c
    span = (case["k"] - 1) * case["dil"] + 1
    if span > min(case["h"], case["w"]) + 2 * case["pad"]:
        return None
    x = rand((case["n"], c, case["h"], case["w"]), seed=case["h"])
    w = rand((co, c // g, case["k"], case["k"]), seed=co)
    pads = (case["pad"],) * 4
    want = conv_ref(x, w, case["stride"], pads, case["dil"], g)
    return x, w, g, want


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@settings(max_examples=10, deadline=None)
@given(case=conv_cases)
def test_conv2d(layout, case):
    made = _conv_case(case, layout)
    if made is None:
        return
    x, w, g, want = made
    if layout == "NHWC":
        x = x.transpose(0, 2, 3, 1).copy()
        want = want.transpose(0, 2, 3, 1)
        w = (w.transpose(2, 3, 1, 0) if g == 1 or g != x.shape[3] else
             w.reshape(g, -1, *w.shape[2:]).transpose(2, 3, 0, 1)).copy()
    X, W = te.placeholder(x.shape, name="data"), te.placeholder(w.shape, name="weight")
    out = topi.nn.conv2d(X, W, case["stride"], case["pad"], case["dil"], layout, groups=g,
                         kernel_layout="HWOI" if layout == "NHWC" and g == x.shape[3] and g > 1
                         else "")
    args, arrays = [X, W], [x, w]
    if case["fuse"]:
        cout = want.shape[1] if layout == "NCHW" else want.shape[3]
        bshape = (cout, 1, 1) if layout == "NCHW" else (cout,)
        B = te.placeholder(bshape, name="bias")
        bv = rand(bshape, seed=9)
        out = topi.nn.relu(topi.add(out, B))
        want = np.maximum(want + bv, 0)
        args, arrays = args + [B], arrays + [bv]
    (got,) = run_kernel(out, args, arrays)
    check(got, want, **TOL)


def test_conv2d_asymmetric_padding_and_channel_error():
    X, W = te.placeholder((1, 3, 7, 8), name="x"), te.placeholder((4, 3, 3, 2), name="w")
    x, w = rand((1, 3, 7, 8)), rand((4, 3, 3, 2), seed=1)
    (got,) = run_kernel(topi.nn.conv2d(X, W, (2, 1), (1, 0, 2, 1)), [X, W], [x, w])
    check(got, conv_ref(x, w, 1, (1, 0, 2, 1), 1, 1)[:, :, ::2, :], **TOL)
    bad = te.placeholder((4, 2, 3, 3), name="w2")
    with pytest.raises(Exception, match="data has 3 channels but weight expects 2"):
        topi.nn.conv2d(X, bad)


@pytest.mark.parametrize("stride,pad,opad", [(1, 0, 0), (2, 1, 1), (2, 0, 0), (3, 1, 0)])
def test_conv2d_transpose(stride, pad, opad):
    x, w = rand((1, 3, 5, 4)), rand((3, 2, 3, 3), seed=2)
    X, W = te.placeholder(x.shape, name="x"), te.placeholder(w.shape, name="w")
    out = topi.nn.conv2d_transpose_nchw(X, W, stride, pad, output_padding=opad)
    (got,) = run_kernel(out, [X, W], [x, w])
    oh = (5 - 1) * stride - 2 * pad + 3 + opad
    ow = (4 - 1) * stride - 2 * pad + 3 + opad
    full = np.zeros((1, 2, (5 - 1) * stride + 3 + opad, (4 - 1) * stride + 3 + opad))
    for i in range(5):
        for j in range(4):
            full[0, :, i * stride:i * stride + 3, j * stride:j * stride + 3] += np.einsum(
                "c,cokl->okl", x[0, :, i, j], w)
    check(got, full[:, :, pad:pad + oh, pad:pad + ow], **TOL)


def test_symbolic_batch_dense_and_conv():
    import ember
    from ember import tir

    b = te.size_var("batch")
    a, w = te.placeholder((b, 6), name="a"), te.placeholder((5, 6), name="w")
    x, k = te.placeholder((b, 3, 6, 7), name="x"), te.placeholder((4, 3, 3, 3), name="k")
    d = topi.nn.dense(a, w)
    c = topi.nn.relu(topi.nn.conv2d(x, k, 1, 1))
    mod = tir.build([te.lower(topi.auto_schedule(d), [a, w, d], "dyn_dense"),
                     te.lower(topi.auto_schedule(c), [x, k, c], "dyn_conv")])
    wv, kv = rand((5, 6), seed=1), rand((4, 3, 3, 3), seed=2)
    for n in (1, 3):
        av, xv = rand((n, 6), seed=n), rand((n, 3, 6, 7), seed=n)
        out_d, out_c = ember.nd.empty((n, 5)), ember.nd.empty((n, 4, 6, 7))
        mod["dyn_dense"](ember.nd.array(av), ember.nd.array(wv), out_d)
        mod["dyn_conv"](ember.nd.array(xv), ember.nd.array(kv), out_c)
        check(out_d.numpy(), av @ wv.T, **TOL)
        check(out_c.numpy(), np.maximum(conv_ref(xv, kv, 1, (1,) * 4, 1, 1), 0), **TOL)
