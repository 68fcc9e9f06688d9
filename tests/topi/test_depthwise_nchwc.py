"""The depthwise NCHW[L]c kernel (ember_depthwise_nchwc_x<L> in ember/kernels/conv_nchwc.h)
against numpy: the K-wide row tiles (K = 3, 5, 7 at stride 1 and 2: each input vector loaded
once per kernel row; 12 columns for 3-wide rows on maps of 24 columns or more) with their edge
variants (borders, the rest of a row, rows narrower than a tile, 1x1 maps), the two-row tiles
of whole-row strips at stride 1 and 2 on AVX-512 (the same bits as one row at a time), the tile-wide
epilogue (none, relu, clip; the others per vector, with or without a residual), and the
generic tile for the other windows (dilation, stride 3, 1x4).

One small harness (depthwise_nchwc_harness.c: the depthwise entry alone, one lane count) is
built per (SIMD level, lanes); the default run builds the host's 8-lane one and the portable
4-lane one, the other levels and lane counts run under ``-m slow``.
"""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_conv2d_nchwc import CC, INCLUDE, LEVEL_FLAGS, STRICT, _host_runs, run_case

HARNESS = Path(__file__).with_name("depthwise_nchwc_harness.c")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

# name -> run_case arguments (groups == ic == oc: depthwise); lanes divide every channel count
CASES = {
    "3x3_interior_and_edges": {"ic": 16, "h": 9, "w": 21},
    "3x3_wide_rows_12_column_tiles": {"ic": 16, "h": 5, "w": 41, "act": "clip"},
    "3x3_wide_rows_hardswish_residual": {"ic": 16, "h": 4, "w": 30, "act": "hardswish",
                                         "residual": True, "after": False},
    "3x3_stride2_odd": {"ic": 16, "h": 7, "w": 19, "s": (2, 2), "act": "hardswish"},
    "5x5": {"ic": 16, "h": 9, "w": 19, "k": (5, 5), "pads": (2, 2, 2, 2)},
    "5x5_stride2_odd": {"ic": 32, "h": 11, "w": 23, "k": (5, 5), "s": (2, 2),
                        "pads": (2, 2, 2, 2), "act": "silu"},
    "5x5_7x7_map": {"ic": 16, "h": 7, "w": 7, "k": (5, 5), "pads": (2, 2, 2, 2)},
    "5x5_1x1_map": {"ic": 16, "h": 1, "w": 1, "k": (5, 5), "pads": (2, 2, 2, 2)},
    "5x5_narrower_than_kernel": {"ic": 16, "h": 3, "w": 2, "k": (5, 5), "s": (2, 2),
                                 "pads": (2, 2, 2, 2)},
    "5x5_asymmetric_pads": {"ic": 16, "h": 8, "w": 17, "k": (5, 5), "pads": (1, 0, 3, 4),
                            "residual": True, "after": False, "act": "clip"},
    "5x5_no_padding": {"ic": 16, "h": 9, "w": 30, "k": (5, 5), "pads": (0, 0, 0, 0)},
    "7x7": {"ic": 16, "h": 10, "w": 20, "k": (7, 7), "pads": (3, 3, 3, 3), "residual": True},
    "7x7_stride2": {"ic": 16, "h": 9, "w": 15, "k": (7, 7), "s": (2, 2), "pads": (3, 2, 3, 3)},
    "7x7_3x3_map": {"ic": 16, "h": 3, "w": 3, "k": (7, 7), "pads": (3, 3, 3, 3)},
    "5x5_dilated_generic": {"ic": 16, "h": 9, "w": 13, "k": (5, 5), "d": (2, 2),
                            "pads": (4, 4, 4, 4)},
    "5x5_stride3_generic": {"ic": 16, "h": 9, "w": 14, "k": (5, 5), "s": (3, 3),
                            "pads": (2, 2, 2, 2)},
    "1x4_generic": {"ic": 16, "h": 4, "w": 9, "k": (1, 4), "pads": (0, 1, 0, 2)},
    "batch2_split_over_tasks": {"ic": 32, "h": 6, "w": 12, "k": (5, 5), "pads": (2, 2, 2, 2),
                                "n": 2, "tasks": 3, "tiles": (1, 1, 5, 0)},
    # whole rows at stride 1 or 2: pairs of rows in one tile on AVX-512 (ember_dw_strip2)
    "3x3_dscnn_25x5_map": {"ic": 32, "h": 25, "w": 5},
    "3x3_odd_rows_silu_residual": {"ic": 16, "h": 7, "w": 10, "act": "silu", "residual": True,
                                   "after": False},
    "5x5_map_shorter_than_kernel": {"ic": 16, "h": 3, "w": 6, "k": (5, 5), "pads": (2, 2, 2, 2)},
    "7x7_uneven_row_pads": {"ic": 16, "h": 8, "w": 9, "k": (7, 7), "pads": (1, 3, 5, 3),
                            "act": "clip"},
    "3x3_stride_2_by_1_single_rows": {"ic": 16, "h": 9, "w": 11, "s": (2, 1)},
}


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {"dir": tmp_path_factory.mktemp("dw_harness")}


def _lib(libs: dict, level: str, lanes: int) -> ctypes.CDLL:
    if (level, lanes) not in libs:
        if not _host_runs(level):
            pytest.skip(f"this machine cannot run {level} code")
        so = libs["dir"] / f"dw_{level}_{lanes}.so"
        cmd = [CC, *STRICT, *LEVEL_FLAGS[level], f"-DEMBER_KERNEL_LANES={lanes}", "-fPIC",
               "-shared", f"-I{INCLUDE}", str(HARNESS), "-o", str(so)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[:4000]
        libs[(level, lanes)] = ctypes.CDLL(str(so))
    return libs[(level, lanes)]


def _run(lib: ctypes.CDLL, lanes: int, case: dict) -> None:
    kwargs = {"k": (3, 3), "pads": (1, 1, 1, 1), "act": "relu", **case}
    ic = kwargs.pop("ic")
    run_case(lib, ic=ic, oc=ic, groups=ic, lanes=lanes, **kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_depthwise_native_8_lanes(libs, case):
    _run(_lib(libs, "native", 8), 8, CASES[case])


@pytest.mark.parametrize("case", list(CASES))
def test_depthwise_portable(libs, case):
    _run(_lib(libs, "portable", 4), 4, CASES[case])


@pytest.mark.slow
@pytest.mark.parametrize(("level", "lanes"), [("native", 4), ("native", 16), ("x86-64-v3", 8),
                                              ("x86-64-v3", 16), ("x86-64-v2", 4)])
def test_depthwise_every_level(libs, level, lanes):
    lib = _lib(libs, level, lanes)
    for case in CASES.values():
        _run(lib, lanes, case)



# (case, strip): the row pairs of whole-row strips against one row at a time (narrower strips)
SAME_BITS = [("3x3_dscnn_25x5_map", 2), ("3x3_odd_rows_silu_residual", 4),
             ("3x3_wide_rows_12_column_tiles", 25),  # pairs of 8-wide tiles vs 12-wide
             ("3x3_stride2_odd", 3), ("5x5_stride2_odd", 5), ("7x7_stride2", 4),
             ("5x5_map_shorter_than_kernel", 5), ("7x7_uneven_row_pads", 3)]


@pytest.mark.parametrize(("case", "strip"), SAME_BITS)
def test_depthwise_row_pairs_give_the_same_bits(libs, case, strip):
    """Each output sums the same products in the same order whether its row is computed in a
    pair (whole-row strips on an AVX-512 host; elsewhere every row is single), alone (narrower
    strips), or on 3 and 5 tasks (odd item counts per task: a pair cut by a task boundary runs
    as single rows, where the per-task recut keeps whole rows: the dscnn map, the map shorter
    than its kernel, the 7x7 at stride 2)."""
    lib = _lib(libs, "native", 8)
    kwargs = {"k": (3, 3), "pads": (1, 1, 1, 1), "act": "relu", **CASES[case]}
    ic, w = kwargs.pop("ic"), kwargs["w"]
    outs = [run_case(lib, ic=ic, oc=ic, groups=ic, lanes=8, tasks=tasks, tiles=(1, 1, cut, 0),
                     **kwargs)
            for tasks, cut in ((1, w), (3, w), (5, w), (1, strip))]
    for other in outs[1:]:
        assert np.array_equal(outs[0], other)


def test_an_empty_output_returns_at_once_and_a_zero_strip_is_refused(libs):
    """A map of no columns has no work: 0 on one task and on three (the per-task strip recut
    divided by the row's strips, 0 here); a strip of 0 columns is a caller's error: -1."""
    lib = _lib(libs, "native", 8)
    buf = np.zeros(256, "float32")
    ptr = buf.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    for tasks, strip, rc in ((1, 1, 0), (3, 1, 0), (1, 0, -1)):
        lib.harness_set_tasks(tasks)
        # n, blocks, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, act, flags, strip, threads
        ints = np.array([1, 1, 4, 0, 4, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, strip, tasks > 1],
                        "int32")
        assert lib.harness_depthwise(8, ptr, ptr, ptr, ptr, ptr,
                                     ints.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                     ctypes.c_float(0), ctypes.c_float(0)) == rc
