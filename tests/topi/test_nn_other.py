"""Pools, normalisations, activations and upsampling against numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import check, rand, run_kernel

from ember import te, topi


def pool_ref(x, k, s, pads, kind, ceil_mode, count_include_pad):
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads

    def size(dim, b, a):
        total = dim + b + a - k
        o = (total + s - 1) // s + 1 if ceil_mode else total // s + 1
        if ceil_mode and (o - 1) * s >= dim + b:
            o -= 1
        return o
    oh, ow = size(h, pt, pb), size(w, pl, pr)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * s - pt, j * s - pl
            y1, x1 = min(y0 + k, h + pb), min(x0 + k, w + pr)
            ya, xa, yb, xb = max(y0, 0), max(x0, 0), min(y1, h), min(x1, w)
            win = x[:, :, ya:yb, xa:xb]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = (y1 - y0) * (x1 - x0) if count_include_pad else (yb - ya) * (xb - xa)
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@settings(max_examples=6, deadline=None)
@given(h=st.integers(2, 9), w=st.integers(2, 10), k=st.integers(1, 3), s=st.integers(1, 3),
       pad=st.integers(0, 1), ceil_mode=st.booleans(), cip=st.booleans())
def test_pool2d(kind, layout, h, w, k, s, pad, ceil_mode, cip):
    if pad >= k or k > min(h, w) + 2 * pad:
        return
    x = rand((2, 3, h, w), seed=h * w)
    want = pool_ref(x, k, s, (pad,) * 4, kind, ceil_mode, cip)
    xin = x if layout == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    X = te.placeholder(xin.shape, name="x")
    out = topi.nn.pool2d(X, k, s, 1, pad, kind, ceil_mode, layout, cip)
    (got,) = run_kernel(out, [X], [xin])
    check(got, want if layout == "NCHW" else want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_global_and_adaptive_pools(layout):
    x = rand((2, 3, 7, 5))
    xin = x if layout == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    X = te.placeholder(xin.shape, name="x")
    ga, gm = topi.nn.global_avg_pool2d(X, layout), topi.nn.global_max_pool2d(X, layout)
    ad = topi.nn.adaptive_avg_pool2d(X, (3, 2), layout)
    got_a, got_m, got_ad = run_kernel([ga, gm, ad], [X], [xin])
    to = (lambda v: v) if layout == "NCHW" else (lambda v: v.transpose(0, 2, 3, 1))
    check(got_a, to(x.mean(axis=(2, 3), keepdims=True)), rtol=1e-5)
    check(got_m, to(x.max(axis=(2, 3), keepdims=True)))
    want = np.zeros((2, 3, 3, 2))
    for i in range(3):
        for j in range(2):
            y0, y1 = i * 7 // 3, math.ceil((i + 1) * 7 / 3)
            x0, x1 = j * 5 // 2, math.ceil((j + 1) * 5 / 2)
            want[:, :, i, j] = x[:, :, y0:y1, x0:x1].mean(axis=(2, 3))
    check(got_ad, to(want), rtol=1e-5)


def test_batch_norm_and_bias_add_and_prelu():
    x = te.placeholder((2, 4, 3, 3), name="x")
    g, b, m, v = (te.placeholder((4,), name=nm) for nm in "gbmv")
    out = topi.nn.batch_norm(x, g, b, m, v, axis=1, epsilon=1e-3)
    xv = rand((2, 4, 3, 3))
    gv, bv, mv = rand((4,), seed=1), rand((4,), seed=2), rand((4,), seed=3)
    vv = rand((4,), seed=4, lo=0.1, hi=2)
    (got,) = run_kernel(out, [x, g, b, m, v], [xv, gv, bv, mv, vv])
    sh = (1, 4, 1, 1)
    want = (xv - mv.reshape(sh)) / np.sqrt(vv.reshape(sh) + 1e-3) * gv.reshape(sh) + bv.reshape(sh)
    check(got, want, rtol=1e-5, atol=1e-5)
    (got,) = run_kernel(topi.nn.bias_add(x, b), [x, b], [xv, bv])
    check(got, xv + bv.reshape(sh))
    (got,) = run_kernel(topi.nn.prelu(x, g), [x, g], [xv, gv])
    check(got, np.where(xv > 0, xv, xv * gv.reshape(sh)))


@pytest.mark.parametrize("axis", [-1, (1, 2)])
@settings(max_examples=5, deadline=None)
@given(n=st.integers(1, 4), m=st.integers(1, 13))
def test_layer_norm(axis, n, m):
    x = te.placeholder((n, m, 5), name="x")
    axes = (2,) if axis == -1 else axis
    pshape = tuple((m, 5)[a - 1] for a in axes)
    g, b = te.placeholder(pshape, name="g"), te.placeholder(pshape, name="b")
    xv, gv, bv = rand((n, m, 5), seed=m), rand(pshape, seed=1), rand(pshape, seed=2)
    (got,) = run_kernel(topi.nn.layer_norm(x, g, b, axis, 1e-5), [x, g, b], [xv, gv, bv])
    x64 = xv.astype("float64")
    mu, var = x64.mean(axis=axes, keepdims=True), x64.var(axis=axes, keepdims=True)
    check(got, (x64 - mu) / np.sqrt(var + 1e-5) * gv + bv, rtol=1e-4, atol=1e-4)


def _bilinear_ref(x, oh, ow, align):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            if align:
                fy = i * (h - 1) / (oh - 1) if oh > 1 else 0.0
                fx = j * (w - 1) / (ow - 1) if ow > 1 else 0.0
            else:
                fy, fx = (i + 0.5) * h / oh - 0.5, (j + 0.5) * w / ow - 0.5
            y0, x0 = math.floor(fy), math.floor(fx)
            dy, dx = fy - y0, fx - x0
            ya, yb = min(max(y0, 0), h - 1), min(max(y0 + 1, 0), h - 1)
            xa, xb = min(max(x0, 0), w - 1), min(max(x0 + 1, 0), w - 1)
            top = x[:, :, ya, xa] * (1 - dx) + x[:, :, ya, xb] * dx
            bot = x[:, :, yb, xa] * (1 - dx) + x[:, :, yb, xb] * dx
            out[:, :, i, j] = top * (1 - dy) + bot * dy
    return out


@pytest.mark.parametrize("method,align", [("nearest_neighbor", False), ("bilinear", False),
                                          ("bilinear", True)])
@pytest.mark.parametrize("scale", [2, 3])
def test_upsampling(method, align, scale):
    x = rand((1, 2, 3, 5))
    X = te.placeholder(x.shape, name="x")
    (got,) = run_kernel(topi.nn.upsampling(X, scale, scale, "NCHW", method, align), [X], [x])
    if method == "nearest_neighbor":
        want = x.repeat(scale, axis=2).repeat(scale, axis=3)
    else:
        want = _bilinear_ref(x.astype("float64"), 3 * scale, 5 * scale, align)
    check(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cip", [False, True])
def test_avg_pool_dilated_window_overhanging_both_ends(cip):
    x = rand((1, 1, 3, 3))
    X = te.placeholder(x.shape, name="x")
    out = topi.nn.pool2d(X, 3, 1, 2, 2, "avg", False, "NCHW", cip)
    (got,) = run_kernel(out, [X], [x])
    xp = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)), constant_values=np.nan)
    want = np.zeros(got.shape)
    for i in range(got.shape[2]):
        for j in range(got.shape[3]):
            win = xp[0, 0, i:i + 5:2, j:j + 5:2]
            want[0, 0, i, j] = np.nansum(win) / (win.size if cip else np.sum(~np.isnan(win)))
    check(got, want, rtol=1e-5, atol=1e-6)
