"""nn.conv2d and nn.conv2d_transpose against naive loop implementations."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from _op_helpers import check, infer
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import conv2d_case

from ember import relay
from ember.ir.types import Any, ShapeVar, TensorType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError

RNG = np.random.default_rng(7)


def naive_conv2d(x, w, strides, padding, dilation, groups):
    """Direct definition: NCHW data, OIHW weight, one output element at a time."""
    n, _, h, wd = x.shape
    o, i, kh, kw = w.shape
    pt, pl, pb, pr = padding
    oh = (h + pt + pb - (kh - 1) * dilation[0] - 1) // strides[0] + 1
    ow = (wd + pl + pr - (kw - 1) * dilation[1] - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow), "float64")
    per_group = o // groups
    for b, oc, y, z in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // per_group
        for ic, a, e in itertools.product(range(i), range(kh), range(kw)):
            row = y * strides[0] + a * dilation[0] - pt
            col = z * strides[1] + e * dilation[1] - pl
            if 0 <= row < h and 0 <= col < wd:
                out[b, oc, y, z] += x[b, g * i + ic, row, col] * w[oc, ic, a, e]
    return out


def _to(arr, src, dst):
    return arr.transpose([src.index(a) for a in dst])


@settings(max_examples=40, deadline=None)
@given(conv2d_case())
def test_conv2d_matches_naive_loops(case):
    attrs = case["attrs"]
    x = RNG.standard_normal(case["data"]).astype("float32")
    w = RNG.standard_normal(case["weight"]).astype("float32")
    out = check("nn.conv2d", x, w, **attrs)
    want = naive_conv2d(_to(x, attrs["data_layout"], "NCHW"),
                        _to(w, attrs["kernel_layout"], "OIHW"),
                        attrs["strides"], attrs["padding"], attrs["dilation"], attrs["groups"])
    np.testing.assert_allclose(_to(out, attrs["data_layout"], "NCHW"), want, rtol=1e-4, atol=1e-4)


def test_depthwise_conv2d_with_multiplier():
    x = RNG.standard_normal((1, 3, 5, 5)).astype("float32")
    w = RNG.standard_normal((6, 1, 3, 3)).astype("float32")  # multiplier 2
    out = check("nn.conv2d", x, w, groups=3, padding=(1, 1))
    np.testing.assert_allclose(out, naive_conv2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 3),
                               rtol=1e-5, atol=1e-5)


def test_int8_conv_accumulates_in_out_dtype():
    x = np.full((1, 4, 3, 3), 100, "int8")
    w = np.full((1, 4, 3, 3), 100, "int8")
    out = check("nn.conv2d", x, w, out_dtype="int32")
    assert out.dtype == np.int32 and out.item() == 100 * 100 * 36


def test_out_layout_and_api_defaults():
    x = RNG.standard_normal((1, 2, 4, 4)).astype("float32")
    w = RNG.standard_normal((3, 2, 1, 1)).astype("float32")
    out = check("nn.conv2d", x, w, out_layout="NHWC")
    assert out.shape == (1, 4, 4, 3)
    call = relay.nn.conv2d(relay.var("x"), relay.var("w"), padding=1, strides=2)
    assert call.attrs.padding == (1, 1, 1, 1) and call.attrs.strides == (2, 2)
    assert relay.nn.conv2d(relay.var("x"), relay.var("w"), padding=(1, 2)).attrs.padding == \
        (1, 2, 1, 2)


def test_conv2d_with_dynamic_dims():
    n = ShapeVar("n")
    out = infer("nn.conv2d", TensorType((n, 3, Any(), 8)), TensorType((4, 3, 3, 3)))
    assert out.shape[0] is n and out.shape[1:] == (4, Any(), 6)
    out = infer("nn.conv2d", TensorType((1, Any(), 8, 8)), TensorType((4, 3, 3, 3)))
    assert out == TensorType((1, 4, 6, 6))


@pytest.mark.parametrize("data, weight, kw, message", [
    ((1, 3, 8, 8), (4, 4, 3, 3), {}, (r"nn.conv2d: data has 3 channels but weight expects 4 "
                                     r"\(layout NCHW, kernel_layout OIHW, groups=1\)")),
    ((1, 3, 8), (4, 3, 3, 3), {}, r"data must have rank 4 \(layout NCHW\), got rank 3"),
    ((1, 4, 8, 8), (3, 2, 3, 3), {"groups": 2}, "weight has 3 output channels, which groups=2"),
    ((1, 3, 2, 2), (4, 3, 3, 3), {}, "height: the window spans 3"),
    ((1, 3, 8, 8), (4, 3, 3, 3), {"channels": 5}, "channels=5 but the weight gives 4"),
    ((1, 3, 8, 8), (4, 3, 3, 3), {"kernel_size": 5}, r"kernel_size=\(5, 5\)"),
])
def test_conv2d_errors(data, weight, kw, message):
    with pytest.raises(TypeInferenceError, match=message):
        infer("nn.conv2d", TensorType(data), TensorType(weight), **kw)


def test_conv2d_bad_attrs():
    x, w = relay.var("x"), relay.var("w")
    with pytest.raises(OpAttributeInvalid, match="nn.conv2d: attribute data_layout must be"):
        relay.nn.conv2d(x, w, data_layout="NCHW4c")
    with pytest.raises(OpAttributeInvalid, match="padding must be a tuple of 1 or 2 or 4"):
        relay.nn.conv2d(x, w, padding=(1, 2, 3))
    with pytest.raises(OpAttributeInvalid, match="attribute strides must be positive"):
        relay.nn.conv2d(x, w, strides=(0, 1))


# ---------------------------------------------------------------- conv2d_transpose
def naive_conv2d_transpose(x, w, strides, padding, output_padding, dilation, groups):
    """Scatter definition: NCHW data, IOHW weight."""
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    pt, pl, pb, pr = padding
    oh = (h - 1) * strides[0] - pt - pb + (kh - 1) * dilation[0] + 1 + output_padding[0]
    ow = (wd - 1) * strides[1] - pl - pr + (kw - 1) * dilation[1] + 1 + output_padding[1]
    out = np.zeros((n, o * groups, oh, ow), "float64")
    cg = c // groups
    for b, ic, y, z, oc, a, e in itertools.product(range(n), range(c), range(h), range(wd),
                                                   range(o), range(kh), range(kw)):
        row = y * strides[0] + a * dilation[0] - pt
        col = z * strides[1] + e * dilation[1] - pl
        if 0 <= row < oh and 0 <= col < ow:
            out[b, (ic // cg) * o + oc, row, col] += x[b, ic, y, z] * w[ic, oc, a, e]
    return out


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_conv2d_transpose_matches_naive_scatter(data):
    groups = data.draw(st.sampled_from([1, 2]))
    c, o = groups * data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    k = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    s = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    d = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    pad = tuple(data.draw(st.integers(0, k[i % 2] - 1)) for i in range(4))
    out_pad = tuple(data.draw(st.integers(0, s[i] - 1)) for i in range(2))
    x = RNG.standard_normal((1, c, data.draw(st.integers(1, 4)), 3)).astype("float32")
    for i in range(2):  # the padding must leave a non-empty output
        assume((x.shape[2 + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 > pad[i] + pad[i + 2])
    w = RNG.standard_normal((c, o, *k)).astype("float32")
    attrs = {"strides": s, "padding": pad, "output_padding": out_pad, "dilation": d,
             "groups": groups}
    out = check("nn.conv2d_transpose", x, w, **attrs)
    want = naive_conv2d_transpose(x, w, s, pad, out_pad, d, groups)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_conv2d_transpose_shape_and_errors():
    out = infer("nn.conv2d_transpose", TensorType((1, 4, 5, 5)), TensorType((4, 2, 3, 3)),
                strides=(2, 2), padding=(1, 1), output_padding=(1, 1))
    assert out == TensorType((1, 2, 10, 10))
    with pytest.raises(TypeInferenceError, match="data has 3 channels but weight expects 4"):
        infer("nn.conv2d_transpose", TensorType((1, 3, 5, 5)), TensorType((4, 2, 3, 3)))
    assert relay.nn.conv2d_transpose(relay.var("x"), relay.var("w")).attrs.kernel_layout == "IOHW"
