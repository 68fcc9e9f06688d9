"""Blocked convolutions and pools with run-time extents: a CNN whose batch, height and width
are ``?`` is planned in NCHW[L]c as a static one (packed weights, fused epilogues and
residuals), its convs, depthwise convs and pools run on the C kernels of conv_nchwc.h and
pool_nchwc.h with those sizes as arguments; against the reference interpreter (numpy) over
many shapes (1, odd sizes, no multiple of any tile width) and against the static build at the
same shape.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from dynamic_util import (assert_same_result, build_dynamic, build_static, kernel_names,
                          kernel_source, rand, requires_cc)
from ember import relay
from ember.runtime.errors import TVMError
from ember.tir import op as tir
from ember.tir.expr import IntImm, SizeVar
from ember.tir.functor import substitute
from ember.tir.simplify import simplify
from ember.topi.nn import conv2d_nchwc as K
from ember.target.simd import LEVELS, simd_level

pytestmark = requires_cc
RNG = np.random.default_rng(2)
LANES = 8  # of the geometries below (the models take the build's own lanes)

# RGB conv + relu (plain NCHW input), depthwise stride 2 + clip, 1x1 conv with a residual,
# max pool 3x3/2 pad 1, avg pool 2x2 count_include_pad, 3x3 conv, global average, dense
CNN = """#[version = "0.0.5"]
def @main(%x: Tensor[({n}, 3, {h}, {w}), float32], %w1: Tensor[(16, 3, 3, 3), float32],
          %b1: Tensor[(16), float32], %wd: Tensor[(16, 1, 3, 3), float32],
          %w2: Tensor[(16, 16, 1, 1), float32], %w3: Tensor[(24, 16, 3, 3), float32],
          %fc: Tensor[(5, 24), float32]) {{
  %0 = nn.relu(nn.bias_add(nn.conv2d(%x, %w1, padding=[1, 1, 1, 1], channels=16,
                                     kernel_size=[3, 3]), %b1));
  %1 = clip(nn.conv2d(%0, %wd, strides=[2, 2], padding=[1, 1, 1, 1], groups=16, channels=16,
                      kernel_size=[3, 3]), a_min=0f, a_max=6f);
  %2 = nn.relu(add(nn.conv2d(%1, %w2, channels=16, kernel_size=[1, 1]), %1));
  %3 = nn.max_pool2d(%2, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1]);
  %4 = nn.avg_pool2d(%3, pool_size=[2, 2], padding=[1, 1, 1, 1], count_include_pad=True);
  %5 = nn.conv2d(%4, %w3, padding=[1, 1, 1, 1], channels=24, kernel_size=[3, 3]);
  nn.dense(nn.batch_flatten(nn.global_avg_pool2d(%5)), %fc)
}}
"""
PARAMS = {"w1": rand(RNG, 16, 3, 3, 3), "b1": rand(RNG, 16), "wd": rand(RNG, 16, 1, 3, 3),
          "w2": rand(RNG, 16, 16, 1, 1), "w3": rand(RNG, 24, 16, 3, 3), "fc": rand(RNG, 5, 24)}


@pytest.fixture(scope="module")
def cnn():
    return build_dynamic(CNN, PARAMS)


def _reference(x: np.ndarray) -> np.ndarray:
    text = CNN.format(n=x.shape[0], h=x.shape[2], w=x.shape[3])
    mod = ember.parser.fromtext(text)
    run = relay.create_executor("debug", mod=mod).evaluate()
    return run(x, *PARAMS.values()).numpy()


def test_a_dynamic_cnn_is_planned_in_the_blocked_layout() -> None:
    names = kernel_names(CNN, PARAMS)
    kernels = [n for n in names if not n.endswith("shape_func")]
    assert sum("contrib_conv2d_NCHWc_fused" in n for n in kernels) == 4, kernels
    assert any("NCHWc_fused_add" in n for n in kernels), kernels  # the residual is fused
    assert not any(n.startswith(("vm_mod_fused_add", "vm_mod_fused_nn_conv2d")) for n in kernels)
    source = kernel_source(CNN, PARAMS)
    # the RGB conv of a run-time image takes the first-conv kernel (the input stays plain)
    for kernel in ("ember_conv2d_nchw_input_x", "ember_conv2d_nchwc_x", "ember_depthwise_nchwc_x",
                   "ember_pool2d_nchwc_x", "ember_sgemm"):
        assert kernel in source, kernel


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 3), h=st.integers(3, 23), w=st.integers(3, 23))
def test_a_dynamic_cnn_matches_numpy_at_any_batch_and_image_size(cnn, n: int, h: int,
                                                                w: int) -> None:
    x = rand(np.random.default_rng(n * 1000 + h * 31 + w), n, 3, h, w)
    np.testing.assert_allclose(cnn(x), _reference(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, h, w", [(1, 16, 16), (2, 13, 7), (3, 5, 22)])
def test_a_dynamic_cnn_agrees_with_the_static_build(cnn, n: int, h: int, w: int) -> None:
    x = rand(RNG, n, 3, h, w)
    static = build_static(CNN, PARAMS, n=n, h=h, w=w)
    assert_same_result(cnn(x), static(x))


# 10 output channels split into no block; with channel padding off the layout planner leaves
# the conv in NCHW (12 input channels: more than the first-conv kernel takes), and the
# channel-blocked template (any batch) computes it
UNBLOCKED = """#[version = "0.0.5"]
def @main(%x: Tensor[({n}, 12, 9, 11), float32], %w: Tensor[(10, 12, 3, 3), float32]) {{
  nn.relu(nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=10, kernel_size=[3, 3]))
}}
"""


@pytest.mark.parametrize("n", [1, 5])
def test_a_conv_left_in_nchw_takes_a_run_time_batch(n: int) -> None:
    params = {"w": rand(RNG, 10, 12, 3, 3)}
    x = rand(RNG, n, 12, 9, 11)
    with ember.transform.PassContext(config={"relay.AlterOpLayout.pad_channels": False}):
        assert "T_conv2d_compute" in kernel_source(UNBLOCKED, params)  # not the plain reduction
        got = build_dynamic(UNBLOCKED, params)(x)
        static = build_static(UNBLOCKED, params, n=n)(x)
    mod = ember.parser.fromtext(UNBLOCKED.format(n=n))
    want = relay.create_executor("debug", mod=mod).evaluate()(x, params["w"]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert_same_result(got, static)


def test_an_image_smaller_than_the_window_is_an_error() -> None:
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 8, ?, ?), float32], %w: Tensor[(8, 8, 5, 5), float32]) {
  nn.relu(nn.conv2d(%x, %w, channels=8, kernel_size=[5, 5]))
}
"""
    model = ember.compile(text, executor="vm", params={"w": rand(RNG, 8, 8, 5, 5)})
    assert model(rand(RNG, 2, 8, 6, 5)).shape == (2, 8, 2, 1)
    with pytest.raises(TVMError, match="kernel window must fit in the padded height"):
        model(rand(RNG, 2, 8, 4, 9))


def test_a_residual_of_another_batch_at_run_time_is_an_error() -> None:
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 8, 6, 6), float32], %r: Tensor[(?, 8, 6, 6), float32],
          %w: Tensor[(8, 8, 3, 3), float32]) {
  nn.relu(add(nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]), %r))
}
"""
    model = ember.compile(text, executor="vm", params={"w": rand(RNG, 8, 8, 3, 3)})
    x = rand(RNG, 2, 8, 6, 6)
    model(x, rand(RNG, 2, 8, 6, 6))
    with pytest.raises(TVMError, match="the residual must have the result's shape"):
        model(x, rand(RNG, 1, 8, 6, 6))


def _geometry(n, h, w, oh, ow, kh=3, stride=1) -> K.ConvGeometry:
    return K.ConvGeometry(n, 32, h, w, 64, oh, ow, kh, kh, (stride, stride), (1, 1, 1, 1),
                          (1, 1), 1, LANES, LANES)


def test_the_conv_tile_expressions_fold_to_the_static_model() -> None:
    level = simd_level(None)
    for sizes in [(1, 7, 7, 7, 7), (3, 56, 56, 56, 56), (1, 1, 200, 1, 200)]:
        for kh in (1, 3):
            geo = K.flattened(_geometry(*sizes, kh=kh))
            exprs = K.conv_tile_exprs(geo, level)
            assert all(isinstance(v, int) for v in vars(exprs).values()), exprs
            assert exprs == K.model_conv_tiles(geo, level)


def test_the_conv_tiles_of_run_time_sizes_are_expressions_of_them() -> None:
    n, h, w = SizeVar("n"), SizeVar("h"), SizeVar("w")
    geo = _geometry(n, h, w, h, w)
    tiles = K.conv_tiles(geo, simd_level(None))
    assert isinstance(tiles.rb, int)
    assert not isinstance(tiles.strip, (int, IntImm)) and not isinstance(tiles.threads, int)
    assert tir.convert(tiles.rw) is not None


@pytest.mark.parametrize("level_name", ["avx2", "avx512"])
def test_the_conv_tiles_of_a_run_time_width_fold_to_the_static_ones_at_each_width(
        level_name: str) -> None:
    # (the flat tiles of a short row need blocks outermost: a run-time width that lost them
    # ran squeezenet/hw's 3x3s at 15x15 20% slower than the static build; AVX2's pairs and
    # AVX-512's quads alike, so the order is an expression of the width on both)
    level = LEVELS[level_name]
    h, w = SizeVar("h"), SizeVar("w")
    tiles = K.conv_tiles(_geometry(1, h, w, h, w), level)
    for size in (1, 7, 15, 28, 29, 56):
        static = K.model_conv_tiles(_geometry(1, size, size, size, size), level)
        got = [_at(v, {h: size, w: size}) for v in vars(tiles).values()]
        assert got == list(vars(static).values()), (size, got, static)
    assert not isinstance(tiles.order, int)


def _at(value, binding) -> int:
    """A tile field at concrete sizes (an int stays one)."""
    if isinstance(value, int):
        return value
    folded = simplify(substitute(value, {v: tir.const(k, v.dtype) for v, k in binding.items()}))
    assert isinstance(folded, IntImm), folded
    return int(folded.value)


@pytest.mark.parametrize("level_name", ["avx2", "avx512"])
def test_the_conv1d_tiles_of_a_run_time_length_fold_to_the_static_ones(level_name: str) -> None:
    # wav2vec2's 512->512 kernel-3 stride-2 conv1d: its loop order weighs the row streamed per
    # block group against the weights streamed per strip, both growing with the length
    level, lanes = LEVELS[level_name], 16 if level_name == "avx512" else 8
    w = SizeVar("w")

    def conv1d(width, out) -> K.ConvGeometry:
        return K.ConvGeometry(1, 512, 1, width, 512, 1, out, 1, 3, (1, 2), (0,) * 4, (1, 1),
                              1, lanes, lanes)

    tiles = K.conv_tiles(conv1d(w, tir.floordiv(w - 3, 2) + 1), level)
    for size in (3, 40, 99, 399, 3199, 16001):
        static = K.model_conv_tiles(conv1d(size, (size - 3) // 2 + 1), level)
        got = [_at(v, {w: size}) for v in vars(tiles).values()]
        assert got == list(vars(static).values()), (size, got, static)


# 1x1 convs whose static plan depends on the map in ways beyond the row's width: AVX-512's pair
# tiles only from PAIR_MIN_PIXELS output pixels (mobilenet_v3_large's 8-lane 1x1s at 9x7, 5x4,
# 2x2), and packed strips, looping over blocks innermost, only over inputs above
# PACK_MIN_BYTES (densenet's 512->256 and 1024->512 at 4x4 and 2x2: blocks outermost)
ONE_BY_ONE = {  # (ic, oc, lanes, in_block)
    "pairs_40_to_24": (40, 24, 8, 8), "pairs_16_to_40": (16, 40, 8, 16),
    "pairs_240_to_56": (240, 56, 8, 16), "packs_512_to_256": (512, 256, 16, 16),
    "packs_1024_to_512": (1024, 512, 16, 16), "packs_1024_to_512_x8": (1024, 512, 8, 8)}


@pytest.mark.parametrize("level_name", ["avx2", "avx512"])
@pytest.mark.parametrize("case", list(ONE_BY_ONE))
def test_the_1x1_tiles_of_run_time_sizes_fold_to_the_static_ones(level_name: str,
                                                                  case: str) -> None:
    level = LEVELS[level_name]
    ic, oc, lanes, in_block = ONE_BY_ONE[case]
    n, h, w = SizeVar("n"), SizeVar("h"), SizeVar("w")

    def geometry(bn, bh, bw) -> K.ConvGeometry:
        return K.flattened(K.ConvGeometry(bn, ic, bh, bw, oc, bh, bw, 1, 1, (1, 1), (0,) * 4,
                                          (1, 1), 1, lanes, in_block))

    tiles = K.conv_tiles(geometry(n, h, w), level)
    for bn, bh, bw in ((1, 1, 1), (1, 2, 2), (1, 5, 4), (1, 9, 7), (1, 7, 7), (3, 4, 4),
                       (1, 8, 8), (2, 32, 32), (1, 67, 53)):
        static = K.model_conv_tiles(geometry(bn, bh, bw), level)
        got = [_at(v, {n: bn, h: bh, w: bw}) for v in vars(tiles).values()]
        assert got == list(vars(static).values()), ((bn, bh, bw), got, static)


# a 1x1 256->512 (packed strips only over inputs above PACK_MIN_BYTES: 33x35 here) into a 1x1
# 512->24 (8-lane output blocks: AVX-512's pair tiles only from PAIR_MIN_PIXELS pixels)
ONE_BY_ONE_CHAIN = """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 256, {h}, {w}), float32], %w1: Tensor[(512, 256, 1, 1), float32],
          %w2: Tensor[(24, 512, 1, 1), float32]) {{
  nn.conv2d(nn.relu(nn.conv2d(%x, %w1, channels=512, kernel_size=[1, 1])), %w2, channels=24,
            kernel_size=[1, 1])
}}
"""


def test_dynamic_1x1_convs_around_the_pair_and_packing_thresholds_match_numpy() -> None:
    rng = np.random.default_rng(5)
    w1, w2 = rand(rng, 512, 256, 1, 1), rand(rng, 24, 512, 1, 1)
    model = build_dynamic(ONE_BY_ONE_CHAIN, {"w1": w1, "w2": w2})
    for h, w in ((1, 1), (2, 2), (9, 7), (8, 8), (33, 35)):
        x = rand(rng, 1, 256, h, w)
        hidden = np.maximum(np.einsum("oc,nchw->nohw", w1[:, :, 0, 0], x), 0)
        want = np.einsum("oc,nchw->nohw", w2[:, :, 0, 0], hidden)
        np.testing.assert_allclose(model(x), want, rtol=1e-4, atol=1e-3)
