"""FoldScaleAxis: per-channel scales fold into conv2d/dense weights in both directions, for
NCHW/OIHW, NHWC/HWIO, depthwise (HWOI) and grouped convolutions; unsafe cases are left;
results are kept."""
from __future__ import annotations

import numpy as np
import pytest
from _pass_helpers import assert_same_result, run
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir import IRModule
from ember.relay.transform import (
    BackwardFoldScaleAxis,
    FoldConstant,
    FoldScaleAxis,
    ForwardFoldScaleAxis,
    InferType,
    SimplifyInference,
)


def _ops(mod):
    return [e.op.name for e in ember.ir.post_order(mod["main"])
            if isinstance(e, relay.Call) and isinstance(e.op, relay.op.Op)]


def _mod(body, x):
    return InferType()(IRModule.from_expr(relay.Function([x], body)))


def _check(mod, x_shape, expect_ops, seed=0):
    out = run(FoldScaleAxis(), mod)
    assert _ops(out) == expect_ops, out.astext(show_meta_data=False)
    xv = np.random.default_rng(seed).normal(size=x_shape).astype("float32")
    assert_same_result(mod, out, xv, rtol=1e-4, atol=1e-4)
    return out


def _c(rng, *shape, low=0.5, high=2.0):
    return relay.const(rng.uniform(low, high, shape).astype("float32"))


# (data layout, kernel layout, data shape, weight shape, groups, scale shape)
LAYOUTS = [
    ("NCHW", "OIHW", (1, 4, 5, 5), (6, 4, 3, 3), 1, (6, 1, 1)),
    ("NHWC", "HWIO", (1, 5, 5, 4), (3, 3, 4, 6), 1, (6,)),
    ("NCHW", "OIHW", (1, 4, 5, 5), (8, 1, 3, 3), 4, (8, 1, 1)),   # depthwise, multiplier 2
    ("NHWC", "HWOI", (1, 5, 5, 4), (3, 3, 4, 1), 4, (4,)),        # depthwise NHWC
    ("NCHW", "OIHW", (1, 4, 5, 5), (6, 2, 3, 3), 2, (1, 6, 1, 1)),  # grouped
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda p: f"{p[0]}-{p[1]}-g{p[4]}")
def test_backward_through_bias_into_weights(layout):
    dl, kl, xs, ws, groups, ss = layout
    rng = np.random.default_rng(1)
    x = relay.var("x", shape=xs)
    y = relay.nn.conv2d(x, _c(rng, *ws), padding=(1, 1), groups=groups, data_layout=dl,
                        kernel_layout=kl)
    c_axis = dl.index("C")
    y = relay.nn.bias_add(y, _c(rng, ws[kl.index("O")]),
                          axis=c_axis)
    y = relay.nn.relu(relay.multiply(y, _c(rng, *ss)))
    _check(_mod(y, x), xs, ["nn.conv2d", "nn.bias_add", "nn.relu"])


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda p: f"{p[0]}-{p[1]}-g{p[4]}")
def test_forward_through_add_and_relu_into_weights(layout):
    dl, kl, xs, ws, groups, _ = layout
    rng = np.random.default_rng(2)
    c = xs[dl.index("C")]
    vec_shape = (c, 1, 1) if dl == "NCHW" else (c,)
    x = relay.var("x", shape=xs)
    y = relay.nn.relu(relay.add(relay.multiply(x, _c(rng, *vec_shape)),
                                _c(rng, *vec_shape, low=-1, high=1)))
    y = relay.nn.conv2d(y, _c(rng, *ws), padding=(1, 1), groups=groups, data_layout=dl,
                        kernel_layout=kl)
    _check(_mod(y, x), xs, ["add", "nn.relu", "nn.conv2d"])


def test_conv_batch_norm_relu_becomes_conv_add_relu():
    rng = np.random.default_rng(3)
    x = relay.var("x", shape=(1, 3, 6, 6))
    y = relay.nn.conv2d(x, _c(rng, 4, 3, 3, 3), padding=(1, 1))
    y = relay.nn.relu(relay.nn.batch_norm(y, *[_c(rng, 4) for _ in range(4)])[0])
    mod = _mod(y, x)
    simplified = run(FoldConstant(), run(SimplifyInference(), mod))
    out = run(FoldScaleAxis(), simplified)
    assert _ops(out) == ["nn.conv2d", "add", "nn.relu"]
    assert_same_result(mod, out, rng.normal(size=(1, 3, 6, 6)).astype("float32"), rtol=1e-4,
                       atol=1e-4)


def test_dense_both_directions():
    rng = np.random.default_rng(4)
    x = relay.var("x", shape=(2, 5))
    h = relay.nn.dense(relay.multiply(x, _c(rng, 5)), _c(rng, 3, 5))
    y = relay.multiply(relay.add(h, _c(rng, 3)), _c(rng, 3))
    _check(_mod(y, x), (2, 5), ["nn.dense", "add"])


def test_unsafe_or_shared_cases_are_left():
    rng = np.random.default_rng(5)
    x = relay.var("x", shape=(1, 2, 4, 4))
    w = _c(rng, 2, 2, 3, 3)
    neg = relay.const(np.array([-1.0, 2.0], "float32").reshape(2, 1, 1))
    # relu between conv and a scale with a negative entry
    y1 = relay.multiply(relay.nn.relu(relay.nn.conv2d(x, w)), neg)
    # a conv result used twice
    conv = relay.nn.conv2d(x, w)
    y2 = relay.add(relay.multiply(conv, _c(rng, 2, 1, 1)), conv)
    # a scale that varies along a spatial axis
    y3 = relay.multiply(relay.nn.conv2d(x, w), _c(rng, 1, 2, 2))
    # a scale that is not a constant
    s = relay.var("s", shape=(2, 1, 1))
    for y, params in ((y1, [x]), (y2, [x]), (y3, [x]), (relay.multiply(conv, s), [x, s])):
        mod = InferType()(IRModule.from_expr(relay.Function(params, y)))
        out = run(FoldScaleAxis(), mod)
        assert _ops(out) == _ops(mod)


def test_pass_names_and_levels():
    for p in (FoldScaleAxis(), ForwardFoldScaleAxis(), BackwardFoldScaleAxis()):
        assert p.opt_level == 3
    assert ember.transform.get_pass("fold-scale-axis").name == "FoldScaleAxis"


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(LAYOUTS), st.integers(0, 1000), st.booleans())
def test_law_random_weights(layout, seed, backward):
    dl, kl, xs, ws, groups, ss = layout
    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=xs)
    c = xs[dl.index("C")]
    vec = (c, 1, 1) if dl == "NCHW" else (c,)
    data = x if backward else relay.multiply(x, _c(rng, *vec, low=-2, high=2))
    y = relay.nn.conv2d(data, _c(rng, *ws, low=-1, high=1), padding=(1, 1), groups=groups,
                        data_layout=dl, kernel_layout=kl)
    if backward:
        y = relay.multiply(y, _c(rng, *ss, low=-2, high=2))
    mod = _mod(y, x)
    out = run(FoldScaleAxis(), mod)
    assert "multiply" not in _ops(out)
    assert_same_result(mod, out, rng.normal(size=xs).astype("float32"), rtol=1e-4, atol=1e-4)


def _named(name: str, call):
    return relay.Call(call.op, call.args, call.attrs, span=ember.ir.node_span(name))


def _names_by_op(mod) -> dict[str, tuple[str, ...]]:
    return {e.op.name: e.span.node_names for e in ember.ir.post_order(mod["main"])
            if isinstance(e, relay.Call) and isinstance(e.op, relay.op.Op) and
            e.span is not None}


@pytest.mark.parametrize("backward", [False, True])
def test_folded_chains_keep_their_onnx_node_names(backward):
    # a profile names every kernel's ONNX nodes: the relu and add rebuilt around a folded
    # scale keep theirs, and the conv also names the multiply (a batch norm) it absorbed
    rng = np.random.default_rng(4)
    x = relay.var("x", shape=(1, 4, 5, 5))
    scale = _named("node_Mul", relay.multiply(x, _c(rng, 4, 1, 1)))
    if backward:
        y = _named("node_Conv", relay.nn.conv2d(x, _c(rng, 4, 4, 3, 3), padding=(1, 1)))
        y = _named("node_Relu", relay.nn.relu(_named("node_Add", relay.add(
            y, _c(rng, 4, 1, 1, low=-1, high=1)))))
        y = _named("node_Mul", relay.multiply(y, _c(rng, 4, 1, 1)))
    else:
        y = _named("node_Relu", relay.nn.relu(_named("node_Add", relay.add(
            scale, _c(rng, 4, 1, 1, low=-1, high=1)))))
        y = _named("node_Conv", relay.nn.conv2d(y, _c(rng, 4, 4, 3, 3), padding=(1, 1)))
    out = run(FoldScaleAxis(), _mod(y, x))
    names = _names_by_op(out)
    assert "multiply" not in names  # folded into the weights
    assert "node_Relu" in names["nn.relu"] and "node_Add" in names["add"]
    assert "node_Conv" in names["nn.conv2d"] and "node_Mul" in names["nn.conv2d"]
