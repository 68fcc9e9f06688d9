"""The few-output-channel conv kernel (topi/nn/conv2d_fewoc.py, conv_fewoc.h), alone and as
a transposed conv's phase conv writing its output interleaved
(nn.contrib_conv2d_transpose_fewoc), through relay.build, for the host (AVX-512 here: input blocks of 16, outputs of 4 or 8) and a haswell
build (AVX2: input blocks of 8, outputs of 4), against a float64 numpy reference (rtol and
atol 1e-4): transposed convs to 1 and 2 channels (their 4 or 8 phases make the block), to 1
to 3 channels whose 6 to 12 phase channels are padded to one block as wide as the input's, plain
convs to few channels, 1x1 maps, odd sizes, paddings crossing the edges, strides 2 and 4,
dilation, output padding, every epilogue activation; grouped convs and input channels that
are no multiple of the block keep the blocked kernel and must match too. hypothesis draws the
sizes of a transposed conv to one channel."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.op.nn.conv import conv2d_nchw, conv2d_transpose_nchw
from ember.relay.transform import AlterOpLayout, InferType
from cpu_targets import runs_vector_target
from graph_runs import graph_outputs
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")

AVX2 = "llvm -mcpu=x86-64-v3"  # AVX2 + FMA: the flags of the AVX2 kernel tests (shared objects)
TARGETS = ["llvm", AVX2]
ACTS = {"": lambda v: v, "relu": lambda v: np.maximum(v, 0),
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "silu": lambda v: v / (1 + np.exp(-v)),
        "hardswish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
        "clip": lambda v: np.clip(v, -0.5, 0.5), "tanh": np.tanh}


def _act(y, act: str):
    if act == "relu":
        return relay.nn.relu(y)
    if act == "sigmoid":
        return relay.sigmoid(y)
    if act == "silu":
        return relay.multiply(y, relay.sigmoid(y))
    if act == "hardswish":
        return relay.nn.hardswish(y)
    if act == "clip":
        return relay.clip(y, -0.5, 0.5)
    if act == "tanh":
        return relay.tanh(y)
    return y


def _transposed(i, c, oc, h, w, k, s, p, op, d, act, rng):
    x = relay.var(f"x{i}", shape=(1, c, h, w))
    wt = rng.uniform(-1, 1, (c, oc, k, k)).astype("float32")
    bias = rng.uniform(-1, 1, oc).astype("float32")
    s = (s, s) if isinstance(s, int) else s
    y = relay.nn.conv2d_transpose(x, relay.const(wt), strides=s, padding=(p, p),
                                  output_padding=(op, op), channels=oc, kernel_size=(k, k),
                                  dilation=(d, d))
    y = _act(relay.nn.bias_add(y, relay.const(bias)), act)
    data = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    want = conv2d_transpose_nchw(data.astype("float64"), wt.astype("float64"), s,
                                 (p,) * 4, (op, op), (d, d), 1) + bias.reshape(1, -1, 1, 1)
    return x, y, data, ACTS[act](want)


def _plain(i, c, oc, h, w, k, s, p, d, g, act, rng):
    x = relay.var(f"x{i}", shape=(1, c, h, w))
    wt = rng.uniform(-1, 1, (oc, c // g, k, k)).astype("float32")
    bias = rng.uniform(-1, 1, oc).astype("float32")
    y = relay.nn.conv2d(x, relay.const(wt), strides=(s, s), padding=(p, p), dilation=(d, d),
                        groups=g, channels=oc, kernel_size=(k, k))
    y = _act(relay.nn.bias_add(y, relay.const(bias)), act)
    data = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    want = conv2d_nchw(data.astype("float64"), wt.astype("float64"), (s, s), (p,) * 4,
                       (d, d), g) + bias.reshape(1, -1, 1, 1)
    return x, y, data, ACTS[act](want)


# transposed: (channels, out channels, h, w, kernel, stride, padding, output padding,
# dilation, activation)
TRANSPOSED = [
    (64, 1, 9, 11, 2, 2, 0, 0, 1, "sigmoid"),  # DBNet's head: 1x1 phase convs to 4 phases
    (16, 1, 1, 1, 2, 2, 0, 0, 1, "sigmoid"),  # a 1x1 map
    (32, 1, 5, 7, 4, 2, 1, 1, 1, "relu"),  # 2x2 taps per phase, padding, output padding
    (16, 2, 6, 5, 2, 2, 0, 0, 1, "silu"),  # 2 channels: 8 phase channels
    (16, 1, 5, 6, 3, 2, 1, 0, 2, "hardswish"),  # dilated
    (24, 1, 5, 5, 2, 2, 0, 0, 1, "clip"),  # channels no multiple of 16 (of 8: haswell)
    (16, 1, 4, 5, 4, 4, 0, 0, 1, ""),  # stride 4: 16 phases, a whole block
    # phase channels padded to one block as wide as the input's (AVX-512: 9 to 15 of 16;
    # AVX2: 5 to 7 of 8): DCGAN's last layer, 12 of 16; 9 of 16; 6 of 8
    (16, 3, 6, 5, 4, 2, 1, 0, 1, "relu"),
    (16, 1, 3, 4, 5, 3, 1, 2, 1, "sigmoid"),
    (16, 1, 5, 3, 4, (2, 3), 1, 0, 1, ""),
    (16, 3, 5, 6, 4, 2, 1, 0, 1, "tanh"),  # DCGAN's last layer as it is: tanh in the epilogue
]
# plain: (channels, out channels, h, w, kernel, stride, padding, dilation, groups, activation)
PLAIN = [
    (32, 8, 7, 9, 3, 1, 1, 1, 1, "relu"),  # a head to 8 channels: edges in the padding
    (16, 4, 13, 3, 3, 2, 1, 1, 1, "sigmoid"),  # stride 2, a row narrower than a tile
    (48, 8, 1, 1, 1, 1, 0, 1, 1, ""),  # a 1x1 map
    (16, 8, 9, 9, 3, 1, 2, 2, 1, "silu"),  # dilated
    (32, 8, 6, 6, 3, 1, 1, 1, 2, "relu"),  # grouped: the blocked kernel
    (16, 8, 17, 19, 5, 1, 2, 1, 1, ""),  # a 5x5 window, odd sizes
    (16, 3, 9, 7, 3, 1, 1, 1, 1, "tanh"),  # an image head to RGB
]


def _model(rng_seed: int = 0):
    rng = np.random.default_rng(rng_seed)
    parts = [_transposed(i, *c, rng) for i, c in enumerate(TRANSPOSED)]
    parts += [_plain(len(TRANSPOSED) + i, *c, rng) for i, c in enumerate(PLAIN)]
    func = relay.Function([p[0] for p in parts], relay.Tuple([p[1] for p in parts]))
    return ember.IRModule.from_expr(func), [p[2] for p in parts], [p[3] for p in parts]


def _source(mod: ember.IRModule, target: str, monkeypatch) -> str:
    from ember.relay.backend.te_compiler import lower_module

    with ember.transform.PassContext(opt_level=3), monkeypatch.context() as env:
        env.setenv("EMBER_PREFETCH", "0")
        opt, _ = relay.optimize(mod, target)
        return lower_module(opt, ember.target.Target(target))[1].get_source()


@pytest.mark.parametrize("target", TARGETS)
def test_few_output_channel_convs_match_numpy(target):
    if not runs_vector_target(target):
        pytest.skip("the host runs neither AVX-512 nor AVX2")
    mod, inputs, wants = _model()
    cases = TRANSPOSED + PLAIN
    for i, (got, want) in enumerate(zip(graph_outputs(mod, inputs, target), wants, strict=True)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{target}: case {cases[i]}")


@pytest.mark.parametrize("target,entry", [(AVX2, "ember_conv2d_fewoc_x8"),
                                          ("llvm -mcpu=x86-64-v4",
                                           "ember_conv2d_fewoc_x16")])
def test_the_few_output_channel_kernel_is_selected(target, entry, monkeypatch):
    """DBNet's head (4 phases of one channel) takes the kernel at both levels; a conv to a
    full block of the build's lanes does not."""
    rng = np.random.default_rng(0)
    head = _transposed(0, *TRANSPOSED[0], rng)
    mod = ember.IRModule.from_expr(relay.Function([head[0]], head[1]))
    assert entry in _source(mod, target, monkeypatch)
    with ember.transform.PassContext(opt_level=3), ember.target.Target(target):
        planned = AlterOpLayout()(InferType()(mod))
    names = [n.op.name for n in post_order(planned["main"].body) if isinstance(n, Call)]
    # the phase conv writes the interleaved output itself: no interleave pass
    assert "nn.contrib_conv2d_transpose_fewoc" in names
    assert "nn.contrib_conv2d_transpose_interleave" not in names
    lanes = 8 if target == AVX2 else 16
    full = _plain(1, 32, lanes, 8, 8, 3, 1, 1, 1, 1, "relu", rng)
    mod = ember.IRModule.from_expr(relay.Function([full[0]], full[1]))
    assert "ember_conv2d_fewoc" not in _source(mod, target, monkeypatch)


@pytest.mark.parametrize("target,case,channels", [
    ("llvm -mcpu=x86-64-v4", (16, 3, 6, 5, 4, 2, 1, 0, 1, "relu"), 12),  # DCGAN's last
    ("llvm -mcpu=x86-64-v4", (16, 1, 3, 4, 5, 3, 1, 2, 1, "sigmoid"), 9),
    (AVX2, (16, 1, 5, 3, 4, (2, 3), 1, 0, 1, ""), 6)])
def test_padded_phase_channels_take_the_kernel(target, case, channels, monkeypatch):
    """Phase channels that fill no block of 4 or 8 (9 to 15 on AVX-512, 5 to 7 on AVX2) are
    padded to one block of the build's lanes: the kernel writes the real ones interleaved, and
    (where the target runs here) they match numpy: a tile of one pixel (AVX-512's 16 phase
    channels) takes its weights as memory operands, not registers."""
    x, y, data, want = _transposed(0, *case, np.random.default_rng(0))
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    with ember.transform.PassContext(opt_level=3), ember.target.Target(target):
        planned = AlterOpLayout()(InferType()(mod))
    calls = [n for n in post_order(planned["main"].body) if isinstance(n, Call)]
    fewoc = [c for c in calls if c.op.name == "nn.contrib_conv2d_transpose_fewoc"]
    assert len(fewoc) == 1 and fewoc[0].attrs.channels == channels
    assert fewoc[0].attrs.lanes == (8 if target == AVX2 else 16)
    assert "nn.contrib_conv2d_transpose_interleave" not in [c.op.name for c in calls]
    if runs_vector_target(target):
        _assert_builds_to(mod, target, data, want)


def _assert_builds_to(mod, target, data, want):
    np.testing.assert_allclose(graph_outputs(mod, [data], target)[0], want, rtol=1e-4,
                               atol=1e-4)


@st.composite
def heads(draw):
    c = draw(st.sampled_from([8, 16, 32, 40]))
    oc = draw(st.sampled_from([1, 2]))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    k, s = draw(st.integers(1, 4)), draw(st.sampled_from([2, 2, 4]))
    p = draw(st.integers(0, (k - 1) // 2))
    op = draw(st.integers(0, s - 1))
    return c, oc, h, w, k, s, p, op


@settings(max_examples=8, deadline=None)
@given(heads(), st.sampled_from(TARGETS))
def test_transposed_heads_match_numpy(case, target):
    if not runs_vector_target(target):
        return
    c, oc, h, w, k, s, p, op = case
    out = (h - 1) * s - 2 * p + k + op
    if out <= 0:
        return
    x, y, data, want = _transposed(0, c, oc, h, w, k, s, p, op, 1, "sigmoid",
                                   np.random.default_rng(1))
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    _assert_builds_to(mod, target, data, want)


def test_the_interleaving_op_matches_its_numpy_reference():
    """nn.contrib_conv2d_transpose_fewoc's reference (the blocked conv's, interleaved) equals
    the transposed conv it replaces, cropped by an offset and output padding."""
    from ember.relay.op.nn.conv_transpose_nchwc import FewOCAttrs, _fewoc_ref
    from ember.topi.nn.conv2d_nchwc import pack_weight, to_blocked
    from ember.topi.nn.conv2d_transpose import phase_plan, phase_weights

    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 32, 5, 6))
    wt = rng.uniform(-1, 1, (32, 1, 3, 3))
    plan = phase_plan(5, 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 0))
    pw = phase_weights(wt, 1, plan).reshape(4, 32, *plan.taps)
    attrs = FewOCAttrs(padding=plan.padding, lanes=4, in_block=16, strides=plan.strides,
                       offset=plan.offset, out_size=plan.out)
    got = _fewoc_ref(to_blocked(x, 16), pack_weight(pw, 4, 16), np.zeros(4), attrs=attrs)
    want = conv2d_transpose_nchw(x, wt, (2, 2), (1, 1, 1, 1), (1, 0), (1, 1), 1)
    np.testing.assert_allclose(got, want, atol=1e-9)
