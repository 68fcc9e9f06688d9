"""The plain-NCHW pooling kernels (ember/kernels/pool_nchw.h) against Relay's numpy reference at
every SIMD level this machine runs (the levels of test_conv2d_nchwc), over shapes hypothesis
draws: every channel count 1-21, 1x1 maps, odd sizes, asymmetric windows and strides, strides
above the kernel, dilation, asymmetric padding, ceil_mode, count_include_pad, and the work
split over 1-3 tasks; rows wide enough for the vector loops (2V, V and the overlapping tail).
Exact for max; rtol 1e-5 / atol 1e-6 for averages."""
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

HARNESS = Path(__file__).with_name("pool_nchw_harness.c")
F32 = ctypes.POINTER(ctypes.c_float)
I32 = ctypes.POINTER(ctypes.c_int32)
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")
_LIBS: dict[str, ctypes.CDLL] = {}
# the scratch sizes a 32-bit (microcontroller) build gets: rows over ~250 columns and planes
# over 384 floats take the scalar loop
LEVELS = {**LEVEL_FLAGS, "small-stack": ["-march=native", "-DEMBER_PN_ROW=256",
                                         "-DEMBER_PN_FLAT=384"]}


def _harness(level: str, tmp: Path) -> ctypes.CDLL:
    if level not in _LIBS:
        if not _host_runs(level if level in LEVEL_FLAGS else "native"):
            pytest.skip(f"this machine cannot run {level} code")
        so = tmp / f"pool_nchw_harness_{level}.so"
        cmd = [CC, *STRICT, *LEVELS[level], "-fPIC", "-shared", f"-I{INCLUDE}",
               str(HARNESS), "-o", str(so)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[:4000]
        lib = ctypes.CDLL(str(so))
        for fn in (lib.harness_pool, lib.harness_global_pool):
            fn.argtypes = [ctypes.c_int, F32, F32, I32]
        _LIBS[level] = lib
    return _LIBS[level]


def _attrs(kernel, strides, dilation, padding, ceil_mode, include_pad) -> SimpleNamespace:
    return SimpleNamespace(pool_size=kernel, strides=strides, dilation=dilation,
                           padding=padding, layout="NCHW", ceil_mode=ceil_mode,
                           count_include_pad=include_pad)


@st.composite
def pools(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw))  # top, left, bottom, right
    h = draw(st.integers(max(1, (kh - 1) * dh + 1 - pads[0] - pads[2]), 9))
    w = draw(st.integers(max(1, (kw - 1) * dw + 1 - pads[1] - pads[3]), 75))
    attrs = _attrs((kh, kw), (sh, sw), (dh, dw), pads, draw(st.booleans()), draw(st.booleans()))
    return attrs, draw(st.integers(1, 21)), h, w


def _check(level: str, tmp: Path, attrs, c: int, h: int, w: int, kind: str, tasks: int,
           n: int = 2) -> None:
    lib = _harness(level, tmp)
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = (attrs.pool_size, attrs.strides,
                                                      attrs.dilation, attrs.padding)
    oh = conv_out_size("pool", "height", h, kh, pt + pb, sh, dh, attrs.ceil_mode)
    ow = conv_out_size("pool", "width", w, kw, pl + pr, sw, dw, attrs.ceil_mode)
    x = np.random.default_rng(h * 100 + w).standard_normal((n, c, h, w)).astype("float32")
    out = np.full((n, c, oh, ow), np.nan, "float32")
    sizes = np.array([n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, kind == "avg",
                      int(attrs.count_include_pad)], "int32")
    assert lib.harness_pool(tasks, x.ctypes.data_as(F32), out.ctypes.data_as(F32),
                            sizes.ctypes.data_as(I32)) == 0
    np.testing.assert_allclose(out, pool2d_ref(x, attrs, kind), rtol=1e-5, atol=1e-6,
                               err_msg=f"{level} c={c} h={h} w={w} {attrs}")


@pytest.mark.parametrize("level", list(LEVELS))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=pools(), kind=st.sampled_from(["max", "avg"]), tasks=st.integers(1, 3))
def test_pools_match_the_reference_at_every_level(tmp_path_factory, level, case, kind, tasks):
    attrs, c, h, w = case
    _check(level, tmp_path_factory.getbasetemp(), attrs, c, h, w, kind, tasks)


@pytest.mark.parametrize("level", list(LEVELS))
@pytest.mark.parametrize("window", [((3, 3), (2, 2), (1, 1, 1, 1)), ((2, 2), (2, 2), (0,) * 4),
                                    ((3, 3), (1, 1), (1, 1, 1, 1)), ((5, 5), (1, 1), (2,) * 4),
                                    ((3, 3), (2, 2), (0,) * 4), ((1, 3), (1, 2), (0, 1, 0, 1))])
def test_the_models_windows_at_every_level(tmp_path_factory, level, window):
    # the zoo's pools (3x3 s2, 2x2 s2, 3x3 s1 avg, SPPF's 5x5 s1, ceil_mode 3x3 s2) on rows
    # of 2V + V + a tail columns at every V, and maps of 1x1 and 7x7
    kernel, strides, pads = window
    for (h, w), ceil, inc in (((9, 70), True, True), ((7, 7), False, False),
                              ((1, 1), True, False), ((12, 41), False, True)):
        if any(s + a + b < k for s, k, a, b in ((h, kernel[0], pads[0], pads[2]),
                                                (w, kernel[1], pads[1], pads[3]))):
            continue
        for kind in ("max", "avg"):
            _check(level, tmp_path_factory.getbasetemp(),
                   _attrs(kernel, strides, (1, 1), pads, ceil, inc), 3, h, w, kind, 2)


@pytest.mark.parametrize("level", list(LEVELS))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 2), c=st.integers(1, 21), h=st.integers(1, 20), w=st.integers(1, 20),
       kind=st.sampled_from(["max", "avg"]), tasks=st.integers(1, 3))
def test_global_pools_match_numpy_at_every_level(tmp_path_factory, level, n, c, h, w, kind,
                                                 tasks):
    lib = _harness(level, tmp_path_factory.getbasetemp())
    x = np.random.default_rng(h * 100 + w).standard_normal((n, c, h, w)).astype("float32")
    out = np.full((n, c, 1, 1), np.nan, "float32")
    sizes = np.array([n, c, h, w, kind == "avg"], "int32")
    assert lib.harness_global_pool(tasks, x.ctypes.data_as(F32), out.ctypes.data_as(F32),
                                   sizes.ctypes.data_as(I32)) == 0
    want = x.max(axis=(2, 3), keepdims=True) if kind == "max" else x.mean(
        axis=(2, 3), keepdims=True, dtype=np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
