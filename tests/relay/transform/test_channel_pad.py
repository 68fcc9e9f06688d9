"""AlterOpLayout on convs whose channel counts do not split into NCHW8c blocks (150 classes,
a 255-channel YOLO head, 21, 2, 3-channel inputs): the weight and bias padded with zero
output channels, the padded lanes dropped by a slice after the transform back, a padded
result read blocked by the next conv (zero input channels in its weight); and the cases that
stay plain (1x1 to 1 channel, grouped). Numerics: one ONNX model holding every case (batch 1
and 3, odd maps, groups), built padded and unpadded, against onnxruntime."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.op.nn.conv import conv2d_nchw
from ember.relay.transform import AlterOpLayout, InferType
from ember.relay.transform.channel_pad import pad_axis, pad_output, pads_over_half_blocks
from ember.runtime.errors import OpAttributeInvalid
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
RNG = np.random.default_rng(21)


def _c(*shape: int) -> relay.Constant:
    return relay.const(RNG.uniform(-1, 1, shape).astype("float32"))


def _plan(body: relay.Expr, *xs: relay.Var, cpu: str = "haswell", **config) -> ember.IRModule:
    mod = InferType()(ember.IRModule.from_expr(relay.Function(list(xs), body)))
    cfg = {f"relay.AlterOpLayout.{k}": v for k, v in config.items()}
    with ember.transform.PassContext(opt_level=3, config=cfg), \
            ember.target.Target(f"llvm -mcpu={cpu}"):
        return AlterOpLayout()(mod)


def _calls(mod: ember.IRModule) -> list[Call]:
    return [n for n in post_order(mod["main"].body) if isinstance(n, Call)]


def _names(mod: ember.IRModule) -> list[str]:
    return [c.op.name for c in _calls(mod)]


def test_output_channels_padded_to_blocks_and_sliced_back():
    x = relay.var("x", shape=(1, 16, 9, 11))
    bias = RNG.uniform(-1, 1, (150, 1, 1)).astype("float32")
    y = relay.nn.relu(relay.add(relay.nn.conv2d(x, _c(150, 16, 3, 3), padding=(1, 1)),
                                relay.const(bias)))
    mod = _plan(y, x)
    assert _names(mod) == ["layout_transform", "nn.contrib_conv2d_NCHWc_fused",
                           "layout_transform", "strided_slice"]
    conv, _, sliced = _calls(mod)[1:]
    w, b = (a.data.numpy() for a in conv.args[1:3])
    assert w.shape == (19, 2, 3, 3, 8, 8) and b.shape == (152,)  # 150 -> 19 blocks of 8
    assert conv.attrs.activation == "relu"
    np.testing.assert_array_equal(b[:150], bias.reshape(-1))
    assert not w[18, ..., 6:].any() and not b[150:].any()  # the padded lanes: zeros
    assert list(sliced.attrs.end) == [150] and list(sliced.attrs.axes) == [1]
    assert tuple(sliced.checked_type.shape) == (1, 150, 9, 11)


def test_padded_result_feeds_the_next_conv_blocked():
    x = relay.var("x", shape=(1, 16, 9, 11))
    a = relay.nn.relu(relay.nn.conv2d(x, _c(21, 16, 1, 1)))
    b = relay.nn.conv2d(a, _c(8, 21, 3, 3), padding=(1, 1))
    mod = _plan(b, x)
    assert _names(mod) == ["layout_transform", "nn.contrib_conv2d_NCHWc_fused",
                           "nn.contrib_conv2d_NCHWc_fused", "layout_transform"]
    first, second = _calls(mod)[1:3]
    assert second.args[0] is first  # no transform in between
    w = second.args[1].data.numpy()
    assert w.shape == (1, 3, 3, 3, 8, 8)  # 21 input channels read as 3 blocks of 8
    assert not w[:, 2, :, :, 5:, :].any()  # zero weights for the 3 padded input lanes


def test_cheap_conv_padded_when_a_conv_reads_it_through_its_epilogue():
    x = relay.var("x", shape=(1, 16, 9, 11))
    a = relay.nn.conv2d(x, _c(255, 16, 1, 1))
    a = relay.nn.relu(relay.add(a, _c(255, 1, 1)))
    grouped = relay.nn.conv2d(relay.nn.conv2d(x, _c(255, 16, 1, 1)), _c(15, 17, 1, 1),
                              groups=15)  # a grouped reader does not count
    mod = _plan(relay.Tuple([relay.nn.conv2d(a, _c(8, 255, 1, 1)), grouped]), x)
    names = _names(mod)
    assert names.count("nn.contrib_conv2d_NCHWc_fused") == 2 and "strided_slice" not in names
    assert names.count("nn.conv2d") == 2
    fused = [c for c in _calls(mod) if c.op.name == "nn.contrib_conv2d_NCHWc_fused"]
    assert fused[0].attrs.activation == "relu" and fused[1].args[0] is fused[0]


def _shuffle_branch(x: relay.Var, c: int) -> tuple[relay.Expr, list[np.ndarray]]:
    """ShuffleNetV2's branch on ``c`` channels: 1x1 + relu, depthwise 3x3, 1x1 + relu."""
    w = [RNG.uniform(-1, 1, s).astype("float32") for s in ((c, c, 1, 1), (c, 1, 3, 3),
                                                          (c, c, 1, 1))]
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(w[0])))
    y = relay.nn.conv2d(y, relay.const(w[1]), padding=(1, 1), groups=c)
    return relay.nn.relu(relay.nn.conv2d(y, relay.const(w[2]))), w


def test_depthwise_conv_between_padded_convs_stays_padded():
    """58 channels (ShuffleNetV2's branch): the 1x1 conv is padded because a depthwise conv
    reads it, the depthwise conv reads its padded blocks as they are (each padded lane a
    group of zero weights), and the next 1x1 reads the depthwise result blocked: one
    transform, back at the end. The first conv reads its plain input zero-padded into blocks
    (a block per tap, not a channel per tap)."""
    x = relay.var("x", shape=(1, 58, 7, 9))
    mod = _plan(_shuffle_branch(x, 58)[0], x)
    assert _names(mod) == ["nn.pad", "layout_transform", *["nn.contrib_conv2d_NCHWc_fused"] * 3,
                           "layout_transform", "strided_slice"]
    pad, into, first, dw, last = _calls(mod)[:5]
    assert first.args[0] is into and dw.args[0] is first and last.args[0] is dw
    assert first.attrs.in_block == 8 and first.args[1].data.shape == (8, 8, 1, 1, 8, 8)
    assert not first.args[1].data.numpy()[:, 7, :, :, 2:, :].any()  # input lanes 58..63
    assert dw.attrs.groups == 64 and dw.attrs.lanes == 8
    assert not dw.args[1].data.numpy()[7, ..., 2:].any()  # lanes 58..63: zero weights


def test_half_blocks_padded_to_whole_ones_for_few_taps():
    """232 channels on AVX-512 (ShuffleNetV2's last stage) split into blocks of 8, not 16: a
    1x1 conv is padded to 240 in NCHW16c (a thirtieth more lanes, at twice the vector width)
    however few taps it sums, and the depthwise conv reading it takes the padded blocks as they
    are instead of converting them to NCHW8c; 24 channels (a third more) keep their half
    blocks."""
    x = relay.var("x", shape=(1, 232, 7, 9))
    mod = _plan(_shuffle_branch(x, 232)[0], x, cpu="skylake-avx512")
    first, dw, last = [c for c in _calls(mod) if c.op.name == "nn.contrib_conv2d_NCHWc_fused"]
    assert (first.attrs.in_block, first.attrs.lanes) == (8, 16)  # its plain input: half blocks
    assert first.args[1].data.shape == (15, 29, 1, 1, 8, 16)
    assert dw.args[0] is first and dw.attrs.groups == 240 and dw.attrs.lanes == 16
    assert last.args[0] is dw and last.args[1].data.shape == (15, 15, 1, 1, 16, 16)
    assert _names(mod)[-2:] == ["layout_transform", "strided_slice"]
    y = relay.var("y", shape=(1, 32, 7, 9))
    kept = _plan(relay.nn.conv2d(relay.nn.conv2d(y, _c(24, 32, 1, 1)), _c(24, 24, 1, 1)), y,
                 cpu="skylake-avx512")
    assert {c.attrs.lanes for c in _calls(kept) if c.op.name.startswith("nn.contrib")} == {8}


@needs_cc
@pytest.mark.parametrize("shape", [(1, 58, 7, 9), (2, 116, 5, 4), (3, 232, 3, 5)])
def test_padded_depthwise_chain_matches_numpy(shape):
    c = shape[1]
    x = relay.var("x", shape=shape)
    body, w = _shuffle_branch(x, c)
    mod = ember.IRModule.from_expr(relay.Function([x], body))
    data = RNG.uniform(-1, 1, shape).astype("float32")
    got = ember.compile(mod, threads=1)(data)
    y = np.maximum(conv2d_nchw(data, w[0], (1, 1), (0,) * 4, (1, 1), 1), 0)
    y = conv2d_nchw(y, w[1], (1, 1), (1,) * 4, (1, 1), c)
    want = np.maximum(conv2d_nchw(y, w[2], (1, 1), (0,) * 4, (1, 1), 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_residual_add_of_two_padded_convs_stays_padded():
    # the second conv takes the first's padded blocks as its residual: one transform back
    x = relay.var("x", shape=(1, 16, 9, 11))
    a = relay.nn.conv2d(x, _c(10, 16, 3, 3), padding=(1, 1))
    b = relay.nn.conv2d(x, _c(10, 16, 3, 3), padding=(1, 1))
    mod = _plan(relay.add(a, b), x)
    assert _names(mod) == ["layout_transform", "nn.contrib_conv2d_NCHWc_fused",
                           "nn.contrib_conv2d_NCHWc_fused_add", "layout_transform",
                           "strided_slice"]
    first, second = _calls(mod)[1:3]
    assert second.args[3] is first


def test_padded_conv_takes_a_plain_residual_padded_with_zero_channels():
    # BlazeFace: a 1x1 conv to 28 channels plus the input's 24 channels padded to 28, read
    # by the next block's depthwise conv; on AVX-512 (16 lanes) 28 channels split into no
    # block of 16 or 8: padded to 32
    x = relay.var("x", shape=(1, 24, 9, 11))
    skip = relay.nn.pad(x, ((0, 0), (0, 4), (0, 0), (0, 0)))
    y = relay.nn.relu(relay.add(relay.nn.conv2d(x, _c(28, 24, 1, 1)), skip))
    mod = _plan(relay.nn.conv2d(y, _c(28, 1, 3, 3), padding=(1, 1), groups=28), x,
                cpu="skylake-avx512")
    names = _names(mod)
    assert names.count("nn.contrib_conv2d_NCHWc_fused_add") == 1
    assert names[-3:] == ["nn.contrib_conv2d_NCHWc_fused", "layout_transform", "strided_slice"]
    assert "nn.conv2d" not in names and "add" not in names


@needs_cc
def test_padded_residual_chains_match_numpy():
    x = relay.var("x", shape=(2, 24, 9, 11))
    w1, w2, w3 = (RNG.uniform(-1, 1, s).astype("float32")
                  for s in ((28, 24, 1, 1), (28, 24, 3, 3), (28, 1, 3, 3)))
    skip = relay.nn.pad(x, ((0, 0), (0, 4), (0, 0), (0, 0)))
    y = relay.nn.relu(relay.add(relay.nn.conv2d(x, relay.const(w1)), skip))
    y = relay.add(y, relay.nn.conv2d(x, relay.const(w2), padding=(1, 1)))
    z = relay.nn.conv2d(relay.nn.relu(y), relay.const(w3), padding=(1, 1), groups=28)
    data = RNG.uniform(-1, 1, (2, 24, 9, 11)).astype("float32")
    got = ember.compile(ember.IRModule.from_expr(relay.Function([x], z)), threads=1)(data)
    pad = np.pad(data, ((0, 0), (0, 4), (0, 0), (0, 0)))
    y = np.maximum(conv2d_nchw(data, w1, (1, 1), (0,) * 4, (1, 1), 1) + pad, 0)
    y = y + conv2d_nchw(data, w2, (1, 1), (1,) * 4, (1, 1), 1)
    want = conv2d_nchw(np.maximum(y, 0), w3, (1, 1), (1,) * 4, (1, 1), 28)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _fuse_layer(fine: relay.Var, coarse: relay.Var, w: list[np.ndarray], method: str,
                scale: np.ndarray) -> relay.Expr:
    """HRNet's fuse layer into its finer branch (18 channels): the fine branch's 3x3 conv, the
    coarse branch's 1x1 conv (36 -> 18) upsampled 2x, summed, a per-channel scale, relu, then
    the next 3x3 conv; ``method``: the upsampling's."""
    a = relay.nn.relu(relay.nn.conv2d(fine, relay.const(w[0]), padding=(1, 1)))
    b = relay.nn.conv2d(coarse, relay.const(w[1]))
    h, wd = (2 * d for d in coarse.type_annotation.shape[2:])
    nearest = method == "nearest_neighbor"
    b = relay.image.resize2d(b, size=(h, wd), method=method, rounding_method="floor",
                             coordinate_transformation_mode="asymmetric" if nearest
                             else "half_pixel")
    y = relay.nn.relu(relay.multiply(relay.add(a, b), relay.const(scale.reshape(-1, 1, 1))))
    return relay.nn.conv2d(y, relay.const(w[2]), padding=(1, 1))


def _fuse_weights(c: int = 18) -> tuple[list[np.ndarray], np.ndarray]:
    w = [RNG.uniform(-0.3, 0.3, s).astype("float32")
         for s in ((c, c, 3, 3), (c, 2 * c, 1, 1), (c, c, 3, 3))]
    return w, RNG.uniform(0.5, 1.5, c).astype("float32")


def test_resize_and_adds_of_padded_values_stay_padded():
    """18 channels (24 in NCHW8c): the cheap 1x1 conv is padded because a conv reads it
    through the resize, add, multiply and relu; those run in its padded blocks (the add in
    the fine conv's epilogue), and the next conv reads the result as it is: no transform
    until the end (they went back to NCHW, and the next conv read channel by channel)."""
    fine, coarse = relay.var("f", shape=(1, 18, 8, 6)), relay.var("c", shape=(1, 36, 4, 3))
    w, scale = _fuse_weights()
    mod = _plan(_fuse_layer(fine, coarse, w, "nearest_neighbor", scale), fine, coarse)
    names = _names(mod)
    assert "nn.conv2d" not in names and names[-2:] == ["layout_transform", "strided_slice"]
    # the result's, and the two inputs' into blocks (18 padded to 24, 36 in NCHW4c): none
    # between the convs
    assert names.count("layout_transform") == 3 and names.count("nn.pad") == 1
    assert names.count("image.resize2d") == names.count("multiply") == 1
    resize = next(c for c in _calls(mod) if c.op.name == "image.resize2d")
    assert resize.attrs.layout == "NCHW8c"
    assert tuple(resize.checked_type.shape) == (1, 3, 8, 6, 8)
    mul = next(c for c in _calls(mod) if c.op.name == "multiply")
    assert not mul.args[1].data.numpy()[0, 2, 0, 0, 2:].any()  # lanes 18..23: zero


def test_padded_result_that_only_leaves_drops_its_lanes_before_the_resize():
    # DeepLab's classifier (21 classes, padded) resized 4x to the input: the lanes are
    # dropped on the small side, not carried through the upsampling
    x = relay.var("x", shape=(1, 16, 8, 8))
    y = relay.nn.conv2d(x, _c(21, 16, 3, 3), padding=(1, 1))
    mod = _plan(relay.image.resize2d(y, size=(32, 32), method="linear"), x)
    assert _names(mod)[-3:] == ["layout_transform", "strided_slice", "image.resize2d"]


def test_division_of_a_padded_value_goes_back_to_nchw():
    # 1 / x of a padded lane's zero is inf, which a conv's zero weight would make NaN
    x = relay.var("x", shape=(1, 16, 9, 11))
    a = relay.nn.conv2d(x, _c(18, 16, 3, 3), padding=(1, 1))
    y = relay.divide(relay.const(np.float32(1)), a)
    mod = _plan(relay.nn.conv2d(y, _c(8, 18, 3, 3), padding=(1, 1)), x)
    names = _names(mod)
    assert names.index("strided_slice") < names.index("divide")


@needs_cc
@pytest.mark.parametrize("method", ["nearest_neighbor", "linear"])
@pytest.mark.parametrize("fine_shape", [(1, 18, 8, 6), (2, 36, 6, 10)])
def test_padded_fuse_layer_matches_numpy(method, fine_shape):
    n, c, h, w_ = fine_shape
    fine, coarse = relay.var("f", shape=fine_shape), relay.var("c", shape=(n, 2 * c, h // 2,
                                                                          w_ // 2))
    w, scale = _fuse_weights(c)
    body = _fuse_layer(fine, coarse, w, method, scale)
    f = RNG.uniform(-1, 1, fine_shape).astype("float32")
    g = RNG.uniform(-1, 1, (n, 2 * c, h // 2, w_ // 2)).astype("float32")
    got = ember.compile(ember.IRModule.from_expr(relay.Function([fine, coarse], body)),
                        threads=1)(f, g)
    a = np.maximum(conv2d_nchw(f, w[0], (1, 1), (1,) * 4, (1, 1), 1), 0)
    b = conv2d_nchw(g, w[1], (1, 1), (0,) * 4, (1, 1), 1)
    if method == "nearest_neighbor":
        b = b.repeat(2, axis=2).repeat(2, axis=3)
    else:  # half-pixel bilinear 2x: weights 1/4, 3/4 between neighbours, edges clamped
        for axis in (2, 3):
            lo = np.concatenate([b.take([0], axis), b], axis).take(range(b.shape[axis]), axis)
            hi = np.concatenate([b, b.take([-1], axis)], axis).take(
                range(1, b.shape[axis] + 1), axis)
            b = np.stack([0.25 * lo + 0.75 * b, 0.75 * b + 0.25 * hi], axis + 1).reshape(
                *b.shape[:axis], 2 * b.shape[axis], *b.shape[axis + 1:])
    y = np.maximum((a + b) * scale.reshape(-1, 1, 1), 0)
    want = conv2d_nchw(y, w[2], (1, 1), (1,) * 4, (1, 1), 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_few_padded_lanes_beat_half_blocks_on_avx512():
    # 1000 classes split into blocks of 8 but not 16: padded to 1008 in NCHW16c (a conv in
    # half blocks runs at half the vector width); 24 channels (a third more) keep NCHW8c
    x = relay.var("x", shape=(1, 512, 5, 3))
    mod = _plan(relay.nn.relu(relay.nn.conv2d(x, _c(1000, 512, 1, 1))), x, cpu="skylake-avx512")
    conv = next(c for c in _calls(mod) if c.op.name == "nn.contrib_conv2d_NCHWc_fused")
    assert conv.attrs.lanes == 16 and conv.args[1].data.shape == (63, 32, 1, 1, 16, 16)
    assert _names(mod)[-1] == "strided_slice"
    mod = _plan(relay.nn.conv2d(x, _c(24, 512, 1, 1)), x, cpu="skylake-avx512")
    conv = next(c for c in _calls(mod) if c.op.name == "nn.contrib_conv2d_NCHWc_fused")
    assert conv.attrs.lanes == 8 and "strided_slice" not in _names(mod)


def test_hrnet_72_channel_branch_padded_to_whole_blocks_on_avx512():
    # 72 channels (an eighth padded) from 3x3 convs summing 128 taps or more: 80 in NCHW16c,
    # the second conv reading the padded result with zero weights for its padded lanes (which
    # the kernel skips); MobileNetV3's 1x1 24->72 expansion keeps NCHW8c
    x = relay.var("x", shape=(1, 72, 6, 5))
    a = relay.nn.relu(relay.nn.conv2d(x, _c(72, 72, 3, 3), padding=(1, 1)))
    mod = _plan(relay.nn.conv2d(a, _c(72, 72, 3, 3), padding=(1, 1)), x, cpu="skylake-avx512")
    convs = [c for c in _calls(mod) if c.op.name == "nn.contrib_conv2d_NCHWc_fused"]
    assert [c.attrs.lanes for c in convs] == [16, 16]
    assert convs[1].args[1].data.shape == (5, 5, 3, 3, 16, 16)
    assert not convs[1].args[1].data.numpy()[:, 4, ..., 8:, :].any()  # padded input lanes
    assert _names(mod)[-1] == "strided_slice"
    y = relay.var("y", shape=(1, 24, 6, 5))
    mod = _plan(relay.nn.relu(relay.nn.conv2d(y, _c(72, 24, 1, 1))), y, cpu="skylake-avx512")
    conv = next(c for c in _calls(mod) if c.op.name == "nn.contrib_conv2d_NCHWc_fused")
    assert conv.attrs.lanes == 8 and "strided_slice" not in _names(mod)


def test_pads_over_half_blocks_gate():
    assert pads_over_half_blocks(1000, 16, 1, 512) and pads_over_half_blocks(200, 16, 9, 32)
    assert not pads_over_half_blocks(24, 16, 1, 512)  # 8 padded lanes on 24: a third more
    assert not pads_over_half_blocks(72, 16, 9, 72)  # an eighth more: only with share 8
    assert pads_over_half_blocks(72, 16, 9, 72, share=8)  # HRNet's 72-channel branch
    assert not pads_over_half_blocks(56, 16, 9, 72, share=8)  # a seventh more
    assert not pads_over_half_blocks(72, 16, 1, 144, share=8)  # too few taps summed
    assert pads_over_half_blocks(72, 16, 1, 144, share=8, min_sum=128)
    assert not pads_over_half_blocks(1000, 16, 1, 128)  # too few taps for the transform back
    assert not pads_over_half_blocks(1004, 16, 1, 512)  # no half blocks either: pad_output's
    assert not pads_over_half_blocks(1024, 16, 1, 512)  # whole blocks already


@needs_cc
@pytest.mark.parametrize("shape, oc, k", [((1, 512, 13, 13), 1000, 1), ((2, 32, 1, 7), 200, 3),
                                          ((1, 48, 1, 1), 136, 3)])
def test_padded_over_half_blocks_matches_numpy(shape, oc, k):
    # whichever lanes the host's build takes (16 padded on AVX-512, 8 whole on AVX2)
    from ember.contrib import graph_executor

    x = relay.var("x", shape=shape)
    w, b = (RNG.uniform(-0.2, 0.2, s).astype("float32") for s in ((oc, shape[1], k, k), (oc,)))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, relay.const(w), padding=(k // 2,) * 2),
                                        relay.const(b)))
    mod = ember.IRModule.from_expr(relay.Function([x], y))
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    rt = graph_executor.GraphModule(lib["default"](ember.cpu()))
    data = RNG.uniform(-1, 1, shape).astype("float32")
    rt.set_input("x", data)
    rt.run()
    want = conv2d_nchw(data, w, (1, 1), (k // 2,) * 4, (1, 1), 1) + b.reshape(-1, 1, 1)
    np.testing.assert_allclose(rt.get_output(0).numpy(), np.maximum(want, 0), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("weight, groups, why", [
    ((1, 16, 1, 1), 1, "1x1 to one channel: more padded lanes than real ones"),
    ((10, 8, 3, 3), 2, "grouped"),
    ((255, 16, 1, 1), 1, "16 taps x channels, its result not read by a conv"),
])
def test_convs_left_plain(weight, groups, why):
    x = relay.var("x", shape=(1, 16, 9, 11))
    mod = _plan(relay.nn.conv2d(x, _c(*weight), groups=groups), x)
    assert _names(mod) == ["nn.conv2d"], why


def test_pad_channels_false_keeps_the_plain_conv():
    x = relay.var("x", shape=(1, 16, 9, 11))
    mod = _plan(relay.nn.conv2d(x, _c(150, 16, 1, 1)), x, pad_channels=False)
    assert _names(mod) == ["nn.conv2d"]


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_pad_channels_must_be_a_bool(value):
    x = relay.var("x", shape=(1, 16, 9, 11))
    with pytest.raises(OpAttributeInvalid, match="pad_channels must be True or False"):
        _plan(relay.nn.conv2d(x, _c(150, 16, 1, 1)), x, pad_channels=value)


def test_pad_output_gate_and_pad_axis():
    assert pad_output(150, 8, 1, 256, False) and pad_output(2, 8, 9, 64, False)
    assert pad_output(255, 8, 1, 64, True) and pad_output(5, 8, 1, 3, True)
    assert pad_output(255, 8, 1, 64, False)  # YOLOv5n's head into its decode
    assert not pad_output(255, 8, 1, 32, False)  # cheap, and its result leaves blocks
    assert not pad_output(1, 8, 1, 256, True) and not pad_output(4, 8, 1, 256, True)
    padded = pad_axis(np.ones((3, 2), "float32"), 0, 8)
    assert padded.shape == (8, 2) and padded[:3].all() and not padded[3:].any()
    same = np.ones((16, 2), "float32")
    assert pad_axis(same, 0, 8) is same


# (input, [(out, kernel, stride, groups), ...] in a chain, activation): every case one branch
BRANCHES = [
    ("x", [(150, 3, 1, 1)], "Relu"),  # segformer classes
    ("x", [(21, 1, 1, 1), (8, 3, 1, 1)], "Relu"),  # padded result read by a conv
    ("x", [(2, 3, 2, 1)], "Sigmoid"),  # a detector's 2-channel head, stride 2
    ("x", [(1, 1, 1, 1)], None),  # stays plain
    ("x", [(10, 3, 1, 2)], None),  # grouped: stays plain
    ("x3", [(255, 1, 1, 1), (13, 3, 1, 1), (8, 3, 1, 1)], "Relu"),  # batch 3, RGB, YOLO head
]


def _onnx_model():
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    shapes = {"x": (1, 16, 9, 11), "x3": (3, 3, 13, 7)}
    nodes, inits, outs = [], [], []
    for i, (src, convs, act) in enumerate(BRANCHES):
        name, ic, (n, _, h, w) = src, shapes[src][1], shapes[src]
        for j, (oc, k, s, g) in enumerate(convs):
            tag = f"{i}_{j}"
            inits += [numpy_helper.from_array(
                rng.uniform(-0.3, 0.3, (oc, ic // g, k, k)).astype("float32"), f"w{tag}"),
                numpy_helper.from_array(rng.uniform(-0.3, 0.3, oc).astype("float32"), f"b{tag}")]
            nodes.append(helper.make_node("Conv", [name, f"w{tag}", f"b{tag}"], [f"c{tag}"],
                                          kernel_shape=[k, k], strides=[s, s], group=g,
                                          pads=[k // 2] * 4))
            name, ic = f"c{tag}", oc
            h, w = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
            if act:
                nodes.append(helper.make_node(act, [name], [f"a{tag}"]))
                name = f"a{tag}"
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, (n, ic, h, w)))
    graph = helper.make_graph(
        nodes, "pads", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v)
                        for k, v in shapes.items()], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)  # what older onnxruntime releases read
    inputs = {k: np.random.default_rng(4).uniform(-1, 1, v).astype("float32")
              for k, v in shapes.items()}
    return model, inputs


@needs_cc
@pytest.mark.parametrize("pad", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_builds_match_onnxruntime(pad):
    # pad=False (slow: a second build of the model): the unpadded graph, the same numbers
    ort = pytest.importorskip("onnxruntime")
    from ember.contrib import graph_executor
    from ember.relay.frontend import from_onnx

    model, inputs = _onnx_model()
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, inputs)
    mod, params = from_onnx(model, {k: v.shape for k, v in inputs.items()})
    config = {"relay.AlterOpLayout.pad_channels": pad}
    with ember.transform.PassContext(opt_level=3, config=config):
        lib = relay.build(mod, "llvm", params=params)
    # the padded results that leave the blocked world (150 and 2 channels) are sliced back;
    # the 21-, 255- and 13-channel ones are read blocked by the next conv
    kernels = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
               if n["op"] == "tvm_op"]
    assert sum("strided_slice" in k for k in kernels) == (2 if pad else 0), kernels
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**inputs)
    m.run()
    for i, expected in enumerate(want):
        np.testing.assert_allclose(m.get_output(i).numpy(), expected, rtol=1e-4,
                                   atol=1e-5, err_msg=f"branch {i}, pad={pad}")
