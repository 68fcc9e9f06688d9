"""FoldExplicitPadding: a zero pad of the image axes before an NCHW conv2d becomes the conv's
padding (asymmetric too); a pad of another value or mode, of the batch or channels, or before
another op stays; results unchanged (built with and without the pass, against numpy)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.op.nn.conv import conv2d_nchw
from ember.relay.transform import FoldExplicitPadding, InferType
from ember.testing import find_c_compiler

RNG = np.random.default_rng(3)
W = relay.const(RNG.uniform(-1, 1, (4, 3, 3, 3)).astype("float32"))


def _fold(body: relay.Expr, *xs: relay.Var) -> ember.IRModule:
    mod = InferType()(ember.IRModule.from_expr(relay.Function(list(xs), body)))
    with ember.transform.PassContext(opt_level=3):
        return InferType()(FoldExplicitPadding()(mod))


def _calls(mod: ember.IRModule) -> list[Call]:
    return [n for n in post_order(mod["main"].body) if isinstance(n, Call)]


def test_zero_pad_of_the_image_becomes_the_convs_padding():
    x = relay.var("x", shape=(1, 3, 10, 12))
    padded = relay.nn.pad(x, ((0, 0), (0, 0), (0, 2), (1, 2)))
    mod = _fold(relay.nn.conv2d(padded, W, strides=(2, 2), padding=(1, 0, 0, 1)), x)
    (conv,) = _calls(mod)
    assert conv.op.name == "nn.conv2d" and conv.args[0] is mod["main"].params[0]
    assert tuple(conv.attrs.padding) == (1, 1, 2, 3)  # (top, left, bottom, right)


@pytest.mark.parametrize("pad_width, value, mode, why", [
    (((0, 0), (0, 1), (1, 1), (1, 1)), 0.0, "constant", "pads the channels"),
    (((1, 0), (0, 0), (1, 1), (1, 1)), 0.0, "constant", "pads the batch"),
    (((0, 0), (0, 0), (1, 1), (1, 1)), 1.0, "constant", "pads with ones"),
    (((0, 0), (0, 0), (1, 1), (1, 1)), 0.0, "edge", "repeats the edge"),
])
def test_other_pads_stay(pad_width, value, mode, why):
    x = relay.var("x", shape=(1, 3, 10, 12))
    padded = relay.nn.pad(x, pad_width, pad_value=value, pad_mode=mode)
    w = W if pad_width[1] == (0, 0) else relay.const(np.ones((4, 4, 3, 3), "float32"))
    mod = _fold(relay.nn.conv2d(padded, w), x)
    assert [c.op.name for c in _calls(mod)] == ["nn.pad", "nn.conv2d"], why


def test_a_pad_other_ops_read_stays_for_them():
    x = relay.var("x", shape=(1, 3, 10, 12))
    padded = relay.nn.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    mod = _fold(relay.Tuple([relay.nn.conv2d(padded, W), relay.nn.relu(padded)]), x)
    conv = next(c for c in _calls(mod) if c.op.name == "nn.conv2d")
    assert tuple(conv.attrs.padding) == (1, 1, 1, 1)
    assert "nn.pad" in [c.op.name for c in _calls(mod)]


@pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
@pytest.mark.parametrize("pads, strides", [((0, 2, 0, 2), 2), ((1, 0, 2, 1), 1)])
def test_folded_build_matches_numpy(pads, strides):
    top, left, bottom, right = pads
    x = relay.var("x", shape=(2, 3, 11, 9))
    padded = relay.nn.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    body = relay.nn.relu(relay.nn.conv2d(padded, W, strides=(strides, strides)))
    mod = ember.IRModule.from_expr(relay.Function([x], body))
    data = RNG.uniform(-1, 1, (2, 3, 11, 9)).astype("float32")
    want = np.maximum(conv2d_nchw(data, W.data.numpy(), (strides,) * 2, (top, left, bottom,
                                                                        right), (1, 1), 1), 0)
    for disabled in ([], ["FoldExplicitPadding"]):
        with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
            got = ember.compile(mod, threads=1)(data)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
