"""The phase decomposition of conv2d_transpose (topi/nn/conv2d_transpose.py) in numpy: the
phase convs interleaved equal the direct scatter (Relay's reference), over strides, kernels,
paddings, output paddings and groups drawn by hypothesis; no C compiler involved."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.relay.op.nn.conv import conv2d_nchw, conv2d_transpose_nchw
from ember.topi.nn.conv2d_transpose import dilated_kernel, interleave, phase_plan, phase_weights


def _phased(x: np.ndarray, w: np.ndarray, strides, padding, output_padding, groups):
    plan = phase_plan(x.shape[2], x.shape[3], w.shape[2:], strides, padding, output_padding)
    if plan is None:
        return None
    pw = phase_weights(w, groups, plan)
    convs = [conv2d_nchw(x, p, (1, 1), plan.padding, (1, 1), groups) for p in pw]
    return interleave(np.concatenate(convs, axis=1), plan)


def _beyond_reach(pad_lo: int, pad_hi: int, k: int, s: int, out_pad: int) -> bool:
    """Whether the crop starts past the phase convs' zero padding (a top padding of a whole
    tap row or more) or ends before the last input row (a bottom padding of the kernel)."""
    return pad_lo >= -(-k // s) * s or pad_hi >= k + out_pad


@st.composite
def transposed_convs(draw):
    groups = draw(st.sampled_from([1, 2, 3]))
    c, og = groups * draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    padding = tuple(draw(st.integers(0, k)) for k in (kh, kw, kh, kw))
    output_padding = (draw(st.integers(0, sh - 1)), draw(st.integers(0, sw - 1)))
    return (c, og, h, w, kh, kw), (sh, sw), padding, output_padding, groups


@settings(max_examples=100, deadline=None)
@given(transposed_convs())
def test_phase_convs_equal_the_direct_scatter(case):
    (c, og, h, w, kh, kw), strides, padding, output_padding, groups = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, c, h, w))
    wt = rng.standard_normal((c, og, kh, kw))
    oh = (h - 1) * strides[0] - padding[0] - padding[2] + kh + output_padding[0]
    ow = (w - 1) * strides[1] - padding[1] - padding[3] + kw + output_padding[1]
    if oh <= 0 or ow <= 0:
        assert phase_plan(h, w, (kh, kw), strides, padding, output_padding) is None
        return
    got = _phased(x, wt, strides, padding, output_padding, groups)
    want = conv2d_transpose_nchw(x, wt, strides, padding, output_padding, (1, 1), groups)
    refused = [_beyond_reach(padding[a], padding[a + 2], k, s, op) for a, k, s, op in
               zip((0, 1), (kh, kw), strides, output_padding)]
    assert (got is None) == any(refused)
    if got is None:
        return
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_dbnet_head_plan_is_one_1x1_conv_per_phase():
    plan = phase_plan(160, 160, (2, 2), (2, 2), (0, 0, 0, 0), (0, 0))
    assert plan.taps == (1, 1) and plan.padding == (0, 0, 0, 0) and plan.rows == (160, 160)
    assert plan.out == (320, 320) and plan.offset == (0, 0) and plan.phases == 4


def test_stride_1_is_one_conv_with_the_flipped_kernel():
    plan = phase_plan(7, 5, (3, 3), (1, 1), (1, 1, 1, 1), (0, 0))
    assert plan.phases == 1 and plan.padding == (1, 1, 1, 1) and plan.out == plan.rows == (7, 5)
    w = np.arange(2 * 3 * 9, dtype="float64").reshape(2, 3, 3, 3)
    np.testing.assert_array_equal(phase_weights(w, 1, plan)[0],
                                  w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))


def test_a_padding_beyond_the_kernel_is_refused():
    assert phase_plan(8, 8, (2, 2), (2, 2), (2, 0, 0, 0), (0, 0)) is None
    assert phase_plan(1, 1, (1, 1), (1, 1), (1, 1, 1, 1), (0, 0)) is None  # empty output


@settings(max_examples=40, deadline=None)
@given(transposed_convs(), st.integers(1, 3), st.integers(1, 3))
def test_dilated_kernel_phase_convs_equal_the_dilated_scatter(case, dh, dw):
    (c, og, h, w, kh, kw), strides, padding, output_padding, groups = case
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, c, h, w))
    wt = rng.standard_normal((c, og, kh, kw))
    wd = dilated_kernel(wt, (dh, dw))
    eh, ew = wd.shape[2:]
    oh = (h - 1) * strides[0] - padding[0] - padding[2] + eh + output_padding[0]
    ow = (w - 1) * strides[1] - padding[1] - padding[3] + ew + output_padding[1]
    got = _phased(x, wd, strides, padding, output_padding, groups) if oh > 0 < ow else None
    if got is None:
        return
    want = conv2d_transpose_nchw(x, wt, strides, padding, output_padding, (dh, dw), groups)
    np.testing.assert_allclose(got, want, atol=1e-9)
