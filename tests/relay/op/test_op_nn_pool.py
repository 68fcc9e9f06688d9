"""Pooling against naive loops: max/avg (dilation, padding, ceil_mode, count_include_pad),
global and adaptive pooling."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _op_helpers import check, infer
from hypothesis import given, settings
from strategies import pool2d_case

from ember import relay
from ember.ir.types import Any, TensorType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError

RNG = np.random.default_rng(3)


def _out_size(size, k, s, d, pad, ceil_mode):
    span = (k - 1) * d + 1
    return (math.ceil if ceil_mode else math.floor)((size + pad - span) / s) + 1


def naive_pool(x, kind, pool_size, strides, dilation, padding, ceil_mode, count_include_pad):
    """NCHW pooling, one output element at a time, taps checked against the input bounds."""
    n, c, h, w = x.shape
    pt, pl, pb, pr = padding
    oh = _out_size(h, pool_size[0], strides[0], dilation[0], pt + pb, ceil_mode)
    ow = _out_size(w, pool_size[1], strides[1], dilation[1], pl + pr, ceil_mode)
    out = np.zeros((n, c, oh, ow), "float64")
    for y, z in itertools.product(range(oh), range(ow)):
        values, counted = [], 0
        for a, e in itertools.product(range(pool_size[0]), range(pool_size[1])):
            row = y * strides[0] + a * dilation[0] - pt
            col = z * strides[1] + e * dilation[1] - pl
            inside = 0 <= row < h and 0 <= col < w
            in_padding = -pt <= row < h + pb and -pl <= col < w + pr
            if inside:
                values.append(x[:, :, row, col])
            counted += inside or (count_include_pad and in_padding)
        if kind == "max":
            out[:, :, y, z] = np.max(values, axis=0) if values else -np.inf
        else:
            out[:, :, y, z] = np.sum(values, axis=0) / max(counted, 1) if values else 0
    return out


def _nchw(arr, layout):
    return arr if layout == "NCHW" else arr.transpose(0, 3, 1, 2)


@settings(max_examples=40, deadline=None)
@given(pool2d_case(avg=False))
def test_max_pool2d_matches_naive_loops(case):
    x = RNG.standard_normal(case["data"]).astype("float32")
    attrs = case["attrs"]
    out = check("nn.max_pool2d", x, **attrs)
    want = naive_pool(_nchw(x, attrs["layout"]), "max", attrs["pool_size"], attrs["strides"],
                      attrs["dilation"], attrs["padding"], attrs["ceil_mode"], False)
    np.testing.assert_allclose(_nchw(out, attrs["layout"]), want, rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(pool2d_case(avg=True))
def test_avg_pool2d_matches_naive_loops(case):
    x = RNG.standard_normal(case["data"]).astype("float32")
    attrs = case["attrs"]
    out = check("nn.avg_pool2d", x, **attrs)
    want = naive_pool(_nchw(x, attrs["layout"]), "avg", attrs["pool_size"], attrs["strides"],
                      attrs["dilation"], attrs["padding"], attrs["ceil_mode"],
                      attrs["count_include_pad"])
    np.testing.assert_allclose(_nchw(out, attrs["layout"]), want, rtol=1e-5, atol=1e-6)


def test_avg_pool_count_include_pad_hand_checked():
    x = np.ones((1, 1, 2, 2), "float32")
    inc = check("nn.avg_pool2d", x, pool_size=(2, 2), padding=(1, 1), strides=(2, 2),
                count_include_pad=True)
    exc = check("nn.avg_pool2d", x, pool_size=(2, 2), padding=(1, 1), strides=(2, 2))
    np.testing.assert_allclose(inc, np.full((1, 1, 2, 2), 0.25))
    np.testing.assert_allclose(exc, np.ones((1, 1, 2, 2)))


def test_ceil_mode_adds_a_window():
    t = TensorType((1, 1, 6, 6))
    assert infer("nn.max_pool2d", t, pool_size=(3, 3), strides=(2, 2)).shape[2:] == (2, 2)
    assert infer("nn.max_pool2d", t, pool_size=(3, 3), strides=(2, 2),
                 ceil_mode=True).shape[2:] == (3, 3)


def test_pool_dynamic_dims_and_errors():
    assert infer("nn.avg_pool2d", TensorType((Any(), 3, Any(), 8)), pool_size=(2, 2),
                 strides=(2, 2)) == TensorType((Any(), 3, Any(), 4))
    with pytest.raises(TypeInferenceError, match=r"nn.max_pool2d: data must have rank 4 "
                                                  r"\(layout NCHW\), got rank 3"):
        infer("nn.max_pool2d", TensorType((1, 4, 4)))
    with pytest.raises(TypeInferenceError, match="width: the window spans 5"):
        infer("nn.max_pool2d", TensorType((1, 1, 8, 4)), pool_size=(2, 5))
    with pytest.raises(OpAttributeInvalid, match="unsplit H and W"):
        relay.nn.max_pool2d(relay.var("x"), layout="NCHW4h")


def test_global_pools():
    x = RNG.standard_normal((2, 3, 4, 5)).astype("float32")
    np.testing.assert_allclose(check("nn.global_avg_pool2d", x), x.mean(axis=(2, 3),
                                                                        keepdims=True), rtol=1e-6)
    nhwc = x.transpose(0, 2, 3, 1)
    out = check("nn.global_max_pool2d", nhwc, layout="NHWC")
    np.testing.assert_array_equal(out[:, 0, 0, :], x.max(axis=(2, 3)))


def _adaptive_naive(x, oh, ow, fn):
    h, w = x.shape[2:]
    out = np.zeros(x.shape[:2] + (oh, ow), x.dtype)
    for i, j in itertools.product(range(oh), range(ow)):
        r0, r1 = (i * h) // oh, math.ceil((i + 1) * h / oh)
        c0, c1 = (j * w) // ow, math.ceil((j + 1) * w / ow)
        out[:, :, i, j] = fn(x[:, :, r0:r1, c0:c1], axis=(2, 3))
    return out


@pytest.mark.parametrize("out_size", [(1, 1), (2, 3), (3, 3), (5, 7), 2])
def test_adaptive_pools_match_bins(out_size):
    x = RNG.standard_normal((1, 2, 5, 7)).astype("float32")
    oh, ow = (out_size, out_size) if isinstance(out_size, int) else out_size
    avg = check("nn.adaptive_avg_pool2d", x, output_size=out_size)
    np.testing.assert_allclose(avg, _adaptive_naive(x, oh, ow, np.mean), rtol=1e-5)
    mx = check("nn.adaptive_max_pool2d", x, output_size=out_size)
    np.testing.assert_array_equal(mx, _adaptive_naive(x, oh, ow, np.max))
    assert check("nn.adaptive_avg_pool2d", x).shape == x.shape
