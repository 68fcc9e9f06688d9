"""The NCHW[L]c pooling kernel (ember/kernels/pool_nchwc.h) against Relay's numpy reference at
every SIMD level this machine runs (the levels of test_conv2d_nchwc: the host's, AVX2+FMA, SSE
only and the plain C99 path), over shapes hypothesis draws: 1x1 maps, odd sizes, strides above
the kernel, dilation, asymmetric padding, ceil_mode, count_include_pad, 4/8/16 lanes, and the
work split over 1-3 tasks. Exact for max; rtol 1e-5 / atol 1e-6 for averages."""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conv2d_nchwc import CC, INCLUDE, LEVEL_FLAGS, STRICT, _host_runs

from ember.relay.op.nn.conv import conv_out_size
from ember.relay.op.nn.pooling import pool2d_ref

HARNESS = Path(__file__).with_name("pool_nchwc_harness.c")
F32 = ctypes.POINTER(ctypes.c_float)
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")
_LIBS: dict[str, ctypes.CDLL] = {}


def _harness(level: str, tmp: Path) -> ctypes.CDLL:
    if level not in _LIBS:
        if not _host_runs(level):
            pytest.skip(f"this machine cannot run {level} code")
        so = tmp / f"pool_harness_{level}.so"
        cmd = [CC, *STRICT, *LEVEL_FLAGS[level], "-fPIC", "-shared", f"-I{INCLUDE}",
               str(HARNESS), "-o", str(so)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[:4000]
        _LIBS[level] = ctypes.CDLL(str(so))
    return _LIBS[level]


@st.composite
def pools(draw):
    k, s, d = draw(st.integers(1, 5)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    span = (k - 1) * d + 1
    pads = tuple(draw(st.integers(0, k - 1)) for _ in range(4))  # top, left, bottom, right
    h = draw(st.integers(max(1, span - pads[0] - pads[2]), 9))
    w = draw(st.integers(max(1, span - pads[1] - pads[3]), 14))
    return SimpleNamespace(pool_size=(k, k), strides=(s, s), dilation=(d, d), padding=pads,
                           layout="NCHW", ceil_mode=draw(st.booleans()),
                           count_include_pad=draw(st.booleans())), h, w


def _check(level: str, tmp: Path, attrs, h: int, w: int, kind: str, lanes: int, tasks: int,
           epilogue: tuple = (None, None, False)):
    """The kernel against the reference; ``epilogue``: (scale, shift, relu) on the pool, the
    vectors per channel (2 blocks of ``lanes``) or None."""
    lib = _harness(level, tmp)
    lib.harness_pool.argtypes = [ctypes.c_int, ctypes.c_int, F32, F32,
                                 ctypes.POINTER(ctypes.c_int32), F32, F32]
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = (attrs.pool_size, attrs.strides,
                                                      attrs.dilation, attrs.padding)
    oh = conv_out_size("pool", "height", h, kh, pt + pb, sh, dh, attrs.ceil_mode)
    ow = conv_out_size("pool", "width", w, kw, pl + pr, sw, dw, attrs.ceil_mode)
    x = np.random.default_rng(h * 16 + w).standard_normal((2, 2, h, w, lanes)).astype("float32")
    out = np.full((2, 2, oh, ow, lanes), np.nan, "float32")
    scale, shift, relu = epilogue
    sizes = np.array([2, 2, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, kind == "avg",
                      int(attrs.count_include_pad), int(relu)], "int32")
    vec = [v.ctypes.data_as(F32) if v is not None else None for v in (scale, shift)]
    rc = lib.harness_pool(lanes, tasks, x.ctypes.data_as(F32), out.ctypes.data_as(F32),
                          sizes.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), *vec)
    assert rc == 0
    # the reference in NCHW: the lanes are channels of their block
    nchw = x.transpose(0, 1, 4, 2, 3).reshape(2, 2 * lanes, h, w)
    ref = pool2d_ref(nchw, attrs, kind)
    if scale is not None:
        ref = ref * scale[None, :, None, None]
    if shift is not None:
        ref = ref + shift[None, :, None, None]
    ref = np.maximum(ref, 0) if relu else ref
    want = ref.reshape(2, 2, lanes, oh, ow).transpose(0, 1, 3, 4, 2)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6, err_msg=f"{level} {attrs}")


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=pools(), kind=st.sampled_from(["max", "avg"]), lanes=st.sampled_from([4, 8, 16]),
       tasks=st.integers(1, 3))
def test_pools_match_the_reference_at_every_level(tmp_path_factory, level, case, kind, lanes,
                                                  tasks):
    attrs, h, w = case
    _check(level, tmp_path_factory.getbasetemp(), attrs, h, w, kind, lanes, tasks)


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
def test_sppf_pool_interior_columns_at_every_level(tmp_path_factory, level):
    # yolov8's SPPF (5x5, stride 1, padding 2) on a 20-wide map: four-column interior blocks
    attrs = SimpleNamespace(pool_size=(5, 5), strides=(1, 1), dilation=(1, 1),
                            padding=(2, 2, 2, 2), layout="NCHW", ceil_mode=False,
                            count_include_pad=False)
    for kind in ("max", "avg"):
        _check(level, tmp_path_factory.getbasetemp(), attrs, 7, 20, kind, 8, 2)


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
@pytest.mark.parametrize("window", [(3, 2), (2, 2), (5, 1), (3, 1), (1, 1), (3, 3)])
def test_window_width_and_stride_as_constants_at_every_level(tmp_path_factory, level, window):
    # the interior blocks of four outputs whose window width and stride the kernel takes as
    # constants (inception's and squeezenet's 3x3 s2, vgg's 2x2 s2, yolov8's 5x5 s1, ...) and
    # one it does not (3x3 s3), with taller windows, padding on one side and ceil_mode's tail
    kw, sw = window
    for kh, sh, pads, ceil in ((3, 2, (0, 0, 0, 0), True), (kw, sw, (1, 1, 0, 0), False),
                               (2, 1, (0, kw // 2, 1, kw // 2), False)):
        pads = tuple(min(q, k - 1) for q, k in zip(pads, (kh, kw, kh, kw), strict=True))
        attrs = SimpleNamespace(pool_size=(kh, kw), strides=(sh, sw), dilation=(1, 1),
                                padding=pads, layout="NCHW", ceil_mode=ceil,
                                count_include_pad=True)
        for kind, lanes in (("max", 16), ("avg", 8), ("max", 4)):
            _check(level, tmp_path_factory.getbasetemp(), attrs, 7, 31, kind, lanes, 2)


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
def test_epilogue_scale_shift_relu_at_every_level(tmp_path_factory, level):
    # resnet's stem: a 3x3 stride-2 max pool, then a batch norm and relu (one kernel)
    attrs = SimpleNamespace(pool_size=(3, 3), strides=(2, 2), dilation=(1, 1),
                            padding=(1, 1, 1, 1), layout="NCHW", ceil_mode=False,
                            count_include_pad=False)
    rng = np.random.default_rng(3)
    for lanes in (4, 8, 16):
        scale = rng.uniform(-1.5, 1.5, 2 * lanes).astype("float32")  # negative: relu matters
        shift = rng.standard_normal(2 * lanes).astype("float32")
        for epi in ((scale, shift, True), (scale, None, True), (None, shift, False),
                    (None, None, True)):
            # 11 columns: interior blocks of four and the edge columns one by one
            _check(level, tmp_path_factory.getbasetemp(), attrs, 9, 21, "max", lanes, 2, epi)
        # an average pool takes the same epilogue (after its division)
        _check(level, tmp_path_factory.getbasetemp(), attrs, 5, 6, "avg", lanes, 1,
               (scale, shift, True))


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
def test_epilogue_without_relu_keeps_infinities_at_every_level(tmp_path_factory, level):
    # windows wholly in the padding (2-wide, dilation 2, padding 1 over a 1-row map) give
    # -inf, which an epilogue without relu keeps: its identity lower bound must be -inf
    shift = np.linspace(-1, 1, 16).astype("float32")
    attrs = SimpleNamespace(pool_size=(2, 2), strides=(1, 1), dilation=(2, 2),
                            padding=(1, 1, 1, 1), layout="NCHW", ceil_mode=False,
                            count_include_pad=False)
    _check(level, tmp_path_factory.getbasetemp(), attrs, 1, 11, "max", 8, 1,
           (None, shift, False))


def test_a_global_pool_of_many_channels_splits_its_rows_over_threads():
    """pool_threads: mobilenet_v2's 7x7 global average pool over 1280 channels (62720 window
    taps, 4 us on one core, below the conv's PARALLEL_MACS) goes to threads; resnet18's over
    512 channels (25088 taps, ~1.5 us: less than a launch saves) and a one-row-of-blocks pool
    stay on the calling thread."""
    from ember.topi.nn.pool_nchwc import pool_threads

    assert pool_threads(1, 80, 16, 1, 1, 7, 7) == 1
    assert pool_threads(1, 160, 8, 1, 1, 7, 7) == 1
    assert pool_threads(1, 32, 16, 1, 1, 7, 7) == 0
    assert pool_threads(1, 1, 16, 1, 1, 64, 64) == 0  # one row of blocks: nothing to split
