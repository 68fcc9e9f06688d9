"""The Winograd conv kernel (ember/kernels/conv_winograd.h) against a float64 numpy conv.

One C harness (conv_winograd_harness.c) per SIMD level: the host's, AVX2+FMA, and the plain
C99 path (test_conv2d_nchwc.py's levels). Tolerance: the direct kernel's (rtol 1e-4, atol 1e-4)
for F(2x2, 3x3); ten times its atol for F(4x4, 3x3), whose transforms (entries up to 8 and
1/24, sums of 6 x 6 terms) round about 10-40x as much as the direct sums: measured on
64-512-channel convs of N(0, 1) inputs and He-scaled weights (outputs of rms 1.3), the
largest error was 2e-6..7e-6 for F(2, 3), 3e-5..8e-5 for F(4, 3), 2e-6..5e-6 for the direct
kernel.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conv2d_nchwc import GELU_PARAMS, HARNESS, _epilogue, _harness

from ember.relay.op.nn.conv import conv2d_nchw
from ember.topi.nn import conv2d_nchwc as K
from ember.topi.nn import conv2d_winograd as W

WINO = HARNESS.with_name("conv_winograd_harness.c")
F32 = ctypes.POINTER(ctypes.c_float)
LEVELS = ("native", "x86-64-v3", "portable")


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {"dir": tmp_path_factory.mktemp("wino_harness")}


def _lib(libs: dict, level: str) -> ctypes.CDLL:
    return _harness(libs, level, WINO)


def run_wino(lib: ctypes.CDLL, *, ic: int, oc: int, h: int, w: int, m: int,
             pads: tuple = (1, 1, 1, 1), lanes: int = 8, n: int = 1, act: str = "none",
             residual: bool = False, after: bool = True, tiles: int = 6,
             blocks: int | None = None, tasks: int = 1, workspace: bool = True,
             seed: int = 0, check: bool = True, weight_m: int | None = None) -> np.ndarray:
    """One conv through the harness, checked against numpy (returns the blocked output);
    ``weight_m``: the weights transformed for that m instead."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, ic, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, ic, 3, 3)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    ref = conv2d_nchw(x.astype("float64"), wt.astype("float64"), (1, 1), pads, (1, 1), 1)
    ref = ref + b.reshape(1, -1, 1, 1)
    res = rng.uniform(-1, 1, ref.shape).astype("float32") if residual else None
    clip = GELU_PARAMS.get(act, (-0.25, 0.5))
    expect = _epilogue(ref, act, clip, res, after)
    oh, ow = ref.shape[2:]
    out = np.full((n, oc // lanes, oh, ow, lanes), np.nan, "float32")
    resb = K.to_blocked(res, lanes) if res is not None else out
    flags = (K.RESIDUAL | (K.ACT_AFTER_ADD if after else 0)) if residual else 0
    ints = np.array([n, ic // lanes, h, w, oc // lanes, oh, ow, pads[0], pads[1], m,
                     K.ACTIVATIONS[act], flags, tiles, blocks or oc // lanes,
                     1 if tasks > 1 else 0], "int32")
    xb, u = K.to_blocked(x, lanes), W.transform_weight(wt, weight_m or m, lanes)
    lib.harness_set_tasks(tasks)
    lib.harness_set_workspace(int(workspace))
    try:
        rc = lib.harness_wino(lanes, xb.ctypes.data_as(F32), u.ctypes.data_as(F32),
                              b.ctypes.data_as(F32), resb.ctypes.data_as(F32),
                              out.ctypes.data_as(F32),
                              ints.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                              ctypes.c_float(clip[0]), ctypes.c_float(clip[1]))
    finally:
        lib.harness_set_workspace(1)
    assert rc == 0
    assert lib.harness_live_workspace() == 0
    if check:
        atol = (1e-4 if m == 2 else 1e-3) * max(1.0, ic * 9 / 576)  # a 64-channel 3x3's sums
        np.testing.assert_allclose(K.from_blocked(out), expect, rtol=1e-4, atol=atol)
    return out


EDGE = {
    "1x1_map": {"ic": 8, "oc": 16, "h": 1, "w": 1},
    "2x2_map": {"ic": 16, "oc": 8, "h": 2, "w": 2},
    "3x5_map": {"ic": 8, "oc": 8, "h": 3, "w": 5},
    "odd_map_several_blocks": {"ic": 24, "oc": 40, "h": 9, "w": 13},
    "no_padding": {"ic": 8, "oc": 8, "h": 7, "w": 6, "pads": (0, 0, 0, 0)},
    "padding_2": {"ic": 8, "oc": 8, "h": 5, "w": 4, "pads": (2, 2, 2, 2)},
    "asymmetric_padding": {"ic": 16, "oc": 8, "h": 6, "w": 7, "pads": (0, 2, 1, 0)},
    "asymmetric_padding_2": {"ic": 8, "oc": 16, "h": 5, "w": 9, "pads": (2, 0, 0, 1)},
    "batch_2_relu": {"ic": 8, "oc": 16, "h": 5, "w": 5, "n": 2, "act": "relu"},
    "clip": {"ic": 8, "oc": 8, "h": 6, "w": 6, "act": "clip"},
    "silu": {"ic": 8, "oc": 8, "h": 5, "w": 7, "act": "silu"},
    "gelu_tanh_residual_first": {"ic": 8, "oc": 8, "h": 4, "w": 6, "act": "gelu_tanh",
                                 "residual": True},
    "hardswish": {"ic": 8, "oc": 8, "h": 3, "w": 4, "act": "hardswish"},
    "hardswish_then_residual": {"ic": 8, "oc": 8, "h": 5, "w": 5, "act": "hardswish",
                                "residual": True, "after": False},
    "residual_then_leaky_relu": {"ic": 8, "oc": 8, "h": 5, "w": 3, "act": "leaky_relu",
                                 "residual": True},
    "hardsigmoid": {"ic": 8, "oc": 8, "h": 2, "w": 5, "act": "hardsigmoid"},
    "mish_then_residual": {"ic": 8, "oc": 8, "h": 5, "w": 6, "act": "mish", "residual": True,
                           "after": False},
    "gelu_erf_then_residual": {"ic": 8, "oc": 8, "h": 3, "w": 7, "act": "gelu_erf",
                               "residual": True, "after": False},
    "residual_then_relu": {"ic": 8, "oc": 16, "h": 5, "w": 6, "act": "relu", "residual": True},
    "relu_then_residual": {"ic": 8, "oc": 16, "h": 5, "w": 6, "act": "relu", "residual": True,
                           "after": False},
    "residual_no_act": {"ic": 16, "oc": 8, "h": 4, "w": 5, "residual": True},
    "block_ranges": {"ic": 8, "oc": 40, "h": 6, "w": 6, "blocks": 2, "tiles": 1},
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("m", W.TILE_SIZES)
@pytest.mark.parametrize("case", sorted(EDGE))
def test_edges(libs: dict, level: str, m: int, case: str) -> None:
    run_wino(_lib(libs, level), m=m, **EDGE[case])


@pytest.mark.parametrize("lanes", (4, 8, 16))
@pytest.mark.parametrize("m", W.TILE_SIZES)
def test_lane_counts(libs: dict, lanes: int, m: int) -> None:
    """Every lane count at every level (SSE: 16 lanes are four registers, the 3x2 tile)."""
    for level in ("native", "x86-64-v3", "x86-64-v2", "portable"):
        run_wino(_lib(libs, level), ic=2 * lanes, oc=lanes, h=6, w=7, m=m, lanes=lanes,
                 pads=(1, 0, 2, 1), act="relu", residual=True)


@pytest.mark.parametrize("m", W.TILE_SIZES)
def test_no_workspace_and_task_split(libs: dict, m: int) -> None:
    """No workspace (the stack path, each input transform shared by up to 4 output blocks: 7
    here, in items of 4 and 3 blocks, or of 2 and 1), two tasks and more tasks than items give
    the same bits as the workspace path in one task."""
    lib = _lib(libs, "native")
    for case in ({"ic": 16, "oc": 56, "h": 11, "w": 9, "m": m, "n": 2, "act": "relu",
                  "tiles": 6, "blocks": 4, "residual": True},
                 {"ic": 24, "oc": 56, "h": 7, "w": 5, "m": m, "act": "silu", "tiles": 4,
                  "blocks": 2, "residual": True, "after": False}):
        one = run_wino(lib, **case)
        np.testing.assert_array_equal(run_wino(lib, **case, workspace=False), one)
        for tasks in (2, 40):
            np.testing.assert_array_equal(run_wino(lib, **case, tasks=tasks), one)


def test_bad_tile_size(libs: dict) -> None:
    lib = _lib(libs, "portable")
    with pytest.raises(AssertionError):  # the kernel returns -1
        run_wino(lib, ic=8, oc=8, h=4, w=4, m=3, weight_m=2, check=False)
    with pytest.raises(Exception, match="tile size 3"):
        W.transform_weight(np.zeros((8, 8, 3, 3), "float32"), 3, 8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(icb=st.integers(1, 3), ocb=st.integers(1, 3), h=st.integers(1, 12), w=st.integers(1, 12),
       pads=st.tuples(*[st.integers(0, 2)] * 4), m=st.sampled_from(W.TILE_SIZES),
       tiles=st.integers(1, 20), blocks=st.integers(1, 3))
def test_shapes(libs: dict, icb: int, ocb: int, h: int, w: int, pads: tuple, m: int,
                tiles: int, blocks: int) -> None:
    if h + pads[0] + pads[2] < 3 or w + pads[1] + pads[3] < 3:
        return
    run_wino(_lib(libs, "native"), ic=8 * icb, oc=8 * ocb, h=h, w=w, pads=pads, m=m,
             tiles=tiles, blocks=blocks, act="relu")


def test_transform_weight_is_winograd() -> None:
    """U of a filter, applied to one patch by the transforms, gives the direct conv's tile."""
    rng = np.random.default_rng(3)
    for m in W.TILE_SIZES:
        a = m + 2
        g = rng.standard_normal((4, 4, 3, 3))
        d = rng.standard_normal((4, a, a))  # [ic, a, a]
        u = W.transform_weight(g.astype("float32"), m, 4).reshape(a, a, 4, 4).astype("float64")
        bt, at = (np.array(t, "float64") for t in W.transforms(m))
        v = np.einsum("ik,ckl,jl->cij", bt, d, bt)
        y = np.einsum("pi,ijoc,cij,qj->opq", at, u.transpose(0, 1, 3, 2)[:, :, :, :], v, at)
        direct = conv2d_nchw(d[None], g, (1, 1), (0, 0, 0, 0), (1, 1), 1)[0]
        np.testing.assert_allclose(y, direct, rtol=1e-5, atol=1e-5)


def test_transform_weight_in_chunks_matches_one_filter_at_a_time(monkeypatch) -> None:
    """The GEMM over all filters, cut into chunks (here of 5 filters: ragged last chunk),
    gives each filter's G g G^T (float64, rounded once to float32) in [a*a, O/L, I, L]."""
    monkeypatch.setattr(W, "_TRANSFORM_CHUNK", 5)
    rng = np.random.default_rng(4)
    wt = rng.standard_normal((8, 3, 3, 3)).astype("float32")
    for m in W.TILE_SIZES:
        a, g = m + 2, np.asarray(W._G[m], "float64")
        u = W.transform_weight(wt, m, 4)
        assert u.shape == (a * a, 2, 3, 4) and u.dtype == np.float32 and u.flags.c_contiguous
        for o in range(8):
            for i in range(3):
                ref = (g @ wt[o, i].astype("float64") @ g.T).reshape(a * a)
                np.testing.assert_allclose(u[:, o // 4, i, o % 4], ref, rtol=2e-7, atol=1e-30)


def test_few_items_are_cut_finer_for_many_tasks(libs: dict) -> None:
    """A 7x7 map's 16 tiles in one chunk of 4 block ranges kept 4 of 16 tasks busy (resnet18's
    512->512 at 16 threads): the kernel recuts them so that no task has more than a sixth of the
    outputs, with the bits of one task."""
    lib = _lib(libs, "native")
    case = {"ic": 32, "oc": 64, "h": 7, "w": 7, "m": 2, "tiles": 18, "blocks": 2, "lanes": 8}
    one = run_wino(lib, **case)
    out = np.full(one.shape, np.nan, "float32")
    owner = np.full(one.size, -1, "int32")
    lib.harness_watch.argtypes = [F32, ctypes.c_long, ctypes.POINTER(ctypes.c_int32)]
    # run_wino's output buffer is its own: watch a run through the harness directly
    rng = np.random.default_rng(0)
    x = K.to_blocked(rng.uniform(-1, 1, (1, 32, 7, 7)).astype("float32"), 8)
    u = W.transform_weight(rng.uniform(-1, 1, (64, 32, 3, 3)).astype("float32"), 2, 8)
    b = np.zeros(64, "float32")
    ints = np.array([1, 4, 7, 7, 8, 7, 7, 1, 1, 2, 0, 0, 18, 2, 1], "int32")
    lib.harness_set_tasks(16)
    lib.harness_watch(out.ctypes.data_as(F32), out.size, owner.ctypes.data_as(
        ctypes.POINTER(ctypes.c_int32)))
    try:
        rc = lib.harness_wino(8, x.ctypes.data_as(F32), u.ctypes.data_as(F32),
                              b.ctypes.data_as(F32), out.ctypes.data_as(F32),
                              out.ctypes.data_as(F32),
                              ints.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                              ctypes.c_float(0), ctypes.c_float(0))
    finally:
        lib.harness_watch(None, 0, None)
        lib.harness_set_tasks(1)
    assert rc == 0
    assert owner.min() >= 0
    # before: 4 items, a quarter of the outputs each; now 12 (chunks of 6, 6 and 4 tiles x 4
    # block ranges: a shorter longest task than 16 items of 1 block, which repeat more input
    # transforms)
    assert np.bincount(owner).max() <= out.size / 6
    np.testing.assert_array_equal(run_wino(lib, **case, tasks=16), one)
