"""The NCHW-input conv kernel (ember/kernels/conv_nchw_input.h) against numpy, and its
schedule (ember/topi/nn/conv2d_nchw_input.py).

One C harness (conv_nchw_input_harness.c) serves every shape per SIMD level: the host's
(-march=native) and the plain C99 path (-DEMBER_KERNELS_PORTABLE) in the default run; AVX2+FMA
(x86-64-v3) and SSE only (x86-64-v2) forced, and AVX-512 compiled only (it cannot run here),
as slow tests. Every lane count (4, 8, 16) runs at every level. Tolerance: rtol 1e-4, atol
1e-4 against a float64 reference.
"""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember.relay.op.nn.conv import conv2d_nchw
from ember.target.simd import LEVELS
from ember.topi.nn import conv2d_nchw_input as N
from ember.topi.nn import conv2d_nchwc as K

from test_conv2d_nchwc import CC, INCLUDE, STRICT, X86, _epilogue
from test_conv2d_nchwc import _harness as conv_harness

HARNESS = Path(__file__).with_name("conv_nchw_input_harness.c")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")
F32 = ctypes.POINTER(ctypes.c_float)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {"dir": tmp_path_factory.mktemp("nchw_input_harness")}


def _harness(libs: dict, level: str) -> ctypes.CDLL:
    return conv_harness(libs, level, HARNESS)


def _ptr(a: np.ndarray) -> ctypes._Pointer:
    return a.ctypes.data_as(F32)


def run_case(lib: ctypes.CDLL, *, ic: int, oc: int, h: int, w: int, k: tuple = (3, 3),
             s: tuple = (1, 1), pads: tuple = (1, 1, 1, 1), lanes: int = 8, act: str = "relu",
             residual: bool = False, after: bool = True, n: int = 1, rw: int = 6,
             rows: int = 3, blocks: int = 0, tasks: int = 1, seed: int = 0,
             owner: np.ndarray | None = None) -> None:
    """One convolution through the harness, checked against numpy; ``owner`` (int32, the
    output's size, -1 each) gets the task that wrote each output float (harness_watch)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, ic, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, ic, *k)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    ref = conv2d_nchw(x.astype("float64"), wt.astype("float64"), s, pads, (1, 1), 1)
    ref = ref + b.reshape(1, -1, 1, 1)
    res = rng.uniform(-1, 1, ref.shape).astype("float32") if residual else None
    clip = (-0.25, 0.5)
    expect = _epilogue(ref, act, clip, res, after)
    oh, ow = ref.shape[2:]
    wp = K.pack_weight(wt, lanes, 1)
    out = np.full((n, oc // lanes, oh, ow, lanes), np.nan, "float32")
    resb = K.to_blocked(res, lanes) if res is not None else out
    flags = (K.RESIDUAL | (K.ACT_AFTER_ADD if after else 0)) if residual else 0
    ints = np.array([n, ic, h, w, oc // lanes, oh, ow, *k, *s, 1, 1, pads[0], pads[1],
                     K.ACTIVATIONS[act], flags, rw, rows, blocks, 1 if tasks > 1 else 0],
                    "int32")
    lib.harness_set_tasks(tasks)
    if owner is not None:
        lib.harness_watch(_ptr(out), ctypes.c_long(out.size), owner.ctypes.data_as(ctypes.c_void_p))
    rc = lib.harness_conv_nchw_input(lanes, _ptr(x), _ptr(wp), _ptr(b), _ptr(resb),
                                     _ptr(out), ints.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                     ctypes.c_float(clip[0]), ctypes.c_float(clip[1]))
    lib.harness_watch(None, ctypes.c_long(0), None)
    assert rc == 0
    np.testing.assert_allclose(K.from_blocked(out), expect, rtol=1e-4, atol=1e-4)
    assert lib.harness_live_workspace() == 0  # every row buffer freed


EDGE_CASES = {
    "dscnn_10x4_stride2": {"ic": 1, "oc": 64, "h": 49, "w": 10, "k": (10, 4), "s": (2, 2),
                           "pads": (4, 1, 5, 1)},
    "rgb_7x7_stride2": {"ic": 3, "oc": 16, "h": 23, "w": 21, "k": (7, 7), "s": (2, 2),
                        "pads": (3, 3, 3, 3), "rows": 4},
    "odd_map_stride2": {"ic": 3, "oc": 16, "h": 13, "w": 7, "s": (2, 2)},
    "1x1_map": {"ic": 2, "oc": 8, "h": 1, "w": 1},
    "kernel_larger_than_image": {"ic": 3, "oc": 8, "h": 2, "w": 3, "k": (5, 5),
                                 "pads": (2, 2, 2, 2)},
    "eight_channels": {"ic": 8, "oc": 16, "h": 7, "w": 9, "s": (1, 2)},
    "asymmetric_padding": {"ic": 4, "oc": 16, "h": 9, "w": 11, "pads": (0, 2, 1, 0)},
    "stride_above_kernel": {"ic": 3, "oc": 8, "h": 11, "w": 13, "k": (2, 2), "s": (3, 3),
                            "pads": (0, 1, 1, 0)},
    "patch_stride4": {"ic": 3, "oc": 16, "h": 16, "w": 20, "k": (4, 4), "s": (4, 4),
                      "pads": (0, 0, 0, 0)},
    "stride_1x2_kernel_1x3": {"ic": 1, "oc": 8, "h": 4, "w": 17, "k": (1, 3), "s": (1, 2),
                              "pads": (0, 1, 0, 1)},
    # an odd block count (a pair, then a single block), a batch split over tasks, a width-4
    # tile with a tail, one row per item
    "odd_blocks_batch_tasks": {"ic": 3, "oc": 24, "h": 10, "w": 9, "n": 2, "tasks": 3,
                               "rw": 4, "rows": 1},
    # a 1-D conv (one output row) with its 5 output blocks in items of 2 (2 + 2 + 1) split
    # over tasks, and in items of 3 (a pair and a single each)
    "conv1d_block_groups": {"ic": 1, "oc": 80, "h": 1, "w": 40, "k": (1, 10), "s": (1, 5),
                            "pads": (0, 0, 0, 0), "blocks": 2, "tasks": 2},
    "conv1d_block_groups_of_3": {"ic": 2, "oc": 80, "h": 1, "w": 23, "k": (1, 3),
                                 "pads": (0, 1, 0, 1), "blocks": 3, "tasks": 3, "act": "silu"},
    # widths 8, 10 and 12 (AVX-512 tiles; the widest instantiated one below elsewhere)
    "wide_tiles": {"ic": 3, "oc": 16, "h": 5, "w": 30, "rw": 12, "rows": 100},
    "ten_wide_tiles_dqn_stride_4": {"ic": 4, "oc": 32, "h": 44, "w": 84, "k": (8, 8),
                                    "s": (4, 4), "pads": (0, 0, 0, 0), "rw": 10},
    "five_wide_tiles": {"ic": 1, "oc": 16, "h": 6, "w": 12, "rw": 5, "s": (1, 2)},
    "residual_after": {"ic": 3, "oc": 16, "h": 7, "w": 8, "residual": True, "act": "clip"},
    "late_act_residual_before": {"ic": 3, "oc": 16, "h": 7, "w": 8, "residual": True,
                                 "after": False, "act": "silu", "tasks": 2},
    "hardswish_no_tail": {"ic": 3, "oc": 8, "h": 6, "w": 12, "act": "hardswish"},
    "none_act": {"ic": 3, "oc": 16, "h": 6, "w": 12, "act": "none"},
}


def _all_cases(lib: ctypes.CDLL) -> None:
    for name, case in EDGE_CASES.items():
        for lanes in (4, 8, 16):
            if case["oc"] % lanes:
                continue
            try:
                run_case(lib, lanes=lanes, **case)
            except AssertionError as err:
                raise AssertionError(f"case {name}, lanes {lanes}: {err}") from err


@pytest.mark.parametrize("level", ["native", "portable"])
def test_edge_cases_against_numpy(libs, level):
    _all_cases(_harness(libs, level))


@pytest.mark.slow
@pytest.mark.parametrize("level", ["x86-64-v3", "x86-64-v2"])
def test_edge_cases_at_forced_levels(libs, level):
    _all_cases(_harness(libs, level))


@pytest.mark.slow
@pytest.mark.skipif(not X86, reason="x86 only")
def test_avx512_build_compiles(tmp_path):
    cmd = [CC, *STRICT, "-march=skylake-avx512", "-c", f"-I{INCLUDE}", str(HARNESS), "-o",
           str(tmp_path / "h.o")]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[:4000]


def test_without_workspace_the_plain_loop_nest_runs(libs):
    """A task that gets no row buffer (a C-runtime arena with no room) runs conv_nchwc.h's
    plain loop nest over its items, with the same results."""
    lib = _harness(libs, "native")
    lib.harness_set_workspace(0)
    try:
        run_case(lib, **EDGE_CASES["odd_blocks_batch_tasks"])
        run_case(lib, **EDGE_CASES["late_act_residual_before"])
    finally:
        lib.harness_set_workspace(1)


def test_rows_per_item_follow_the_task_count(libs):
    """resnet18's first conv (7x7, stride 2, to 112 rows; a narrow map here), planned in items
    of 8 rows: on 16 tasks, 14 such items left two tasks idle; the kernel cuts items of 7 rows
    then, every task one (ember_nchw_in_task_rows), and on 2 tasks keeps 8 (7 each)."""
    lib = _harness(libs, "native")
    for tasks, most in ((16, 7), (2, 56)):
        owner = np.full((1, 2, 112, 5, 8), -1, "int32")
        run_case(lib, ic=3, oc=16, h=224, w=9, k=(7, 7), s=(2, 2), pads=(3, 3, 3, 3), rows=8,
                 tasks=tasks, owner=owner)
        rows = [len(np.unique(np.nonzero(owner == t)[2])) for t in range(tasks)]
        assert (owner >= 0).all() and max(rows) == most and min(rows) == most, rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(ic=st.integers(1, 8), ocb=st.integers(1, 3), h=st.integers(1, 12), w=st.integers(1, 14),
       kh=st.integers(1, 5), kw=st.integers(1, 5), sh=st.integers(1, 3), sw=st.integers(1, 3),
       pads=st.tuples(*[st.integers(0, 2)] * 4), rw=st.sampled_from([4, 5, 6, 8, 10, 12]),
       rows=st.integers(1, 5), blocks=st.integers(0, 3), tasks=st.integers(1, 3))
def test_random_shapes_against_numpy(libs, ic, ocb, h, w, kh, kw, sh, sw, pads, rw, rows,
                                     blocks, tasks):
    if h + pads[0] + pads[2] < kh or w + pads[1] + pads[3] < kw:
        return  # no output
    run_case(_harness(libs, "native"), ic=ic, oc=8 * ocb, h=h, w=w, k=(kh, kw), s=(sh, sw),
             pads=pads, rw=rw, rows=rows, blocks=blocks, tasks=tasks)


def _geo(ic=3, h=224, w=224, oc=64, k=7, s=2, n=1, in_block=1, groups=1, dilation=(1, 1)):
    oh, ow = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
    return K.ConvGeometry(n, ic, h, w, oc, oh, ow, k, k, (s, s), (k // 2,) * 4, dilation,
                          groups, 8, in_block)


def test_which_convs_take_the_kernel():
    assert N.nchw_input_applies(_geo())
    assert N.nchw_input_applies(_geo(ic=1, k=3, s=1))
    assert N.nchw_input_applies(_geo(ic=8))
    assert not N.nchw_input_applies(_geo(ic=9))  # more channels: the NCHW[L]c kernel
    assert not N.nchw_input_applies(_geo(in_block=3))  # the input is blocked
    assert not N.nchw_input_applies(_geo(k=1, s=1))  # 1x1: no taps to share
    assert not N.nchw_input_applies(_geo(dilation=(2, 2)))
    assert not N.nchw_input_applies(_geo(ic=4, oc=8, groups=2))


def test_schedule():
    avx2, avx512 = LEVELS["avx2"], LEVELS["avx512"]
    assert N.tile_width(5, avx2, 8) == 5  # one tile, no column spare
    assert N.tile_width(10, avx2, 8) == 5
    assert N.tile_width(7, avx2, 8) == 4  # 4 + 4, not 6 + 6
    assert N.tile_width(112, avx2, 8) == 6
    assert N.tile_width(112, avx512, 16) == 12
    assert N.tile_width(20, avx512, 16) == 10  # dqn's 8x8/4 conv: two tiles, no tail
    assert N.tile_width(112, avx2, 16) == 6  # 16 lanes on AVX2: the 16-register widths
    big = N.nchw_input_tiles(_geo(), avx2)
    assert big.threads == 1 and big.rw == 6
    assert -(-112 // big.rows) >= K.TARGET_ITEMS  # enough items for a few threads
    wb = (-(-112 // big.rw) * big.rw - 1) * 2 + 7
    assert 4 * 3 * ((big.rows - 1) * 2 + 7) * wb <= N.BUFFER_BYTES
    small = N.nchw_input_tiles(_geo(ic=1, h=6, w=5, oc=8, k=3, s=1), avx2)
    assert small.threads == 0 and small.rows == 6  # one item, on the calling thread
    assert small.blocks == 1 and big.blocks == 8  # every output block in each item
    # a 1-D conv (wav2vec2's first, one row of 16000 samples): its 32 blocks in 4 items
    wave = K.ConvGeometry(1, 1, 1, 16000, 512, 1, 3199, 1, 10, (1, 5), (0,) * 4, (1, 1), 1, 8,
                          1)
    split = N.nchw_input_tiles(wave, avx2)
    assert (split.rows, split.blocks, split.threads) == (1, 16, 1)
    dynamic = N.nchw_input_tiles(_geo(n=ember.tir.Var("n", "int32")), avx2)
    assert dynamic == big  # a run-time batch: one image's schedule


@settings(max_examples=60, deadline=None)
@given(ic=st.integers(1, 8), ocb=st.integers(1, 8), h=st.integers(1, 400), w=st.integers(1, 400),
       k=st.sampled_from([2, 3, 5, 7]), s=st.integers(1, 3), n=st.integers(1, 4),
       level=st.sampled_from(["avx2", "avx512", "sse"]))
def test_the_tile_expressions_fold_to_the_static_schedule(ic, ocb, h, w, k, s, n, level):
    # a run-time image gets expressions of its sizes; with static sizes they fold to exactly
    # the static schedule, so a dynamic build at a shape plans as the static build of it
    lanes = 16 if level == "avx512" else 8
    oh, ow = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
    if oh < 1 or ow < 1:
        return
    geo = K.ConvGeometry(n, ic, h, w, ocb * lanes, oh, ow, k, k, (s, s), (k // 2,) * 4, (1, 1),
                         1, lanes, 1)
    assert N.nchw_input_tile_exprs(geo, LEVELS[level]) == N.nchw_input_tiles(geo, LEVELS[level])


def test_a_run_time_image_takes_the_kernel_with_a_schedule_of_its_sizes():
    h, w = ember.tir.SizeVar("h", "int32"), ember.tir.SizeVar("w", "int32")
    geo = _geo(h=h, w=w)
    geo = K.ConvGeometry(geo.n, geo.ic, h, w, geo.oc, (h - 1) // 2 + 1, (w - 1) // 2 + 1,
                         geo.kh, geo.kw, geo.strides, geo.padding, geo.dilation, geo.groups,
                         geo.lanes, geo.in_block)
    assert N.nchw_input_applies(geo)
    tiles = N.nchw_input_tile_exprs(geo, LEVELS["avx2"])
    assert not isinstance(tiles.rw, int) and not isinstance(tiles.threads, int)


def test_a_conv_the_kernel_does_not_take_is_refused():
    """Called directly (not through conv2d_nchwc's selection) with a conv it cannot run: an
    error naming what is wrong, not a kernel reading out of bounds."""
    from ember.runtime.errors import OpError
    from ember.te import tensor as te

    for geo, what in ((_geo(in_block=3), "in_block=3"), (_geo(ic=16), "ic=16"),
                      (_geo(dilation=(2, 2)), "dilation")):
        data = te.placeholder((1, geo.ic // geo.in_block, geo.h, geo.w, geo.in_block), name="x")
        weight = te.placeholder((8, geo.ic // geo.in_block, 7, 7, geo.in_block, 8), name="w")
        bias = te.placeholder((64,), name="b")
        with pytest.raises(OpError, match=f"conv2d_nchw_input: .*{what}"):
            N.conv2d_nchw_input(data, weight, bias, None, geo, LEVELS["avx2"], [0, 0.0, 0.0, 0])
