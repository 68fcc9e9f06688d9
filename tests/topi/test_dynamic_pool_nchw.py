"""Pools of plain NCHW values with run-time batch, channel-free height and width (``?``)
through the VM: the C kernels of pool_nchw.h take the sizes as arguments (as a static build
of the shape does); against the reference interpreter over sizes hypothesis draws (1x1 maps,
odd sizes, rows shorter and longer than a vector) and against the static build."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from dynamic_util import (assert_same_result, build_dynamic, build_static, kernel_source, rand,
                          requires_cc)
from ember import relay

pytestmark = requires_cc

# 6 channels (no block of 4): max 3x3/2 pad 1 ceil_mode, avg 3x3/1 pad 1 count_include_pad,
# avg 2x2/2 without, global average and max
POOLS = """#[version = "0.0.5"]
def @main(%x: Tensor[({n}, 6, {h}, {w}), float32]) {{
  %0 = nn.max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1],
                     ceil_mode=True);
  %1 = nn.avg_pool2d(%x, pool_size=[3, 3], padding=[1, 1, 1, 1], count_include_pad=True);
  %2 = nn.avg_pool2d(%x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 1, 1]);
  (%0, %1, %2, nn.global_avg_pool2d(%x), nn.global_max_pool2d(%x))
}}
"""


def _reference(x: np.ndarray) -> list[np.ndarray]:
    mod = ember.parser.fromtext(POOLS.format(n=x.shape[0], h=x.shape[2], w=x.shape[3]))
    return [o.numpy() for o in relay.create_executor("debug", mod=mod).evaluate()(x)]


def test_the_dynamic_pools_call_the_nchw_kernels() -> None:
    source = kernel_source(POOLS, {})
    assert source.count("ember_pool2d_nchw(") >= 3 and "ember_global_pool_nchw(" in source


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 2), h=st.integers(1, 19), w=st.integers(1, 70))
def test_dynamic_pools_match_numpy_at_any_size(n: int, h: int, w: int) -> None:
    x = rand(np.random.default_rng(n * 1000 + h * 71 + w), n, 6, h, w)
    got = build_dynamic(POOLS, {})(x)
    for g, want in zip(got, _reference(x), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_dynamic_pools_agree_with_the_static_build() -> None:
    x = rand(np.random.default_rng(5), 2, 6, 9, 37)
    static = build_static(POOLS, {}, n=2, h=9, w=37)(x)
    for g, want in zip(build_dynamic(POOLS, {})(x), static, strict=True):
        assert_same_result(g, want)
