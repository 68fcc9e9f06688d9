"""Plain NCHW convolutions with run-time height and width: a conv whose output channels fill
no SIMD block and are not worth padding to one (``channel_pad.pad_output``: 4 channels, a
detector's FPN) keeps topi's channel-blocked NCHW template (``topi/nn/conv2d.py``) in a
dynamic build, as in the static one, with the sizes as arguments: its register tile is the
widest one, and only the last tile of a row tests its columns (``te.lower`` versions a tile
computed inside its reader); one to at most 7 channels with a window larger than 1x1 takes the
C kernel of ``topi/nn/conv2d_nchw_small.py`` in both. Against the static build at the same
shape over many shapes (1, odd sizes, no multiple of the tile width) and against numpy.
"""
from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_util import (assert_same_result, build_dynamic, build_static, kernel_names,
                          kernel_source, rand, requires_cc)
from ember.relay.op.nn.conv import conv2d_nchw

pytestmark = requires_cc
RNG = np.random.default_rng(5)

# 3x3 + relu, 1x1 with a residual add, 3x3 stride 2 to 2 channels: each a plain conv
MODEL = """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, {h}, {w}), float32], %w1: Tensor[(4, 3, 3, 3), float32],
          %w2: Tensor[(4, 4, 1, 1), float32], %w3: Tensor[(2, 4, 3, 3), float32]) {{
  %0 = nn.relu(nn.conv2d(%x, %w1, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]));
  %1 = add(nn.conv2d(%0, %w2, channels=4, kernel_size=[1, 1]), %0);
  nn.conv2d(%1, %w3, strides=[2, 2], padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3])
}}
"""
PARAMS = {"w1": rand(RNG, 4, 3, 3, 3), "w2": rand(RNG, 4, 4, 1, 1), "w3": rand(RNG, 2, 4, 3, 3)}
DYNAMIC = None


def _dynamic():
    global DYNAMIC
    if DYNAMIC is None:
        DYNAMIC = build_dynamic(MODEL, PARAMS)
    return DYNAMIC


def _numpy(x: np.ndarray) -> np.ndarray:
    y = np.maximum(conv2d_nchw(x, PARAMS["w1"], (1, 1), (1, 1, 1, 1), (1, 1), 1), 0)
    y = conv2d_nchw(y, PARAMS["w2"], (1, 1), (0, 0, 0, 0), (1, 1), 1) + y
    return conv2d_nchw(y, PARAMS["w3"], (2, 2), (1, 1, 1, 1), (1, 1), 1)


def _static_kernels(h: int, w: int) -> list[str]:
    lib = build_static(MODEL, PARAMS, h=h, w=w).factory.lib
    names = {m.group(1) for mod in [lib, *lib.imported_modules]
             for m in re.finditer(r"TVM_DLL int32_t tvmgen_default_(fused_\w+)_unpacked\(",
                                  mod.get_source())}
    return sorted(re.sub(r"_\d+$", "", n) for n in names)


def test_few_channel_convs_take_the_static_builds_kernels_at_run_time_sizes() -> None:
    kernels = sorted(re.sub(r"_\d+$", "", n[len("vm_mod_"):])
                     for n in kernel_names(MODEL, PARAMS) if not n.endswith("shape_func"))
    # the first conv feeds a conv: padded to a block (both builds); the others plain
    assert kernels == _static_kernels(13, 19) == _static_kernels(32, 32), kernels
    assert "fused_nn_conv2d_add" in kernels
    source = kernel_source(MODEL, PARAMS)
    assert "T_conv2d_compute[" in source  # the register tile of the template (the 1x1 conv)
    assert "T_conv2d[" not in source  # not the generic reduction
    assert "ember_conv2d_nchw_small(" in source  # the 3x3 conv to 2 channels


@settings(max_examples=15, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(1, 40))
def test_plain_convs_match_the_static_build_at_any_image_size(h: int, w: int) -> None:
    x = rand(RNG, 1, 3, h, w)
    got = _dynamic()(x)
    assert_same_result(got, build_static(MODEL, PARAMS, h=h, w=w)(x))
    np.testing.assert_allclose(got, _numpy(x), rtol=1e-4, atol=1e-4)
