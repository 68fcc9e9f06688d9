"""The channel-shuffle kernel (ember/kernels/channel_shuffle.h) against numpy at every SIMD
level this machine runs (AVX-512's masked permutes for blocks of 8 and 16 in and out, AVX2's
for 8 into 8, the lane table elsewhere): ShuffleNetV2's halves of 58 and 116 channels (padded
last blocks), groups of 2, 3 and 4, any channel range, blocks 1, 3, 4, 8 and 16 in and out,
1x1 maps and maps not a multiple of the 64-position tile, batch 2, a work split over 1-3
tasks (hypothesis draws the rest); sizes that are no shuffle fail with -1. Then the lowering:
one kernel call."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_conv2d_nchwc import CC, LEVEL_FLAGS
from test_layout_nchwc import harness_lib
from topi_util import run_kernel

from ember.te import tensor as te
from ember.topi.nn import channel_shuffle as K

HARNESS = Path(__file__).with_name("channel_shuffle_harness.c")
F32 = ctypes.POINTER(ctypes.c_float)
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

# (n, ca, cb, hw, block, out_block, groups, begin, end)
CASES = [(1, 58, 58, 784, 16, 16, 2, 0, 58), (2, 58, 58, 70, 16, 16, 2, 58, 116),
         (1, 116, 116, 49, 16, 8, 2, 116, 232), (1, 58, 58, 9, 8, 16, 2, 0, 116),
         (2, 24, 24, 65, 8, 8, 2, 0, 48), (1, 7, 5, 3, 4, 4, 3, 0, 12), (2, 6, 6, 130, 3, 8, 4, 3, 11),
         (1, 1, 1, 1, 16, 16, 2, 0, 2), (1, 9, 3, 1, 1, 16, 3, 5, 12), (1, 17, 15, 67, 16, 4, 2, 1, 31)]


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {"dir": tmp_path_factory.mktemp("shuffle_harness")}


def _lib(libs: dict, level: str) -> ctypes.CDLL:
    return harness_lib(libs, level, HARNESS)


def _blocked(x: np.ndarray, block: int) -> np.ndarray:
    """NCHW -> NCHW[block]c, the last block's lanes past the channels NaN (never read)."""
    n, c, h, w = x.shape
    padded = np.full((n, -(-c // block) * block, h, w), np.nan, x.dtype)
    padded[:, :c] = x
    return np.ascontiguousarray(padded.reshape(n, -1, block, h, w).transpose(0, 1, 3, 4, 2))


def _check(lib: ctypes.CDLL, case: tuple, tasks: int, seed: int) -> None:
    n, ca, cb, hw, block, out_block, groups, begin, end = case
    rng = np.random.default_rng(seed)
    xa = rng.uniform(-1, 1, (n, ca, 1, hw)).astype("float32")
    xb = rng.uniform(-1, 1, (n, cb, 1, hw)).astype("float32")
    a, b = _blocked(xa, block), _blocked(xb, block)
    # the oracle from NCHW: concat, Reshape (N, G, C / G, ..), Transpose, Reshape, slice
    x = np.concatenate([xa, xb], axis=1)
    c = ca + cb
    y = x.reshape(n, groups, c // groups, 1, hw).transpose(0, 2, 1, 3, 4).reshape(n, c, 1, hw)
    want = np.nan_to_num(_blocked(y[:, begin:end], out_block), nan=0.0)
    np.testing.assert_array_equal(
        K.reference(np.nan_to_num(a), np.nan_to_num(b), (ca, cb), groups, begin, end,
                    out_block), want)
    out = np.full(want.shape, np.nan, "float32")
    assert lib.harness_shuffle(a.ctypes.data_as(F32), b.ctypes.data_as(F32),
                               out.ctypes.data_as(F32), n, ca, cb, hw, block, out_block, groups,
                               begin, end, tasks) == 0
    np.testing.assert_array_equal(out, want, err_msg=f"{case} over {tasks} task(s)")


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
def test_kernel_matches_numpy_at_every_level(libs, level):
    lib = _lib(libs, level)
    for k, case in enumerate(CASES):
        for tasks in (1, 3):
            _check(lib, case, tasks, k)


@st.composite
def _shuffles(draw: st.DrawFn) -> tuple:
    groups = draw(st.integers(1, 4))
    c = groups * draw(st.integers(1, 12))
    ca = draw(st.integers(1, c - 1)) if c > 1 else 1
    begin = draw(st.integers(0, c - 1))
    end = draw(st.integers(begin + 1, c))
    return (draw(st.integers(1, 2)), ca, c - ca if c > 1 else 1, draw(st.integers(1, 70)),
            draw(st.sampled_from([1, 3, 4, 8, 16])), draw(st.sampled_from([4, 8, 16])),
            groups if c > 1 else 2, begin, end if c > 1 else 2)


@settings(max_examples=60, deadline=None)
@given(case=_shuffles(), tasks=st.integers(1, 3))
def test_kernel_matches_numpy_on_drawn_shapes(libs, case, tasks):
    _check(_lib(libs, "native"), case, tasks, 0)


def test_sizes_that_are_no_shuffle_fail(libs):
    lib = _lib(libs, "portable")
    buf = np.zeros(64, "float32").ctypes.data_as(F32)
    for bad in [(1, 3, 2, 1, 8, 8, 2, 0, 5),  # 5 channels in 2 groups
                (1, 4, 4, 1, 8, 8, 2, 0, 9),  # past the channels
                (1, 4, 4, 1, 8, 8, 2, 3, 3),  # an empty range
                (1, 4, 4, 1, 32, 8, 2, 0, 8)]:  # a block wider than 16 lanes
        assert lib.harness_shuffle(buf, buf, buf, *bad, 1) == -1, bad


def test_lowering_is_one_kernel_call():
    a = te.placeholder((2, 4, 3, 5, 16), name="a")
    b = te.placeholder((2, 4, 3, 5, 16), name="b")
    y = K.channel_shuffle_nchwc(a, b, (58, 58), 2, 29, 87, 8)
    assert y.op.tag == "channel_shuffle_nchwc" and tuple(int(d) for d in y.shape) == (
        2, 8, 3, 5, 8)
    rng = np.random.default_rng(3)
    av, bv = (rng.uniform(-1, 1, (2, 4, 3, 5, 16)).astype("float32") for _ in range(2))
    (got,) = run_kernel(y, [a, b], [av, bv])
    np.testing.assert_array_equal(got, K.reference(av, bv, (58, 58), 2, 29, 87, 8))
