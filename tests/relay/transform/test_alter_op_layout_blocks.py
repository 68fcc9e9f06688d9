"""AlterOpLayout on the blocks of exported models: activation ops as conv epilogues (before or
after a residual add), squeeze-and-excitation scales multiplied in NCHW[L]c, and channel
concatenation and split in whole blocks; each planned graph checked for what it holds and,
built, against the build without planning (rtol 1e-4, atol 1e-5)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.testing import exported
from ember.relay.transform import AlterOpLayout, InferType, RecogniseActivations
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
RNG = np.random.default_rng(5)


def _c(*shape: int) -> relay.Constant:
    return relay.const(RNG.uniform(-1, 1, shape).astype("float32"))


def _plan(body: relay.Expr, x: relay.Var) -> ember.IRModule:
    mod = InferType()(ember.IRModule.from_expr(relay.Function([x], body)))
    with ember.transform.PassContext(opt_level=3), ember.target.Target("llvm -mcpu=haswell"):
        return AlterOpLayout()(RecogniseActivations()(mod))


def _calls(mod: ember.IRModule) -> list[Call]:
    return [n for n in post_order(mod["main"].body) if isinstance(n, Call)]


def _names(mod: ember.IRModule) -> list[str]:
    return [c.op.name for c in _calls(mod)]


def _same_as_unplanned(body: relay.Expr, x: relay.Var, shape: tuple[int, ...]) -> None:
    """Built with and without planning, every output of ``body`` (one, or a tuple) agrees."""
    from ember.contrib import graph_executor

    mod = ember.IRModule.from_expr(relay.Function([x], body))
    xv = RNG.uniform(-3, 3, shape).astype("float32")
    outs = []
    for disabled in ([], ["AlterOpLayout"]):
        with ember.transform.PassContext(opt_level=3, disabled_pass=disabled):
            lib = relay.build(mod, "llvm")
        m = graph_executor.GraphModule(lib["default"](ember.cpu()))
        m.set_input("x", xv)
        m.run()
        outs.append([m.get_output(i).numpy() for i in range(m.get_num_outputs())])
    assert len(outs[0]) == len(outs[1]) >= 1
    for i, (planned, unplanned) in enumerate(zip(*outs)):
        np.testing.assert_allclose(planned, unplanned, rtol=1e-4, atol=1e-5,
                                   err_msg=f"output {i}")


ACTS = {  # spelled-out form -> the conv epilogue's activation and parameters
    "hardswish": (exported.hardswish, "hardswish", None),
    "hardsigmoid": (lambda v: exported.hardsigmoid(v, 0.2, 0.5), "hardsigmoid", (0.2, 0.5)),
    "silu": (exported.silu, "silu", None),
    "sigmoid": (relay.sigmoid, "sigmoid", None),
    "mish": (relay.nn.mish, "mish", None),
    "tanh": (relay.tanh, "tanh", None),
    "leaky_relu": (lambda v: relay.nn.leaky_relu(v, 0.125), "leaky_relu", (0.125, 0.0)),
    "gelu_erf": (exported.gelu, "gelu_erf", (0.5, 1 / math.sqrt(2))),
    "gelu_tanh": (exported.gelu_tanh, "gelu_tanh", (0.5, math.sqrt(2 / math.pi))),
}


def _act_after_residual(act: str, x: relay.Var) -> relay.Expr:
    return ACTS[act][0](relay.add(relay.nn.conv2d(x, _c(8, 8, 3, 3), padding=(1, 1)), x))


@pytest.mark.parametrize("act", ACTS)
def test_activation_after_the_residual_is_in_the_epilogue(act):
    _, name, params = ACTS[act]
    x = relay.var("x", shape=(1, 8, 5, 6))
    planned = _plan(_act_after_residual(act, x), x)
    (conv,) = [c for c in _calls(planned) if c.op.name.startswith("nn.contrib_conv2d")]
    assert conv.op.name.endswith("_add") and conv.attrs.activation == name
    assert conv.attrs.act_after_add
    if params is not None:
        np.testing.assert_allclose((conv.attrs.clip_min, conv.attrs.clip_max), params,
                                   rtol=1e-6)
    assert [n for n in _names(planned) if not n.startswith(("nn.contrib", "layout"))] == []


@needs_cc
def test_every_activation_epilogue_computes_what_the_unplanned_build_does():
    # One model holding every activation's block (one output each): two builds, not two per
    # activation; each output is compared on its own.
    x = relay.var("x", shape=(1, 8, 5, 6))
    body = relay.Tuple([_act_after_residual(act, x) for act in ACTS])
    convs = [c for c in _calls(_plan(body, x)) if c.op.name.startswith("nn.contrib_conv2d")]
    assert sorted(c.attrs.activation for c in convs) == sorted(a[1] for a in ACTS.values())
    _same_as_unplanned(body, x, (1, 8, 5, 6))


def test_activation_before_the_residual():
    x = relay.var("x", shape=(1, 8, 5, 6))
    body = relay.add(exported.silu(relay.nn.conv2d(x, _c(8, 8, 1, 1))), x)
    (conv,) = [c for c in _calls(_plan(body, x)) if c.op.name.startswith("nn.contrib_conv2d")]
    assert conv.attrs.activation == "silu" and not conv.attrs.act_after_add


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_after_a_conv1d_is_its_epilogue(approximate):
    # wav2vec2's feature convs: kernel (1, 3), stride 2, then GELU as the exporter spells it;
    # planned, it is one fused conv between the layout transforms, as written out here (16
    # input channels: the blocked template, not the first-conv kernel of 8 or fewer)
    from ember.ir.structural import assert_structural_equal
    from ember.relay.op.nn.conv_nchwc import contrib_conv2d_nchwc_fused
    from ember.topi.nn.conv2d_nchwc import pack_weight

    x = relay.var("x", shape=(1, 16, 1, 9))
    w = RNG.uniform(-1, 1, (8, 16, 1, 3)).astype("float32")
    spelled = exported.gelu if approximate == "none" else exported.gelu_tanh
    planned = _plan(spelled(relay.nn.conv2d(x, relay.const(w), strides=(1, 2))), x)
    act, inner = (("gelu_erf", 1 / math.sqrt(2)) if approximate == "none"
                  else ("gelu_tanh", math.sqrt(2 / math.pi)))
    conv = contrib_conv2d_nchwc_fused(
        relay.layout_transform(x, "NCHW", "NCHW8c"), relay.const(pack_weight(w, 8, 8)),
        relay.const(np.zeros(8, "float32")), strides=(1, 2), lanes=8, in_block=8,
        activation=act, clip_min=0.5, clip_max=inner)
    expected = relay.layout_transform(conv, "NCHW8c", "NCHW")
    expected_mod = InferType()(ember.IRModule.from_expr(relay.Function([x], expected)))
    assert_structural_equal(planned["main"], expected_mod["main"], map_free_vars=True)


def _se_block(x: relay.Expr, channels: int) -> relay.Expr:
    y = exported.hardswish(relay.nn.conv2d(x, _c(channels, 8, 3, 3), padding=(1, 1)))
    s = relay.nn.relu(relay.nn.conv2d(relay.nn.global_avg_pool2d(y), _c(8, channels, 1, 1)))
    s = exported.hardsigmoid(relay.nn.conv2d(s, _c(channels, 8, 1, 1)))
    return relay.nn.conv2d(relay.multiply(y, s), _c(8, channels, 1, 1))


def test_squeeze_excite_scale_is_multiplied_in_the_blocked_layout():
    x = relay.var("x", shape=(1, 8, 6, 6))
    planned = _plan(_se_block(x, 16), x)
    (mul,) = [c for c in _calls(planned) if c.op.name == "multiply"]
    assert [tuple(a.checked_type.shape) for a in mul.args] == [(1, 2, 6, 6, 8), (1, 2, 1, 1, 8)]
    # one transform out, none in (the first conv reads the plain 8-channel input itself)
    assert _names(planned).count("layout_transform") == 1
    if find_c_compiler() is not None:
        _same_as_unplanned(_se_block(x, 16), x, (1, 8, 6, 6))


def test_a_scale_of_another_shape_leaves_the_blocked_layout():
    # (1, C, H, 1) broadcasts over the width only: not a per-channel scale
    x = relay.var("x", shape=(1, 8, 6, 6))
    y = relay.nn.conv2d(x, _c(8, 8, 1, 1))
    row = relay.nn.conv2d(relay.mean(x, axis=[3], keepdims=True), _c(8, 8, 1, 1))
    planned = _plan(relay.multiply(y, row), x)
    (mul,) = [c for c in _calls(planned) if c.op.name == "multiply"]
    assert [len(a.checked_type.shape) for a in mul.args] == [4, 4]


def _c2f(x: relay.Expr) -> relay.Expr:
    """Ultralytics' C2f: conv, split in two, a conv on the second half, concat, conv."""
    y = relay.nn.conv2d(x, _c(16, 8, 1, 1))
    a, b = relay.split(y, 2, axis=1)
    c = exported.silu(relay.nn.conv2d(b, _c(8, 8, 3, 3), padding=(1, 1)))
    return relay.nn.conv2d(relay.concatenate([a, b, c], axis=1), _c(8, 24, 1, 1))


def test_channel_split_and_concat_stay_blocked():
    x = relay.var("x", shape=(1, 8, 5, 5))
    planned = _plan(_c2f(x), x)
    names = _names(planned)
    assert "split" not in names and names.count("strided_slice") == 2
    (cat,) = [c for c in _calls(planned) if c.op.name == "concatenate"]
    assert tuple(cat.checked_type.shape) == (1, 3, 5, 5, 8)
    assert names.count("layout_transform") == 2  # the input (a whole block) and the result
    if find_c_compiler() is not None:
        _same_as_unplanned(_c2f(x), x, (1, 8, 5, 5))


def test_parts_that_are_not_whole_blocks_are_joined_in_nchw():
    x = relay.var("x", shape=(1, 8, 5, 5))
    y = relay.nn.conv2d(x, _c(16, 8, 1, 1))
    a, b = relay.split(y, [4], axis=1)  # 4 and 12 channels: not blocks of 8
    planned = _plan(relay.concatenate([b, a], axis=1), x)
    assert "split" in _names(planned) and "strided_slice" not in _names(planned)
    (cat,) = [c for c in _calls(planned) if c.op.name == "concatenate"]
    assert len(cat.checked_type.shape) == 4


def test_concat_along_another_axis_is_left_in_nchw():
    x = relay.var("x", shape=(1, 8, 5, 5))
    y = relay.nn.conv2d(x, _c(8, 8, 1, 1))
    planned = _plan(relay.concatenate([y, y], axis=2), x)
    (cat,) = [c for c in _calls(planned) if c.op.name == "concatenate"]
    assert tuple(cat.checked_type.shape) == (1, 8, 10, 5)


def _conv_norm_conv(x: relay.Var, mid: int, axis: int, affine: bool) -> relay.Expr:
    """conv, layer_norm over ``axis`` (with gamma/beta along it when ``affine``), GELU, conv:
    wav2vec2's first feature conv and its GroupNorm of one channel per group."""
    y = relay.nn.conv2d(x, _c(mid, 8, 1, 3), strides=(1, 2))  # (1, mid, 3, 20) of x (1, 8, 3, 41)
    size = (1, mid, 3, 20)[axis]
    y = relay.nn.layer_norm(y, _c(size), _c(size), axis=axis, center=affine, scale=affine)
    return relay.nn.conv2d(relay.nn.gelu(y), _c(8, mid, 1, 2), strides=(1, 2))


@pytest.mark.parametrize("axis,affine", [(-1, False), (3, True), (2, True)])
def test_layer_norm_over_the_image_stays_blocked(axis, affine):
    x = relay.var("x", shape=(1, 8, 3, 41))
    planned = _plan(_conv_norm_conv(x, 16, axis, affine), x)
    (norm,) = [c for c in _calls(planned) if c.op.name == "nn.layer_norm"]
    assert tuple(norm.args[0].checked_type.shape) == (1, 2, 3, 20, 8)
    assert norm.attrs.axis == axis % 4
    # one transform out, none around the norm, none in (the first conv reads the plain
    # 8-channel input itself)
    assert _names(planned).count("layout_transform") == 1
    if find_c_compiler() is not None:
        _same_as_unplanned(_conv_norm_conv(x, 16, axis, affine), x, (1, 8, 3, 41))


def test_layer_norm_over_the_channels_or_of_padded_channels_leaves_the_blocked_layout():
    x = relay.var("x", shape=(1, 8, 3, 41))
    planned = _plan(_conv_norm_conv(x, 16, 1, True), x)
    (norm,) = [c for c in _calls(planned) if c.op.name == "nn.layer_norm"]
    assert len(norm.args[0].checked_type.shape) == 4
    # 17 channels: a padded block (zero lanes that beta would make nonzero) goes plain
    planned = _plan(_conv_norm_conv(x, 17, -1, True), x)
    (norm,) = [c for c in _calls(planned) if c.op.name == "nn.layer_norm"]
    assert len(norm.args[0].checked_type.shape) == 4
    if find_c_compiler() is not None:
        _same_as_unplanned(_conv_norm_conv(x, 17, -1, True), x, (1, 8, 3, 41))


@pytest.mark.parametrize("channels", [12, 15])
def test_a_few_plain_input_channels_are_read_as_one_block(channels):
    """A conv of a plain input of up to 15 channels (YOLOv5's Focus: 4 strided slices of RGB,
    12 channels; RGB itself often goes to the plain-input kernel) at stride 1 reads it as one
    block of all its channels (each kernel row kw * channels neighbouring floats) after one
    transform; the result is the unplanned build's."""
    x = relay.var("x", shape=(1, channels, 11, 13))
    y = relay.nn.relu(relay.nn.conv2d(x, _c(16, channels, 3, 3), padding=(1, 1)))
    conv = next(c for c in _calls(_plan(y, x)) if c.op.name.startswith("nn.contrib_conv2d"))
    assert conv.attrs.in_block == channels
    if find_c_compiler() is not None:
        _same_as_unplanned(y, x, (1, channels, 11, 13))


def _same_pad_pool(x: relay.Var, channels: int, mode: str = "constant", k: int = 1) -> relay.Expr:
    """EfficientDet's down-sampling as exporters write TF's SAME: a k x k conv, an explicit
    Pad of the bottom and right, a 3x3 / 2 max pool."""
    y = relay.nn.conv2d(x, _c(channels, 16, k, k), padding=(k // 2, k // 2))
    y = relay.nn.pad(y, ((0, 0), (0, 0), (0, 1), (0, 1)), pad_value=0.0, pad_mode=mode)
    return relay.nn.max_pool2d(y, (3, 3), (2, 2))


def test_image_pad_of_a_blocked_value_stays_blocked():
    # 16 channels (two blocks of 8), and 10 (a 3x3 conv padded to 16, the pool read by a
    # conv: padded on the way): the pad runs in NCHW8c with the lanes not padded, and the
    # pool after it reads the blocked result
    x = relay.var("x", shape=(1, 16, 33, 33))
    for channels, k in ((16, 1), (10, 3)):
        y = _same_pad_pool(x, channels, k=k)
        mod = _plan(y if k == 1 else relay.nn.conv2d(y, _c(8, channels, 3, 3)), x)
        names = _names(mod)
        pad = next(c for c in _calls(mod) if c.op.name == "nn.pad")
        assert [tuple(p) for p in pad.attrs.pad_width] == [(0, 0), (0, 0), (0, 1), (0, 1), (0, 0)]
        assert names.count("layout_transform") == 2, names  # the input in, the result out
        pool = next(c for c in _calls(mod) if c.op.name == "nn.max_pool2d")
        assert pool.args[0] is pad and pool.attrs.layout == "NCHW8c"
    # a pad of the channels leaves the blocked layout
    y = relay.nn.pad(relay.nn.conv2d(x, _c(16, 16, 1, 1)), ((0, 0), (0, 8), (0, 0), (0, 0)))
    pad = next(c for c in _calls(_plan(y, x)) if c.op.name == "nn.pad")
    assert len(pad.attrs.pad_width) == 4


@needs_cc
@pytest.mark.parametrize("channels, mode, k", [(16, "constant", 1), (10, "constant", 3),
                                               (24, "edge", 1)])
def test_blocked_image_pad_computes_what_the_unplanned_build_does(channels, mode, k):
    x = relay.var("x", shape=(2, 16, 17, 10))
    _same_as_unplanned(_same_pad_pool(x, channels, mode, k), x, (2, 16, 17, 10))


@pytest.mark.parametrize("keepdims", [False, True])
def test_image_mean_of_a_blocked_value_is_a_blocked_pool(keepdims):
    """``mean`` over H and W (torchvision's ShuffleNetV2 head) of a conv's blocked result: the
    blocked pool with the image as its window, not a transform of the whole map to NCHW;
    kept axes stay blocked (an SE scale then multiplies the map blocked)."""
    x = relay.var("x", shape=(1, 16, 7, 9))
    y = relay.nn.relu(relay.nn.conv2d(x, _c(32, 16, 1, 1)))
    mod = _plan(relay.mean(y, axis=[2, 3], keepdims=keepdims), x)
    pool = next(c for c in _calls(mod) if c.op.name == "nn.avg_pool2d")
    assert pool.attrs.layout == "NCHW8c" and tuple(pool.attrs.pool_size) == (7, 9)
    assert "mean" not in _names(mod)
    assert _names(mod)[-1] == ("layout_transform" if keepdims else "squeeze")


@needs_cc
@pytest.mark.parametrize("channels", [32, 58])  # 58: padded to 64 for the convs
@pytest.mark.parametrize("keepdims", [False, True])
def test_image_mean_matches_the_unplanned_build(channels, keepdims):
    x = relay.var("x", shape=(3, 16, 5, 7))
    y = relay.nn.relu(relay.nn.conv2d(x, _c(channels, 16, 3, 3), padding=(1, 1)))
    y = relay.nn.conv2d(y, _c(channels, 1, 3, 3), padding=(1, 1), groups=channels)
    m = relay.mean(y, axis=[-1, -2], keepdims=keepdims)
    _same_as_unplanned(relay.Tuple([m, relay.mean(y, axis=[1])]), x, (3, 16, 5, 7))
