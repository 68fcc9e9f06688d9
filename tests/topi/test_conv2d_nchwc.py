"""The NCHW[L]c conv micro-kernels (ember/kernels/conv_nchwc.h) against numpy.

One C harness (conv_nchwc_harness.c) exposes every entry point with its sizes in an array, so
one compiled library per SIMD level serves all shapes, and hypothesis can draw many. Levels:
the host's (-march=native), AVX2+FMA (x86-64-v3), SSE only (x86-64-v2) and the plain C99 path
(-DEMBER_KERNELS_PORTABLE); AVX-512 code cannot run here, so it is compiled only. The harness's
parallel launch runs its tasks one after another, which checks the work split. Tolerance:
rtol 1e-4, atol 1e-4 against a float64 reference (float32 sums of up to a few thousand terms).
"""
from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember.relay.op.nn.conv import conv2d_nchw
from ember.relay.op.nn.epilogue_activation import activation_ref
from ember.target.simd import LEVELS
from ember.topi.nn import conv2d_nchwc as K

HARNESS = Path(__file__).with_name("conv_nchwc_harness.c")
INCLUDE = Path(ember.__file__).parent / "include"
CC = shutil.which("gcc") or shutil.which("cc") or shutil.which("clang")
X86 = platform.machine().lower() in ("x86_64", "amd64")
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2"]
LEVEL_FLAGS = {"native": ["-march=native"], "x86-64-v3": ["-march=x86-64-v3"],
               "x86-64-v2": ["-march=x86-64-v2"], "portable": ["-DEMBER_KERNELS_PORTABLE"]}
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")
F32 = ctypes.POINTER(ctypes.c_float)
ACT = {v: k for k, v in K.ACTIVATIONS.items()}
# the GELUs' two parameters as the layout planner sets them (output and inner scale)
GELU_PARAMS = {"gelu_erf": (0.5, 1 / np.sqrt(2)), "gelu_tanh": (0.5, np.sqrt(2 / np.pi))}


def _host_runs(level: str) -> bool:
    if level == "portable":
        return True
    if not X86:
        return level == "native"
    need = {"x86-64-v3": LEVELS["avx2"], "x86-64-v2": LEVELS["sse"]}.get(level)
    from ember.target.simd import host_features

    return need is None or set(need.features) <= host_features()


@pytest.fixture(scope="module")
def harness_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    out = tmp_path_factory.mktemp("conv_harness")
    return {"dir": out}  # type: ignore[dict-item]


def _harness(libs: dict, level: str, harness: Path = HARNESS, lanes: int | None = None
             ) -> ctypes.CDLL:
    """``harness`` (a C file here) built for ``level`` once per module (kept in ``libs``);
    with ``lanes``, for that lane count only (a third of the compile, or less)."""
    key = (harness.stem, level, lanes)
    if key not in libs:
        if not _host_runs(level):
            pytest.skip(f"this machine cannot run {level} code")
        so = libs["dir"] / f"{harness.stem}_{level}_{lanes}.so"
        only = [] if lanes is None else [f"-DHARNESS_LANES={lanes}"]
        cmd = [CC, *STRICT, *LEVEL_FLAGS[level], *only, "-fPIC", "-shared", f"-I{INCLUDE}",
               str(harness), "-o", str(so)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[:4000]
        libs[key] = ctypes.CDLL(str(so))
    return libs[key]


def _host_has_avx512() -> bool:
    from ember.target.simd import host_features

    return X86 and set(LEVELS["avx512"].features) <= host_features()


# 16-lane code built for a host without AVX-512 (two registers per vector) takes the compiler
# about a minute; the default run builds the lane counts the host runs natively
NATIVE_LANES = (4, 8, 16) if _host_has_avx512() else (4, 8)
LANE_PARAMS = [lanes if lanes in NATIVE_LANES else pytest.param(lanes, marks=pytest.mark.slow)
               for lanes in (4, 8, 16)]


def _ptr(a: np.ndarray) -> ctypes._Pointer:
    return a.ctypes.data_as(F32)


def _epilogue(y: np.ndarray, act: str, clip: tuple, res: np.ndarray | None,
              after: bool) -> np.ndarray:
    def f(v: np.ndarray) -> np.ndarray:
        if act == "relu":
            return np.maximum(v, 0)
        if act == "clip":
            return np.clip(v, *clip)
        if act == "hardswish":
            return v * np.clip(v + 3, 0, 6) / 6
        lo, hi = clip  # the two parameters: hardsigmoid's slope and offset, leaky's slope
        table = {"hardsigmoid": lambda: np.clip(lo * v + hi, 0, 1),
                 "leaky_relu": lambda: np.where(v > 0, v, lo * v),
                 "sigmoid": lambda: 1 / (1 + np.exp(-v)), "silu": lambda: v / (1 + np.exp(-v)),
                 "mish": lambda: v * np.tanh(np.logaddexp(0, v)), "tanh": lambda: np.tanh(v),
                 "gelu_erf": lambda: activation_ref(v, "gelu_erf", lo, hi),
                 "gelu_tanh": lambda: activation_ref(v, "gelu_tanh", lo, hi)}
        return table[act]() if act in table else v

    if res is None:
        return f(y)
    return f(y + res) if after else f(y) + res


def _aligned_nans(shape: tuple, offset: int = 0) -> np.ndarray:
    """A float32 array of NaNs starting ``offset`` floats past a 64-byte boundary."""
    size = int(np.prod(shape))
    buf = np.full(size + 16 + offset, np.nan, "float32")
    start = (-buf.ctypes.data % 64) // 4 + offset
    return buf[start:start + size].reshape(shape)


def run_case(lib: ctypes.CDLL, *, ic: int, oc: int, h: int, w: int, k: tuple = (3, 3),
             s: tuple = (1, 1), pads: tuple = (1, 1, 1, 1), d: tuple = (1, 1), groups: int = 1,
             lanes: int = 8, in_block: int | None = None, act: str = "relu",
             residual: bool = False, after: bool = True, n: int = 1, tiles: tuple | None = None,
             tasks: int = 1, seed: int = 0, stream: bool = False, misalign: bool = False,
             zero_in: int = 0, zero_in_value: float = 1e3,
             owner: np.ndarray | None = None) -> np.ndarray:
    """One convolution through the harness, checked against numpy (returns its blocked
    output); ``stream`` adds the
    STREAM epilogue flag (non-temporal stores: the output is then aligned to 64 bytes, or
    ``misalign``-ed by one float, where the kernel must drop the flag); ``zero_in``: the last
    input channels have zero weights, as the planner pads channels to whole blocks (their
    input holds ``zero_in_value``: large, which the kernel may skip but must not add);
    ``owner`` (int32, the output's size, -1 each) gets the task that wrote each output float
    (harness_watch)."""
    rng = np.random.default_rng(seed)
    depthwise = groups > 1 and groups == ic == oc
    cb = lanes if depthwise else (in_block or lanes)
    x = rng.uniform(-1, 1, (n, ic, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, ic // groups, *k)).astype("float32")
    live = x.astype("float64")  # the reference adds no product of a zero weight
    if zero_in:
        x[:, ic - zero_in:] = zero_in_value
        wt[:, ic - zero_in:] = 0.0
    b = rng.uniform(-1, 1, oc).astype("float32")
    ref = conv2d_nchw(live, wt.astype("float64"), s, pads, d, groups)
    ref = ref + b.reshape(1, -1, 1, 1)
    res = rng.uniform(-1, 1, ref.shape).astype("float32") if residual else None
    clip = GELU_PARAMS.get(act, (-0.25, 0.5))
    expect = _epilogue(ref, act, clip, res, after)
    oh, ow = ref.shape[2:]
    xb = K.to_blocked(x, cb) if cb > 1 else x.reshape(n, ic, h, w, 1)
    wp = K.pack_weight(wt, lanes, 1 if depthwise else cb)
    out = _aligned_nans((n, oc // lanes, oh, ow, lanes), 1 if misalign else 0)
    resb = K.to_blocked(res, lanes) if res is not None else out
    flags = (K.RESIDUAL | (K.ACT_AFTER_ADD if after else 0)) if residual else 0
    flags |= K.STREAM if stream else 0
    geo = K.ConvGeometry(n, ic, h, w, oc, oh, ow, *k, s, pads, d, groups, lanes, cb)
    lib.harness_set_tasks(tasks)
    if depthwise:
        strip = tiles[2] if tiles else ow
        ints = [n, oc // lanes, h, w, oh, ow, *k, *s, *d, pads[0], pads[1], K.ACTIVATIONS[act],
                flags, strip, 1 if tasks > 1 else 0]
        fn = lib.harness_depthwise
    else:
        t = K.conv_tiles(geo, LEVELS["avx2"])
        rb, rw, strip, order = tiles or (t.rb, t.rw, t.strip, t.order)
        ints = [n, ic // cb, cb, h, w, oc // lanes, groups, oh, ow, *k, *s, *d, pads[0],
                pads[1], K.ACTIVATIONS[act], flags, rb, rw, strip, order, 1 if tasks > 1 else 0]
        fn = lib.harness_conv
    arr = np.array(ints, "int32")
    if owner is not None:
        lib.harness_watch(_ptr(out), ctypes.c_long(out.size), owner.ctypes.data_as(ctypes.c_void_p))
    rc = fn(lanes, _ptr(xb), _ptr(wp), _ptr(b), _ptr(resb), _ptr(out),
            arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), ctypes.c_float(clip[0]),
            ctypes.c_float(clip[1]))
    lib.harness_watch(None, ctypes.c_long(0), None)
    assert rc == 0
    # float32 sums of L = taps x input channels products of values in [-1, 1]: partial sums
    # of about sqrt(L) / 3, each addition rounding by eps there, so an output's error is
    # about eps * L / 3 (1e-4 at 640 channels x 9 taps), whatever its own magnitude
    taps = (ic // groups) * k[0] * k[1]
    np.testing.assert_allclose(K.from_blocked(out), expect, rtol=1e-4,
                               atol=max(1e-4, 1e-7 * taps))
    return out


EDGE_CASES = {
    "3x3_pad1": {"ic": 16, "oc": 16, "h": 9, "w": 11},
    "first_conv_3ch_nchw_input": {"ic": 3, "oc": 16, "h": 13, "w": 7, "s": (2, 2), "in_block": 1},
    "1x1": {"ic": 32, "oc": 48, "h": 5, "w": 5, "k": (1, 1), "pads": (0, 0, 0, 0)},
    "1x1_image": {"ic": 16, "oc": 16, "h": 1, "w": 1},
    "stride_above_kernel": {"ic": 8, "oc": 16, "h": 11, "w": 10, "k": (1, 1), "s": (3, 3),
                            "pads": (0,) * 4},
    "stride_3_kernel_2": {"ic": 8, "oc": 8, "h": 9, "w": 13, "k": (2, 2), "s": (3, 3),
                          "pads": (1, 0, 0, 1)},
    "dilation_2": {"ic": 16, "oc": 16, "h": 7, "w": 9, "s": (2, 2), "pads": (0, 0, 1, 1),
                   "d": (2, 2)},
    "dilation_3_asymmetric": {"ic": 8, "oc": 8, "h": 12, "w": 6, "d": (3, 1), "pads": (3, 1, 3, 1)},
    "kernel_larger_than_image": {"ic": 8, "oc": 8, "h": 2, "w": 3, "k": (5, 5),
                                 "pads": (2, 2, 2, 2)},
    "kernel_7x1": {"ic": 8, "oc": 16, "h": 10, "w": 4, "k": (7, 1), "pads": (3, 0, 3, 0)},
    "grouped": {"ic": 32, "oc": 32, "h": 6, "w": 7, "groups": 2},
    "grouped_odd_blocks": {"ic": 24, "oc": 24, "h": 5, "w": 5, "groups": 3},
    "depthwise": {"ic": 32, "oc": 32, "h": 9, "w": 10, "groups": 32},
    "depthwise_stride2_odd": {"ic": 16, "oc": 16, "h": 7, "w": 13, "s": (2, 2), "groups": 16},
    "depthwise_wide_rows": {"ic": 16, "oc": 16, "h": 5, "w": 21, "groups": 16, "act": "clip"},
    "depthwise_wide_rows_stride2": {"ic": 16, "oc": 16, "h": 6, "w": 23, "s": (2, 2), "groups": 16},
    # rows narrower than one tile: a single edge tile with both borders and few valid columns
    "depthwise_narrow_rows": {"ic": 16, "oc": 16, "h": 6, "w": 5, "groups": 16},
    "depthwise_narrow_rows_stride2": {"ic": 16, "oc": 16, "h": 5, "w": 3, "s": (2, 2),
                                      "groups": 16, "pads": (1, 0, 1, 2)},
    "depthwise_one_column": {"ic": 8, "oc": 8, "h": 3, "w": 1, "groups": 8, "pads": (1, 1, 1, 1)},
    "depthwise_dilated": {"ic": 8, "oc": 8, "h": 8, "w": 8, "d": (2, 2), "pads": (2, 2, 2, 2),
                          "groups": 8},
    # quads (4 output blocks per tile; AVX-512 builds, else split into pairs): a 7-wide row
    # in a 4-wide and a 3-wide tile, 5 blocks as a quad and a single, 1-channel input
    "quads_7x7": {"ic": 32, "oc": 80, "h": 7, "w": 7, "tiles": (4, 6, 7, 0)},
    # 1x1 row tiles that would leave a strip one column: a 7-wide row of quads as 4 + 3, a
    # 9-wide one of AVX-512 pairs as 5 + 4 (else split into pairs, cut evenly)
    "quads_1x1_7_wide": {"ic": 32, "oc": 64, "h": 3, "w": 7, "k": (1, 1), "pads": (0,) * 4,
                         "tiles": (4, 6, 7, 0)},
    "pairs_1x1_9_wide": {"ic": 32, "oc": 32, "h": 2, "w": 9, "k": (1, 1), "pads": (0,) * 4,
                         "tiles": (2, 8, 9, 1)},
    "quads_first_conv": {"ic": 1, "oc": 64, "h": 13, "w": 10, "k": (5, 4), "s": (2, 2),
                         "pads": (2, 1, 2, 1), "in_block": 1, "tiles": (4, 4, 5, 1)},
    "large_channels": {"ic": 256, "oc": 64, "h": 3, "w": 5},
    # a conv1d (kernel height 1, one row) long enough that the cost model cuts its row into
    # strips with the output blocks innermost; odd length, stride 2, output blocks not paired
    "conv1d_long_row": {"ic": 128, "oc": 24, "h": 1, "w": 601, "k": (1, 3), "s": (1, 2),
                        "pads": (0, 1, 0, 0)},
    # 1x1 convs with 16+ input blocks at every lane count: each strip packed once and read
    # by every block group; strips cut mid-row, a stride-2 padded one (pack zeros), an NCHW
    # input (not packed), a batch of two split over tasks with a late activation
    "1x1_packed_strips": {"ic": 256, "oc": 40, "h": 5, "w": 9, "k": (1, 1), "pads": (0,) * 4,
                          "tiles": (2, 4, 7, 1)},
    "1x1_packed_stride2_padding": {"ic": 256, "oc": 32, "h": 6, "w": 7, "k": (1, 1),
                                   "s": (2, 2), "pads": (1, 0, 0, 1)},
    "1x1_packed_nchw_input": {"ic": 20, "oc": 16, "h": 3, "w": 5, "k": (1, 1),
                              "pads": (0,) * 4, "in_block": 1},
    "1x1_packed_batch_tasks": {"ic": 256, "oc": 48, "h": 4, "w": 6, "k": (1, 1),
                               "pads": (0,) * 4, "n": 2, "tasks": 3, "act": "silu",
                               "residual": True, "after": False},
    # pairs cut into tiles of even widths: a 7-wide row as 4 + 3, a 13-wide one as 5 + 4 + 4
    "pairs_7_wide": {"ic": 16, "oc": 32, "h": 4, "w": 7},
    "pairs_13_wide_stride2": {"ic": 16, "oc": 16, "h": 5, "w": 26, "s": (2, 2)},
    # a padded 1x1 (too few blocks to pack): rows in the padding, the unrolled block loop
    "1x1_padded_unpacked": {"ic": 32, "oc": 16, "h": 4, "w": 5, "k": (1, 1),
                            "pads": (1, 1, 1, 1)},
    # small maps in tiles of flattened positions across rows (blocks outermost, order 0):
    # 7x7 and 14x14, stride 2 onto 7x7, an odd block count (pairs, then one block in row
    # tiles), an odd map with asymmetric padding and row dilation, a 1x1 map (every tap but
    # the centre in the padding), strips cut mid-row over a batch split in tasks, and
    # activations (a late one, residual before and after)
    "flat_7x7": {"ic": 32, "oc": 64, "h": 7, "w": 7, "tiles": (2, 6, 7, 0)},
    "flat_14x14_silu_residual": {"ic": 16, "oc": 32, "h": 14, "w": 14, "act": "silu",
                                 "residual": True, "after": False, "tiles": (2, 6, 14, 0)},
    "flat_stride2_to_7x7": {"ic": 32, "oc": 32, "h": 14, "w": 14, "s": (2, 2),
                            "pads": (1, 1, 1, 1), "tiles": (2, 6, 7, 0)},
    "flat_odd_blocks_residual": {"ic": 16, "oc": 48, "h": 5, "w": 9, "residual": True,
                                 "tiles": (2, 6, 9, 0)},
    "flat_odd_map_dilated_rows": {"ic": 16, "oc": 32, "h": 11, "w": 9, "d": (2, 1),
                                  "pads": (2, 0, 1, 2), "act": "clip", "tiles": (2, 5, 9, 0)},
    "flat_28_wide_stride2": {"ic": 16, "oc": 32, "h": 9, "w": 56, "s": (2, 2),
                             "tiles": (2, 6, 28, 0)},
    "flat_1x1_map": {"ic": 16, "oc": 32, "h": 1, "w": 1, "tiles": (2, 1, 1, 0)},
    "flat_5x5_kernel_stride2": {"ic": 16, "oc": 32, "h": 13, "w": 12, "k": (5, 5),
                                "s": (2, 2), "pads": (2, 2, 2, 2), "tiles": (2, 6, 6, 0)},
    "flat_batch_cut_strips_tasks": {"ic": 16, "oc": 48, "h": 7, "w": 7, "n": 2, "tasks": 3,
                                    "act": "sigmoid", "tiles": (2, 4, 4, 0)},
    # AVX-512's flat tiles of quads (plans of rb = 4, order 0; pairs elsewhere): 7 blocks at
    # 16 lanes (a quad, then a pair and a single in row tiles), stride 2 onto 7x7 with a late
    # GELU, a 28-wide row cut in strips over a batch split in tasks, a residual before a clip
    "flat_quads_7x7_odd_blocks": {"ic": 32, "oc": 112, "h": 7, "w": 7, "residual": True,
                                  "tiles": (4, 6, 7, 0)},
    "flat_quads_stride2_gelu": {"ic": 32, "oc": 64, "h": 14, "w": 13, "s": (2, 2),
                                "act": "gelu_erf", "tiles": (4, 6, 7, 0)},
    "flat_quads_28_wide_tasks": {"ic": 16, "oc": 64, "h": 5, "w": 28, "n": 2, "tasks": 3,
                                 "act": "silu", "tiles": (4, 6, 10, 0)},
    "flat_quads_residual_before_clip": {"ic": 16, "oc": 80, "h": 6, "w": 11, "residual": True,
                                        "after": False, "act": "clip", "tiles": (4, 6, 11, 0)},
    # quads whose weights pass 256 KiB in passes over chunks of input blocks (partial sums
    # in the output, the epilogue with the last pass): 1 block a pass at 16 lanes, 4 at 8; a
    # late activation before a residual over a batch split in tasks, blocks left over
    "flat_quads_chunked": {"ic": 256, "oc": 80, "h": 5, "w": 6, "n": 2, "tasks": 3,
                           "act": "silu", "residual": True, "after": False,
                           "tiles": (4, 6, 6, 0)},
    "flat_quads_chunked_stride2_clip": {"ic": 256, "oc": 64, "h": 13, "w": 14, "s": (2, 2),
                                        "act": "clip", "residual": True,
                                        "tiles": (4, 6, 4, 0)},
    # 3x3 convs whose block pairs' weights overflow the cache (ember_conv_ic_chunk): passes
    # over chunks of input blocks adding partial sums into the output (8 + 8 + 8 + 8 blocks
    # at 8 lanes, uneven 8 + 8 + 4 with stride 2 and asymmetric padding); the epilogue with
    # the last pass: a late activation before a residual, a batch split over tasks
    "chunked_input_blocks": {"ic": 256, "oc": 64, "h": 6, "w": 33, "tiles": (2, 6, 33, 1)},
    "chunked_uneven_stride2": {"ic": 160, "oc": 64, "h": 9, "w": 40, "s": (2, 2),
                               "pads": (1, 0, 0, 1), "act": "clip", "tiles": (2, 4, 10, 1)},
    "chunked_silu_residual_tasks": {"ic": 256, "oc": 48, "h": 5, "w": 31, "n": 2, "tasks": 3,
                                    "act": "silu", "residual": True, "after": False,
                                    "tiles": (2, 6, 16, 1)},
    # maps of few rows and many columns (text recognisers) with blocks outermost whose tile
    # groups' weights pass 128 KiB: each block group's rows in passes over chunks of input
    # blocks small enough for L1 (ember_conv_row_chunk; 8 blocks a pass for pairs at 8 lanes,
    # 2 at 16), partial sums in the output: 3 rows from 6 at stride (2, 1), an odd block count
    # with a late activation before a residual over tasks, a clip (general stores) and a
    # single row
    "row_passes_stride_2_1": {"ic": 256, "oc": 64, "h": 6, "w": 37, "s": (2, 1),
                              "tiles": (2, 6, 37, 0)},
    "row_passes_odd_blocks_silu_residual_tasks": {"ic": 256, "oc": 80, "h": 3, "w": 41,
                                                  "n": 2, "tasks": 3, "act": "silu",
                                                  "residual": True, "after": False,
                                                  "tiles": (2, 6, 20, 0)},
    "row_passes_clip_one_row": {"ic": 512, "oc": 32, "h": 1, "w": 45, "act": "clip",
                                "tiles": (2, 4, 45, 0)},
    # 1x1 at stride 2 in the unit-stride tiles (columns 2 * L apart), odd sizes, residual;
    # a 1x1 map (one-column GEMV tiles with partial sums: an SE block's convs), an odd block
    # count; a large input with two block groups (not packed, blocks innermost)
    "1x1_stride2_unit": {"ic": 32, "oc": 48, "h": 9, "w": 13, "k": (1, 1), "s": (2, 2),
                         "pads": (0,) * 4, "residual": True, "act": "clip"},
    "1x1_map_gemv": {"ic": 96, "oc": 40, "h": 1, "w": 1, "k": (1, 1), "pads": (0,) * 4,
                     "act": "hardsigmoid"},
    "1x1_map_gemv_relu_residual": {"ic": 24, "oc": 16, "h": 1, "w": 1, "k": (1, 1),
                                   "pads": (0,) * 4, "residual": True, "tiles": (1, 1, 1, 0)},
    "1x1_large_input_two_groups": {"ic": 256, "oc": 24, "h": 23, "w": 25, "k": (1, 1),
                                   "pads": (0,) * 4, "tiles": (2, 5, 120, 1)},
    # runs of interior 1x1 tiles in one call (ember_conv_tile's count): a flattened row whose
    # plan mixes widths (62 columns as 6 + 6 + 5 ...: a run stops where the width changes),
    # stride 2 with padding (a border tile after the run) and a residual, single blocks in
    # runs of 8, a strip cut mid-row so that a run ends at the strip's end; and a 3x3 row of
    # 37 columns (border tiles, 5-wide pairs and a narrower rest, one tile per call)
    "tile_runs_3x3_row": {"ic": 16, "oc": 32, "h": 3, "w": 37, "tiles": (2, 5, 37, 0)},
    "tile_runs_1x1_mixed_widths": {"ic": 16, "oc": 48, "h": 1, "w": 62, "k": (1, 1),
                                   "pads": (0,) * 4, "act": "clip", "tiles": (2, 6, 62, 1)},
    "tile_runs_stride2_residual": {"ic": 16, "oc": 16, "h": 5, "w": 45, "k": (1, 1),
                                   "s": (2, 2), "pads": (0, 1, 0, 1), "residual": True,
                                   "tiles": (2, 5, 23, 0)},
    "tile_runs_single_blocks": {"ic": 8, "oc": 8, "h": 1, "w": 35, "k": (1, 1),
                                "pads": (0,) * 4, "tiles": (1, 8, 35, 0)},
    "tile_runs_cut_strips": {"ic": 16, "oc": 32, "h": 3, "w": 40, "k": (1, 1),
                             "pads": (0,) * 4, "act": "silu", "tiles": (2, 5, 17, 1)},
    # the last block of an odd count in tiles as many accumulators wide as the plan's pairs
    # (10 or 12 columns for pairs of 5 or 6): a flattened 1x1 row of 3 blocks, and a 3x3
    # with 5 blocks, border columns, a residual before the activation
    "odd_blocks_wide_single_1x1": {"ic": 32, "oc": 24, "h": 1, "w": 50, "k": (1, 1),
                                   "pads": (0,) * 4, "tiles": (2, 5, 50, 1)},
    "odd_blocks_wide_single_3x3": {"ic": 16, "oc": 40, "h": 3, "w": 29, "residual": True,
                                   "after": False, "act": "clip", "tiles": (2, 6, 29, 1)},
    "odd_out_blocks": {"ic": 8, "oc": 24, "h": 6, "w": 6},
    "residual_act_after": {"ic": 16, "oc": 16, "h": 5, "w": 7, "residual": True},
    "residual_act_before": {"ic": 16, "oc": 16, "h": 5, "w": 7, "residual": True, "after": False,
                            "act": "clip"},
    "hardswish": {"ic": 8, "oc": 8, "h": 4, "w": 4, "act": "hardswish"},
    "hardsigmoid": {"ic": 8, "oc": 8, "h": 4, "w": 4, "act": "hardsigmoid"},
    "leaky_relu_residual": {"ic": 8, "oc": 8, "h": 4, "w": 5, "act": "leaky_relu",
                            "residual": True},
    "sigmoid": {"ic": 8, "oc": 16, "h": 3, "w": 7, "act": "sigmoid"},
    "silu_residual_before": {"ic": 16, "oc": 16, "h": 5, "w": 7, "residual": True,
                             "after": False, "act": "silu"},
    "mish": {"ic": 8, "oc": 8, "h": 4, "w": 4, "act": "mish"},
    # tanh (dcgan's last layer) through the vector pass and its scalar tail, before a residual
    "tanh": {"ic": 8, "oc": 16, "h": 3, "w": 7, "act": "tanh"},
    "tanh_residual_before": {"ic": 8, "oc": 8, "h": 3, "w": 5, "residual": True,
                             "after": False, "act": "tanh"},
    "depthwise_silu": {"ic": 16, "oc": 16, "h": 6, "w": 6, "groups": 16, "act": "silu"},
    # GELU: the vector form over whole target vectors, the scalar one over the rest of a
    # strip (odd widths at 4 lanes on a wider target), after and before a residual
    "gelu_erf": {"ic": 8, "oc": 16, "h": 3, "w": 7, "act": "gelu_erf"},
    "gelu_tanh_residual_before": {"ic": 16, "oc": 16, "h": 5, "w": 7, "residual": True,
                                  "after": False, "act": "gelu_tanh"},
    "gelu_erf_residual_after": {"ic": 8, "oc": 8, "h": 4, "w": 5, "residual": True,
                                "act": "gelu_erf"},
    "depthwise_gelu_tanh": {"ic": 16, "oc": 16, "h": 6, "w": 5, "groups": 16,
                            "act": "gelu_tanh"},
    # wav2vec2's feature convs: kernel 3, stride 2, one long row, then GELU
    "conv1d_gelu": {"ic": 32, "oc": 32, "h": 1, "w": 301, "k": (1, 3), "s": (1, 2),
                    "pads": (0,) * 4, "act": "gelu_erf"},
    # stride 2 over a channel-blocked input in the unit-stride tiles (columns 2 L apart, one
    # base pointer): wav2vec2's kernel-2 conv1d on an odd row with an odd block count (pairs,
    # then single blocks 12 wide), and a padded 3x3 with border tiles, mid-row strips, a
    # residual before a clip
    "stride2_unit_kernel2_row": {"ic": 16, "oc": 24, "h": 1, "w": 199, "k": (1, 2),
                                 "s": (1, 2), "pads": (0,) * 4, "act": "gelu_erf"},
    "stride2_unit_3x3_borders": {"ic": 16, "oc": 32, "h": 7, "w": 41, "s": (2, 2),
                                 "residual": True, "after": False, "act": "clip",
                                 "tiles": (2, 6, 8, 1)},
    "flat_gelu_tanh": {"ic": 16, "oc": 32, "h": 7, "w": 7, "act": "gelu_tanh",
                       "tiles": (2, 6, 7, 0)},
    "no_activation_batch2": {"ic": 8, "oc": 8, "h": 4, "w": 5, "act": "none", "n": 2},
    # kernel rows longer than the padded row (wav2vec2's positional conv: 128 taps over 49
    # samples padded by 64): a border tile runs only the taps that reach the image for one
    # of its columns; with a dilation and stride 2, and grouped
    "long_kernel_short_padded_row": {"ic": 16, "oc": 32, "h": 1, "w": 9, "k": (1, 17),
                                     "pads": (0, 8, 0, 8)},
    "long_kernel_dilated_stride2": {"ic": 16, "oc": 32, "h": 3, "w": 11, "k": (2, 9),
                                    "s": (1, 2), "d": (1, 2), "pads": (1, 8, 0, 7),
                                    "act": "gelu_erf"},
    "grouped_long_kernel_row": {"ic": 48, "oc": 48, "h": 1, "w": 13, "k": (1, 32),
                                "pads": (0, 16, 0, 16), "groups": 3, "residual": True},
    "depthwise_residual": {"ic": 16, "oc": 16, "h": 6, "w": 6, "groups": 16, "residual": True,
                           "act": "clip"},
    # stride 2 as TensorFlow's SAME pads even maps (EfficientNet): nothing before, one after;
    # rows wide enough for interior tiles between the edge ones
    "depthwise_stride2_same_upper": {"ic": 32, "oc": 32, "h": 10, "w": 40, "s": (2, 2),
                                     "groups": 32, "pads": (0, 0, 1, 1), "act": "clip"},
    "depthwise_5x5_stride2_asymmetric": {"ic": 16, "oc": 16, "h": 9, "w": 37, "k": (5, 5),
                                         "s": (2, 2), "groups": 16, "pads": (1, 2, 2, 1)},
    "depthwise_7x7_stride2_odd": {"ic": 16, "oc": 16, "h": 11, "w": 31, "k": (7, 7),
                                  "s": (2, 2), "groups": 16, "pads": (3, 2, 3, 4)},
    "depthwise_1x1_map_stride2": {"ic": 16, "oc": 16, "h": 1, "w": 1, "s": (2, 2),
                                  "groups": 16},
    # 1x1 convs to 8-lane blocks from 16-lane ones (AVX-512's pair tiles: 3 blocks, a last
    # pair half empty), 5 blocks over an odd map with a residual, 9 blocks in two groups
    # split over tasks; and from 8-lane blocks to 16-lane ones (the 1x1 path over half
    # blocks), 24 -> 48 and with a late activation over a batch split in tasks
    "1x1_pairs_24_from_16_lane_blocks": {"ic": 96, "oc": 24, "h": 1, "w": 29, "k": (1, 1),
                                         "pads": (0,) * 4, "in_block": 16, "act": "none",
                                         "tiles": (4, 12, 29, 1)},
    "1x1_pairs_40_odd_map_residual": {"ic": 48, "oc": 40, "h": 9, "w": 11, "k": (1, 1),
                                      "pads": (0,) * 4, "in_block": 16, "residual": True,
                                      "act": "clip", "tiles": (6, 8, 5, 1)},
    "1x1_pairs_72_two_groups_tasks": {"ic": 24, "oc": 72, "h": 3, "w": 13, "k": (1, 1),
                                      "pads": (0,) * 4, "in_block": 8, "n": 2, "tasks": 3,
                                      "act": "hardswish", "tiles": (6, 8, 13, 1)},
    # a pair plan (a dynamic build's, chosen before the sizes were known) on a 1x1 map: the
    # kernel runs it on the 8-lane tiles (EMBER_PAIR_MIN_PIXELS)
    "1x1_pair_plan_on_a_1x1_map": {"ic": 96, "oc": 40, "h": 1, "w": 1, "k": (1, 1),
                                   "pads": (0,) * 4, "in_block": 16, "act": "hardswish",
                                   "tiles": (6, 8, 1, 1)},
    "1x1_half_blocks_24_to_48": {"ic": 24, "oc": 48, "h": 7, "w": 9, "k": (1, 1),
                                 "pads": (0,) * 4, "in_block": 8, "act": "relu"},
    # the STREAM flag (non-temporal stores): the 1x1 tiles' own case for an add with no
    # activation (odd blocks: quads, pairs and singles; batch and tasks), the general store
    # elsewhere (a 3x3, an activation, the partial sums of chunked passes), and ignored where
    # the output is not aligned to whole vectors or the kernel is a depthwise one
    "stream_1x1_residual": {"ic": 32, "oc": 112, "h": 3, "w": 37, "k": (1, 1), "pads": (0,) * 4,
                            "act": "none", "residual": True, "stream": True, "n": 2,
                            "tasks": 3},
    "stream_1x1_residual_rows": {"ic": 16, "oc": 48, "h": 5, "w": 13, "k": (1, 1),
                                 "pads": (0,) * 4, "act": "none", "residual": True,
                                 "after": False, "stream": True, "tiles": (2, 12, 5, 0)},
    "stream_3x3_residual": {"ic": 16, "oc": 48, "h": 6, "w": 9, "act": "none",
                            "residual": True, "stream": True},
    "stream_1x1_hardswish": {"ic": 16, "oc": 32, "h": 4, "w": 10, "k": (1, 1),
                             "pads": (0,) * 4, "act": "hardswish", "residual": True,
                             "stream": True},
    "stream_chunked_residual": {"ic": 256, "oc": 48, "h": 5, "w": 31, "act": "none",
                                "residual": True, "stream": True, "tiles": (2, 6, 16, 1)},
    "stream_misaligned": {"ic": 16, "oc": 32, "h": 3, "w": 11, "k": (1, 1), "pads": (0,) * 4,
                          "act": "none", "residual": True, "stream": True, "misalign": True},
    "stream_depthwise_ignored": {"ic": 32, "oc": 32, "h": 7, "w": 9, "groups": 32,
                                 "act": "none", "residual": True, "stream": True},
    "1x1_half_blocks_silu_tasks": {"ic": 40, "oc": 32, "h": 1, "w": 37, "k": (1, 1),
                                   "pads": (0,) * 4, "in_block": 8, "n": 2, "tasks": 2,
                                   "act": "silu", "residual": True, "tiles": (2, 12, 13, 1)},
    # input channels padded to whole blocks with zero weights (HRNet's 18 and 36 in 32 and
    # 48): the tiles skip the last block's zero lanes, whatever its lanes hold. Row tiles at
    # stride 1 (a residual, wide rows) and 2, small-map flat tiles, passes over input-block
    # chunks (the skip only in the last one), a 1x1 (reads every lane), nothing live but one
    "padded_in_3x3_row_tiles": {"ic": 32, "oc": 32, "h": 5, "w": 40, "zero_in": 14,
                                "residual": True},
    "padded_in_3x3_stride2": {"ic": 32, "oc": 16, "h": 7, "w": 41, "s": (2, 2), "zero_in": 13},
    "padded_in_flat": {"ic": 48, "oc": 64, "h": 6, "w": 7, "zero_in": 12,
                       "tiles": (2, 6, 7, 0)},
    "padded_in_row_passes": {"ic": 512, "oc": 32, "h": 3, "w": 40, "zero_in": 3},
    "padded_in_1x1": {"ic": 32, "oc": 16, "h": 3, "w": 9, "k": (1, 1), "pads": (0,) * 4,
                      "zero_in": 14},
    "padded_in_one_live": {"ic": 16, "oc": 16, "h": 4, "w": 6, "zero_in": 15},
}


@pytest.mark.parametrize("lanes", LANE_PARAMS)
@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_edge_cases_native(harness_libs, case, lanes):
    kwargs = dict(EDGE_CASES[case])
    if kwargs.get("in_block") is None and kwargs["ic"] // kwargs.get("groups", 1) % lanes:
        kwargs["in_block"] = 1  # channels of a group not a multiple of the lanes: NCHW input
    if kwargs["oc"] % lanes or (kwargs.get("groups", 1) > 1 and kwargs["oc"] // kwargs[
            "groups"] % lanes and kwargs["groups"] != kwargs["ic"]):
        pytest.skip("output channels do not split into blocks of these lanes")
    if kwargs.get("groups", 1) == kwargs["ic"] and kwargs["ic"] % lanes:
        pytest.skip("depthwise channels do not split into blocks of these lanes")
    run_case(_harness(harness_libs, "native", lanes=lanes), lanes=lanes, **kwargs)


@pytest.mark.parametrize("level", [  # each level compiles the harness again (~1 min)
    pytest.param("x86-64-v3", marks=pytest.mark.slow),
    pytest.param("x86-64-v2", marks=pytest.mark.slow), "portable"])
@pytest.mark.parametrize("case", ["3x3_pad1", "first_conv_3ch_nchw_input", "1x1", "dilation_2",
                                  "grouped", "depthwise_stride2_odd", "depthwise_narrow_rows",
                                  "conv1d_long_row", "1x1_packed_stride2_padding",
                                  "pairs_7_wide", "1x1_padded_unpacked",
                                  "residual_act_before", "silu_residual_before", "mish", "tanh",
                                  "gelu_erf", "gelu_tanh_residual_before", "conv1d_gelu",
                                  "depthwise_gelu_tanh",
                                  "hardsigmoid", "flat_stride2_to_7x7",
                                  "flat_odd_blocks_residual", "flat_batch_cut_strips_tasks",
                                  "flat_quads_7x7_odd_blocks", "flat_quads_chunked",
                                  "long_kernel_dilated_stride2",
                                  "chunked_uneven_stride2", "1x1_stride2_unit",
                                  "row_passes_stride_2_1",
                                  "1x1_map_gemv", "tile_runs_3x3_row",
                                  "tile_runs_stride2_residual", "odd_blocks_wide_single_3x3",
                                  "stride2_unit_kernel2_row", "stride2_unit_3x3_borders",
                                  "depthwise_stride2_same_upper",
                                  "depthwise_5x5_stride2_asymmetric",
                                  "1x1_pairs_40_odd_map_residual",
                                  "1x1_pairs_72_two_groups_tasks", "1x1_half_blocks_24_to_48",
                                  "stream_1x1_residual", "stream_3x3_residual",
                                  "stream_misaligned", "padded_in_3x3_row_tiles",
                                  "padded_in_flat", "padded_in_row_passes"])
def test_edge_cases_at_lower_levels(harness_libs, level, case):
    lanes = 4 if level in ("x86-64-v2", "portable") else 8
    run_case(_harness(harness_libs, level, lanes=lanes), lanes=lanes, **EDGE_CASES[case])


@pytest.mark.parametrize("lanes", LANE_PARAMS)
@pytest.mark.parametrize("case", ["padded_in_3x3_row_tiles", "padded_in_3x3_stride2",
                                  "padded_in_flat", "padded_in_row_passes"])
def test_zero_weight_lanes_of_the_last_input_block_are_skipped(harness_libs, case, lanes):
    # NaNs in the 3 lanes of the last block whose weights are zero: finite outputs only if
    # the tiles never read them (0 * NaN is NaN)
    kwargs = {**EDGE_CASES[case], "zero_in": 3, "zero_in_value": np.nan}
    run_case(_harness(harness_libs, "native", lanes=lanes), lanes=lanes, **kwargs)


@pytest.mark.parametrize("cases, then", [
    # packed 1x1 strips: read in place; small-map tiles: the row tiles read the input
    (("1x1_packed_strips", "1x1_packed_stride2_padding"), "1x1_packed_batch_tasks"),
    (("flat_7x7", "flat_batch_cut_strips_tasks"), "flat_batch_cut_strips_tasks")])
def test_workspace_kernels_run_without_one_and_free_theirs(harness_libs, cases, then):
    lib = _harness(harness_libs, "native", lanes=8)
    lib.harness_set_workspace(0)
    try:
        for case in cases:
            run_case(lib, **EDGE_CASES[case])
    finally:
        lib.harness_set_workspace(1)
    run_case(lib, **EDGE_CASES[then])
    assert lib.harness_live_workspace() == 0  # every workspace buffer was freed


def test_planner_streams_only_1x1_adds_whose_output_outgrows_the_last_cache():
    # the text detector's FPN 1x1 16->256 + add at 160x160: 26 MB out and 26 MB in
    fpn = K.ConvGeometry(1, 16, 160, 160, 256, 160, 160, 1, 1, (1, 1), (0,) * 4, (1, 1), 1,
                         16, 16)
    zen5 = {1: 48 << 10, 2: 1 << 20, 3: 32 << 20}
    assert K.streams_output(fpn, True, "none", zen5)
    assert not K.streams_output(fpn, True, "none", {1: 48 << 10, 2: 2 << 20, 3: 105 << 20})
    assert not K.streams_output(fpn, True, "none", {})  # cache sizes unknown: never
    assert not K.streams_output(fpn, False, "none", zen5)  # no residual to stream past
    assert not K.streams_output(fpn, True, "relu", zen5)  # only the add without activation
    assert not K.streams_output(replace(fpn, kh=3, kw=3, padding=(1,) * 4), True, "none", zen5)
    assert not K.streams_output(replace(fpn, h=80, w=80, oh=80, ow=80), True, "none", zen5)


def test_cost_model_puts_blocks_outermost_for_late_resnet_convs():
    # the small-map tiles (flattened positions across rows) need blocks outermost (order 0):
    # resnet18's 3x3 convs on 14x14 and 7x7 maps, whose weights overflow half the L2
    for ic, oc, hw, s in ((256, 256, 14, 1), (256, 512, 14, 2), (512, 512, 7, 1)):
        o = hw // s
        geo = K.ConvGeometry(1, ic, hw, hw, oc, o, o, 3, 3, (s, s), (1,) * 4, (1, 1), 1, 8, 8)
        t = K.conv_tiles(geo, LEVELS["avx2"])
        assert (t.rb, t.order, t.strip) == (2, 0, o)


def test_cost_model_and_kernel_agree_on_the_widest_flat_row():
    header = (INCLUDE / "ember/kernels/conv_nchwc_flat_impl.h").read_text()
    assert f"#define EMBER_CONV_FLAT_MAX_OW {K.FLAT_MAX_OW}\n" in header
    assert f"#define EMBER_CONV_FLAT_MAX_STRIDED_OW {K.FLAT_MAX_STRIDED_OW}\n" in header


def test_cost_model_keeps_avx512_strided_convs_over_wide_rows_in_row_tiles():
    # resnet18's 3x3 64->128 at stride 2 to 28x28: the padded copy of its 56x56 input costs
    # more than the flat tiles save; 128->256 to 14x14 and any stride-1 28-wide row stay flat
    def geo(ic, oc, hw, s):
        o = hw // s
        return K.ConvGeometry(1, ic, hw, hw, oc, o, o, 3, 3, (s, s), (1,) * 4, (1, 1), 1, 16, 16)

    avx512 = LEVELS["avx512"]
    assert not K.flat_tiles(geo(64, 128, 56, 2), avx512, 4)
    assert K.conv_tiles(geo(64, 128, 56, 2), avx512).order == 0  # 288 KiB: the L2 rule
    assert K.flat_tiles(geo(128, 256, 28, 2), avx512, 4)
    assert K.flat_tiles(geo(128, 128, 28, 1), avx512, 4)
    # 16 registers: the pairs keep flat tiles up to FLAT_MAX_OW at any stride
    narrow = replace(geo(64, 128, 56, 2), lanes=8, in_block=8)
    assert K.flat_tiles(narrow, LEVELS["avx2"], 2)


def test_cost_model_runs_small_maps_in_flat_tiles_of_pairs_or_avx512_quads():
    # weights that fit the L2 (blocks innermost by the L2 rule) on an 8x8 map: flat tiles,
    # blocks outermost, in pairs at 16 registers and in quads on AVX-512; AVX-512's pairs
    # (2 or 3 blocks), a 1x1 conv or a 36-wide row keep the L2 rule
    geo = K.ConvGeometry(1, 64, 8, 8, 64, 8, 8, 3, 3, (1, 1), (1,) * 4, (1, 1), 1, 8, 8)
    assert K.flat_tiles(geo, LEVELS["avx2"], 2)
    assert K.conv_tiles(geo, LEVELS["avx2"]).order == 0
    assert K.conv_tiles(replace(geo, lanes=4, in_block=4), LEVELS["sse"]).order == 0
    wide = replace(geo, lanes=16, in_block=16)
    assert K.flat_tiles(wide, LEVELS["avx512"], 4)
    assert K.conv_tiles(wide, LEVELS["avx512"]).order == 0
    assert not K.flat_tiles(wide, LEVELS["avx512"], 2)
    assert K.conv_tiles(replace(wide, oc=48), LEVELS["avx512"]).order == 1  # 3 blocks: pairs
    for other in (replace(geo, kh=1, kw=1, padding=(0,) * 4),
                  replace(geo, h=36, w=36, oh=36, ow=36), replace(geo, in_block=1)):
        assert not K.flat_tiles(other, LEVELS["avx2"], 2)
        assert K.conv_tiles(other, LEVELS["avx2"]).order == 1


def test_cost_model_loops_packed_1x1_convs_over_blocks_innermost():
    # SegFormer's decoder: 1 MiB of weights (blocks outermost by the L2 rule) but packed
    seg = K.ConvGeometry(1, 1024, 1, 4096, 256, 1, 4096, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8,
                         8)
    assert K.packs_strips(seg) and K.conv_tiles(seg, LEVELS["avx2"]).order == 1
    few = replace(seg, ic=64)  # 8 blocks: not packed, the L2 rule decides
    assert not K.packs_strips(few)
    big3 = K.ConvGeometry(1, 512, 14, 14, 512, 14, 14, 3, 3, (1, 1), (1,) * 4, (1, 1), 1, 8, 8)
    assert not K.packs_strips(big3) and K.conv_tiles(big3, LEVELS["avx2"]).order == 0
    assert not K.packs_strips(replace(seg, groups=2))
    assert not K.packs_strips(replace(seg, in_block=1))  # NCHW input: one channel per block


def test_cost_model_packs_1x1_strips_only_over_large_inputs_with_many_block_groups():
    small = K.ConvGeometry(1, 576, 1, 196, 96, 1, 196, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    assert not K.packs_strips(small)  # 441 KiB: stays in the L2 unpacked
    assert K.conv_tiles(small, LEVELS["avx2"]).order == 1  # weights fit: blocks innermost
    few = K.ConvGeometry(1, 144, 1, 3136, 24, 1, 3136, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    assert not K.packs_strips(few)  # two block groups: the copy would cost more
    assert K.packs_strips(replace(few, oc=64))
    big = K.ConvGeometry(1, 1024, 1, 256, 256, 1, 256, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    assert K.packs_strips(big)


def test_cost_model_and_kernel_agree_on_packing():
    header = (INCLUDE / "ember/kernels/conv_nchwc.h").read_text()
    for name in ("BLOCKS", "GROUPS"):
        assert f"#define EMBER_CONV_PACK_MIN_{name} {getattr(K, 'PACK_MIN_' + name)}\n" in header
    assert K.PACK_MIN_BYTES == 512 * 1024
    assert "#define EMBER_CONV_PACK_MIN_BYTES (512 * 1024)\n" in header


def test_cost_model_runs_1x1_pairs_5_wide_on_16_registers():
    geo = K.ConvGeometry(1, 96, 1, 196, 576, 1, 196, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    t = K.conv_tiles(geo, LEVELS["avx2"])
    assert (t.rb, t.rw) == (2, 5) and K.check_conv_tiles(t, geo) is None
    three = replace(geo, kh=3, kw=3, padding=(1,) * 4, h=14, w=14, oh=14, ow=14)
    assert K.conv_tiles(three, LEVELS["avx2"]).rw == 6  # 3x3 pairs keep 6 columns
    wide = replace(geo, lanes=16, in_block=16)
    assert K.conv_tiles(wide, LEVELS["avx512"]).rb == 4  # AVX-512: quads


def test_cost_model_runs_avx512_1x1_convs_to_8_lane_blocks_in_pair_tiles():
    # every block of a projection to 24 or 40 channels in one tile (the input read once);
    # 9 blocks in two even groups (6 + 3), not 8 + 1
    geo = K.ConvGeometry(1, 96, 1, 16384, 24, 1, 16384, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8,
                         16)
    avx512 = LEVELS["avx512"]
    for oc, want in ((16, (2, 12)), (24, (4, 12)), (40, (6, 8)), (64, (8, 6)), (72, (6, 8)),
                     (184, (8, 6))):
        t = K.conv_tiles(replace(geo, oc=oc), avx512)
        assert (t.rb, t.rw, t.order) == (*want, 1), oc
        assert K.check_conv_tiles(t, replace(geo, oc=oc)) is None
    assert K.pair_tiles(replace(geo, in_block=8), avx512) == (4, 12)
    assert K.pair_tiles(geo, LEVELS["avx2"]) is None  # 16 registers: the 8-lane tiles
    assert K.pair_tiles(replace(geo, oc=8), avx512) is None  # one block: half the lanes zero
    one = replace(geo, w=1, ow=1)  # an SE block's conv on a 1x1 map: repacking would dominate
    assert K.pair_tiles(one, avx512) is None
    for other in (replace(geo, lanes=16, oc=32), replace(geo, kh=3, kw=3),
                  replace(geo, strides=(2, 2)), replace(geo, padding=(1,) * 4),
                  replace(geo, in_block=1), replace(geo, groups=2, oc=48)):
        assert K.pair_tiles(other, avx512) is None
    assert K.check_conv_tiles(K.ConvTiles(6, 8, 8, 1, 0), replace(geo, kh=3, kw=3)) is not None


def test_pair_tiles_agree_with_the_kernel_on_widths_and_group_size():
    header = (INCLUDE / "ember/kernels/conv_nchwc_pair_impl.h").read_text()
    assert f"#define EMBER_PAIR_MAX_NP {K.PAIR_MAX_BLOCKS // 2} " in header
    assert f"#define EMBER_PAIR_MIN_PIXELS {K.PAIR_MIN_PIXELS}\n" in header
    widths = "np <= 2 ? {} : np == 3 ? {} : {}".format(K.PAIR_WIDTHS[2], K.PAIR_WIDTHS[3],
                                                       K.PAIR_WIDTHS[4])
    assert widths in header and K.PAIR_WIDTHS[1] == K.PAIR_WIDTHS[2]


@st.composite
def pair_cases(draw: st.DrawFn) -> dict:
    """1x1 stride-1 unpadded convs to 8-lane blocks: AVX-512 builds run them on the pair
    tiles (two blocks per 16-lane accumulator), other builds on the 8-lane tiles. Output
    channels 8 to 72 (odd block counts: a last pair with an empty upper half), input blocks of
    8 or 16 channels, maps from 1x1 to odd sizes with several rows (the kernel's own form, not
    the flattened one), strips cut mid-row, batches, tasks, every epilogue."""
    cb = draw(st.sampled_from([8, 16]))
    oc = 8 * draw(st.integers(1, 9))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 30))
    geo = K.ConvGeometry(1, cb, h, w, oc, h, w, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, cb)
    rb, rw = K.pair_tiles(replace(geo, h=1, w=64, oh=1, ow=64), LEVELS["avx512"]) or (2, 12)
    rb = draw(st.sampled_from([rb, 2, 4, 6, 8]))
    return {"ic": cb * draw(st.integers(1, 6)), "oc": oc, "h": h, "w": w, "k": (1, 1),
            "pads": (0,) * 4, "lanes": 8, "in_block": cb,
            "act": draw(st.sampled_from(list(K.ACTIVATIONS))), "residual": draw(st.booleans()),
            "after": draw(st.booleans()), "n": draw(st.integers(1, 2)),
            "tiles": (rb, rw, draw(st.integers(1, w)), draw(st.integers(0, 1))),
            "tasks": draw(st.integers(1, 3)), "seed": draw(st.integers(0, 1000))}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=pair_cases())
def test_1x1_convs_to_8_lane_blocks_match_numpy(harness_libs, case):
    run_case(_harness(harness_libs, "native", lanes=8), **case)


@pytest.mark.parametrize("lanes", LANE_PARAMS[1:])
@pytest.mark.parametrize("case", ["1x1_pairs_24_from_16_lane_blocks",
                                  "1x1_pairs_40_odd_map_residual",
                                  "1x1_pairs_72_two_groups_tasks",
                                  "1x1_half_blocks_24_to_48", "1x1_half_blocks_silu_tasks"])
def test_1x1_convs_between_8_and_16_lane_blocks(harness_libs, case, lanes):
    kwargs = dict(EDGE_CASES[case])
    if kwargs["oc"] % lanes:
        pytest.skip("output channels do not split into blocks of these lanes")
    run_case(_harness(harness_libs, "native", lanes=lanes), lanes=lanes, **kwargs)


def test_pair_tiles_without_a_workspace_run_the_8_lane_tiles(harness_libs):
    lib = _harness(harness_libs, "native", lanes=8)
    lib.harness_set_workspace(0)
    try:
        run_case(lib, **EDGE_CASES["1x1_pairs_40_odd_map_residual"])
    finally:
        lib.harness_set_workspace(1)
    run_case(lib, **EDGE_CASES["1x1_pairs_72_two_groups_tasks"])
    assert lib.harness_live_workspace() == 0


@st.composite
def conv_cases(draw: st.DrawFn) -> dict:
    lanes = draw(st.sampled_from(NATIVE_LANES))
    kind = draw(st.sampled_from(["dense", "nchw_input", "grouped", "depthwise"]))
    groups = 1
    if kind == "depthwise":
        ic = oc = lanes * draw(st.integers(1, 3))
        groups = ic
    elif kind == "grouped":
        groups = draw(st.integers(2, 3))
        ic, oc = groups * lanes, groups * lanes * draw(st.integers(1, 2))
    else:
        ic = draw(st.integers(1, 20)) if kind == "nchw_input" else lanes * draw(st.integers(1, 3))
        oc = lanes * draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    d = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    s = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    h_min = max(1, (kh - 1) * d[0] + 1 - pads[0] - pads[2])
    w_min = max(1, (kw - 1) * d[1] + 1 - pads[1] - pads[3])
    h, w = draw(st.integers(h_min, h_min + 10)), draw(st.integers(w_min, w_min + 10))
    ow = (w + pads[1] + pads[3] - (kw - 1) * d[1] - 1) // s[1] + 1
    tiles = None
    if kind != "depthwise" and draw(st.booleans()):
        rb = draw(st.sampled_from([1, 2, 4]))
        tiles = (rb, draw(st.integers(1, 12)), draw(st.integers(1, ow)), draw(st.integers(0, 1)))
    elif kind == "depthwise" and draw(st.booleans()):
        tiles = (1, 1, draw(st.integers(1, ow)), 0)
    return {"ic": ic, "oc": oc, "h": h, "w": w, "k": (kh, kw), "s": s, "pads": pads, "d": d,
            "groups": groups, "lanes": lanes, "in_block": 1 if kind == "nchw_input" else None,
            "act": draw(st.sampled_from(list(K.ACTIVATIONS))), "residual": draw(st.booleans()),
            "after": draw(st.booleans()), "tiles": tiles, "tasks": draw(st.integers(1, 3)),
            "seed": draw(st.integers(0, 1000))}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=conv_cases())
def test_random_convolutions_match_numpy(harness_libs, case):
    run_case(_harness(harness_libs, "native", lanes=case["lanes"]), **case)


@st.composite
def flat_quad_cases(draw: st.DrawFn) -> dict:
    """Plans of quads with blocks outermost over rows of 1 to 30 columns: AVX-512's flat tiles
    (rows up to FLAT_MAX_OW, unit column dilation, more than one tap; with many input
    blocks, in passes over chunks of them), the row tiles otherwise; output blocks not a
    multiple of 4, strides and dilations of 1 or 2."""
    lanes = draw(st.sampled_from(NATIVE_LANES))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    d = (draw(st.integers(1, 2)), draw(st.sampled_from([1, 1, 1, 2])))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    ow = draw(st.integers(1, 30))
    w = max(1, (ow - 1) * s[1] + (kw - 1) * d[1] + 1 - pads[1] - pads[3])
    h = max(1, (kh - 1) * d[0] + 1 - pads[0] - pads[2]) + draw(st.integers(0, 6))
    ow = (w + pads[1] + pads[3] - (kw - 1) * d[1] - 1) // s[1] + 1
    blocks = draw(st.sampled_from([1, 3, 20]))  # 20: weights in passes of input blocks
    return {"ic": lanes * blocks, "oc": lanes * draw(st.integers(4, 11)),
            "h": h, "w": w, "k": (kh, kw), "s": s, "pads": pads, "d": d, "lanes": lanes,
            "act": draw(st.sampled_from(["none", "relu", "clip", "silu", "gelu_erf"])),
            "residual": draw(st.booleans()), "after": draw(st.booleans()),
            "n": draw(st.integers(1, 2)), "tasks": draw(st.integers(1, 3)),
            "tiles": (4, 6, draw(st.integers(1, ow)), 0), "seed": draw(st.integers(0, 1000))}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=flat_quad_cases())
def test_flat_quad_tiles_match_numpy(harness_libs, case):
    run_case(_harness(harness_libs, "native", lanes=case["lanes"]), **case)


@st.composite
def flat_column_and_wide_cases(draw: st.DrawFn) -> dict:
    """The flat tiles' newer shapes: kernels of one column (7x1, 3x1: inception's 17x17 and
    8x8 maps) and rows of 29 to 35 columns (inception's 35x35 maps), blocks outermost in pairs
    (any build) or quads (AVX-512), vertical padding and strides, output blocks not a multiple
    of the tile's, many input blocks (passes over chunks of them), the common epilogues."""
    lanes = draw(st.sampled_from(NATIVE_LANES))
    rb = draw(st.sampled_from([2, 4]))
    column = draw(st.booleans())
    kh, kw = (draw(st.integers(2, 7)), 1) if column else (draw(st.integers(1, 3)), 3)
    s = (draw(st.integers(1, 2)), 1)
    pads = (draw(st.integers(0, kh // 2)), 0 if column else 1,
            draw(st.integers(0, kh // 2)), 0 if column else 1)
    ow = draw(st.integers(1, 17)) if column else draw(st.integers(29, 35))
    w = ow + kw - 1 - pads[1] - pads[3]
    h = max(1, kh - pads[0] - pads[2]) + draw(st.integers(0, 5))
    blocks = draw(st.sampled_from([1, 3, 20]))
    return {"ic": lanes * blocks, "oc": lanes * draw(st.integers(rb, 3 * rb + 1)),
            "h": h, "w": w, "k": (kh, kw), "s": s, "pads": pads, "lanes": lanes,
            "act": draw(st.sampled_from(["none", "relu", "clip", "silu"])),
            "residual": draw(st.booleans()), "n": draw(st.integers(1, 2)),
            "tasks": draw(st.integers(1, 3)), "tiles": (rb, 6, ow, 0),
            "seed": draw(st.integers(0, 1000))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=flat_column_and_wide_cases())
def test_flat_tiles_of_one_column_kernels_and_35_wide_rows_match_numpy(harness_libs, case):
    run_case(_harness(harness_libs, "native", lanes=case["lanes"]), **case)


@pytest.mark.parametrize("k, hw", [((7, 1), 17), ((3, 1), 8), ((3, 3), 35), ((5, 5), 32)])
def test_flat_tiles_of_pairs_on_avx2_match_numpy(harness_libs, k, hw):
    # the 16-register build's pairs over the same shapes (a 7x1 over 17 columns, 35-wide rows)
    p = (k[0] // 2, k[1] // 2)
    run_case(_harness(harness_libs, "x86-64-v3", lanes=8), ic=24, oc=40, h=hw, w=hw, k=k,
             pads=(*p, *p), lanes=8, tiles=(2, 6, hw, 0), tasks=2, residual=True)


@st.composite
def row_pass_cases(draw: st.DrawFn) -> dict:
    """Maps of 1 to 4 output rows and 36 to 90 columns (wider than the flat tiles take),
    blocks outermost (order 0), pairs or quads with enough input blocks that their weights
    run in passes over chunks of them (ember_conv_row_chunk): strides (1 or 2, 1), padding of 0 or 1 (border columns and rows),
    output blocks not a multiple of the tile's, a cut strip, tasks, the common epilogues."""
    lanes = draw(st.sampled_from(NATIVE_LANES))
    rb = draw(st.sampled_from([2, 4]))
    s = (draw(st.integers(1, 2)), 1)
    pads = tuple(draw(st.integers(0, 1)) for _ in range(4))
    oh, ow = draw(st.integers(1, 4)), draw(st.integers(36, 90))
    h, w = max(1, (oh - 1) * s[0] + 3 - pads[0] - pads[2]), ow + 2 - pads[1] - pads[3]
    ow = w + pads[1] + pads[3] - 2
    blocks = draw(st.sampled_from([1, 16, 40])) * max(1, 16 // lanes)  # 16+: in passes
    return {"ic": lanes * blocks, "oc": lanes * draw(st.integers(1, 9)), "h": h, "w": w,
            "s": s, "pads": pads, "lanes": lanes,
            "act": draw(st.sampled_from(["none", "relu", "clip", "silu"])),
            "residual": draw(st.booleans()), "after": draw(st.booleans()),
            "n": draw(st.integers(1, 2)), "tasks": draw(st.integers(1, 3)),
            "tiles": (rb, 6 if rb == 4 else draw(st.sampled_from([4, 6])),
                      draw(st.sampled_from([ow, ow // 2 + 1])), 0),
            "seed": draw(st.integers(0, 1000))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=row_pass_cases())
def test_row_tiles_in_passes_over_input_blocks_match_numpy(harness_libs, case):
    run_case(_harness(harness_libs, "native", lanes=case["lanes"]), **case)


def _task_shares(owner: np.ndarray, h: int, pad: int, k: int, tasks: int) -> np.ndarray:
    """Per task, the multiply-adds of the output floats it wrote (owner [n][ob][oy][ox][L]):
    a stride-1 k x k conv's output row oy reads the kernel rows inside the image."""
    oy = np.arange(owner.shape[2])
    taps = np.minimum(oy - pad + k, h) - np.maximum(oy - pad, 0)
    per_float = np.broadcast_to(taps[None, None, :, None, None], owner.shape)
    assert (owner >= 0).all()
    return np.bincount(owner.ravel(), weights=per_float.ravel(), minlength=tasks)


@pytest.mark.parametrize("case", [
    # flat tiles (blocks outermost): two quads (AVX-512) or four pairs over a 14x14 map, cut
    # at single positions; at strips of the rows a 2-wide strip counted as a 6-wide one
    {"h": 14, "order": 0},
    # row tiles cut by place: the edge rows of a 3x3 do two thirds of the others' work
    {"h": 28, "order": 1}])
def test_tasks_get_even_shares_of_the_multiply_adds_on_16_threads(harness_libs, case):
    """On 16 tasks (a many-core machine) every task's share of a conv's multiply-adds is
    within 8% of the mean (conv_nchwc.h ember_conv_work_before, ember_conv_task)."""
    from ember.target.simd import host_features

    rb = 4 if X86 and set(LEVELS["avx512"].features) <= host_features() else 2
    h, tasks = case["h"], 16
    owner = np.full((1, 64 // 8, h, h, 8), -1, "int32")
    run_case(_harness(harness_libs, "native", lanes=8), ic=16, oc=64, h=h, w=h, lanes=8,
             tiles=(rb, 6, h, case["order"]), tasks=tasks, owner=owner)
    shares = _task_shares(owner, h, 1, 3, tasks)
    assert shares.max() <= 1.08 * shares.mean() and shares.min() >= 0.92 * shares.mean(), \
        (shares / shares.mean()).round(3)


@pytest.mark.parametrize(("ow", "level"), [(196, "native"), (100, "native"), (196, "x86-64-v3")])
def test_a_flattened_1x1_on_16_threads_cuts_its_row_into_one_strip_a_task(harness_libs, ow,
                                                                         level):
    """A 1x1 conv cut by place over one flattened row (14x14, 10x10) on 16 tasks: even strips
    of any width (ember_conv_task_strip), so that no task runs more than one strip (cut in
    whole 6-column tiles, 196 columns made 33 strips and task 0 ran 18 columns, the others
    12), each column in the same register tile as on one task: the same bits."""
    lib = _harness(harness_libs, level, lanes=8)
    shape = {"ic": 32, "oc": 32, "h": 1, "w": ow, "k": (1, 1), "pads": (0,) * 4, "lanes": 8,
             "tiles": (2, 6, ow, 1)}
    owner = np.full((1, 4, 1, ow, 8), -1, "int32")
    alone = run_case(lib, **shape, tasks=1)
    shared = run_case(lib, **shape, tasks=16, owner=owner)
    np.testing.assert_array_equal(shared, alone)
    columns = [(owner[0, 0, 0, :, 0] == t).sum() for t in range(16)]
    assert max(columns) <= -(-ow // 16) + 1, columns


@pytest.mark.skipif(not _host_has_avx512(), reason="the tiles of AVX-512's 32 registers")
def test_a_1x1_cut_by_group_on_16_threads_gives_each_task_fewer_blocks(harness_libs):
    """A weight-heavy 1x1 conv cut by block group (2 x 2 block pairs over a flattened 7x7
    map, 8 blocks) on 16 tasks: its tiles go to single blocks (ember_conv_task_rb), so
    that each task computes one block (it read the weights of two before, each for half of
    the columns); the same bits as on one task. (With 16 registers a pair's strip is
    shared out in tiles of up to 6 columns and its plan kept.)"""
    lib = _harness(harness_libs, "native", lanes=8)
    shape = {"ic": 256, "oc": 64, "h": 1, "w": 49, "k": (1, 1), "pads": (0,) * 4, "lanes": 8,
             "tiles": (2, 6, 49, 0)}
    owner = np.full((1, 8, 1, 49, 8), -1, "int32")
    alone = run_case(lib, **shape, tasks=1)
    shared = run_case(lib, **shape, tasks=16, owner=owner)
    np.testing.assert_array_equal(shared, alone)
    blocks = [len(set(np.nonzero(owner[0, :, 0, :, 0] == t)[0])) for t in range(16)]
    assert max(blocks) == 1, blocks


# (level, lanes, oc, w, tasks, planned tiles): 1x1 convs over one row whose split on 4 tasks
# puts a column in a one-column tile that one task tiles wider (a 5-wide pair, the 8- and
# 6-wide tiles of 32 registers); those tiles summed in 4 chains, 1 ulp apart
ONE_COLUMN_SPLITS = [("x86-64-v3", 8, 16, 6, 4, (2, 5, 6, 1)),
                     ("native", 8, 16, 11, 4, (2, 8, 11, 1)),
                     ("native", 16, 64, 11, 4, (4, 6, 11, 1))]


@pytest.mark.parametrize(("level", "lanes", "oc", "w", "tasks", "tiles"), ONE_COLUMN_SPLITS)
def test_one_column_tiles_sum_in_the_order_of_the_wider_tiles(harness_libs, level, lanes, oc,
                                                              w, tasks, tiles):
    """A column summed in a one-column 1x1 tile on some thread count and in a wider tile on
    another gives the same bits (conv_nchwc_impl.h EMBER_TILE_1X1_CB: one chain in channel
    order but on a 1x1 map)."""
    if level == "native" and not _host_has_avx512():
        pytest.skip("the tiles of AVX-512's 32 registers")
    lib = _harness(harness_libs, level, lanes=lanes)
    shape = {"ic": 16, "oc": oc, "h": 1, "w": w, "k": (1, 1), "pads": (0,) * 4,
             "lanes": lanes, "tiles": tiles}
    np.testing.assert_array_equal(run_case(lib, **shape, tasks=tasks),
                                  run_case(lib, **shape, tasks=1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 2), st.sampled_from([8, 16, 24, 40, 64]), st.integers(1, 3),
       st.integers(1, 70), st.sampled_from([1, 3]), st.integers(4, 16), st.booleans(),
       st.sampled_from([("native", "avx512"), ("x86-64-v3", "avx2")]))
def test_1xk_convs_on_many_tasks_give_the_bits_of_one_task(harness_libs, n, oc, h, w, kh,
                                                          tasks, flat_strip, level):
    """Convs one column wide (1x1, 3x1: the launch's own strips and tiles on >= 4 tasks,
    ember_conv_task_strip and ember_conv_task_rb) give exactly the output of one task, with
    32 vector registers and with 16 (the plan of each)."""
    lib = _harness(harness_libs, level[0], lanes=8)
    t = K.conv_tiles(K.ConvGeometry(n, 16, h, w, oc, h, w, kh, 1, (1, 1),
                                    (kh // 2, 0, kh // 2, 0), (1, 1), 1, 8, 8), LEVELS[level[1]])
    shape = {"ic": 16, "oc": oc, "h": h, "w": w, "k": (kh, 1), "pads": (kh // 2, 0) * 2,
             "lanes": 8, "n": n, "tiles": (t.rb, t.rw, w if flat_strip else t.strip, t.order)}
    alone = run_case(lib, **shape, tasks=1)
    np.testing.assert_array_equal(run_case(lib, **shape, tasks=tasks), alone)


@pytest.mark.slow
@pytest.mark.skipif(not X86, reason="x86 only")
def test_avx512_path_compiles(tmp_path):
    """The AVX-512 path (zmm vectors, FMA intrinsics, quad tiles) compiles warning-free
    whether or not this machine can run it."""
    cmd = [CC, *STRICT, "-mavx512f", "-mavx512vl", "-mfma", "-fPIC", "-c", f"-I{INCLUDE}",
           str(HARNESS), "-o", str(tmp_path / "h.o")]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[:4000]


def test_cost_model_fits_the_register_file():
    for level, regs in (("avx2", 16), ("avx512", 32), ("sse", 16), ("scalar", 16)):
        lanes = max(4, LEVELS[level].lanes("float32"))
        geo = K.ConvGeometry(1, 64, 56, 56, 64, 56, 56, 3, 3, (1, 1), (1,) * 4, (1, 1), 1,
                             lanes, lanes)
        t = K.conv_tiles(geo, LEVELS[level])
        assert t.rb == (4 if level == "avx512" else 2) and t.threads == 1
        assert t.rw * t.rb + t.rb + 1 <= regs
    small = K.ConvGeometry(1, 8, 4, 4, 8, 4, 4, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    t = K.conv_tiles(small, LEVELS["avx2"])
    assert t.threads == 0 and t.rw <= 4 and t.rb == 1
    odd = K.ConvGeometry(1, 8, 4, 4, 24, 4, 4, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    assert K.conv_tiles(odd, LEVELS["avx2"]).rb == 2  # a pair, then a single block
    # AVX-512 quads: 6 columns x 4 blocks, also where a 7-wide row could not fill a pair
    late = K.ConvGeometry(1, 512, 7, 7, 512, 7, 7, 3, 3, (1, 1), (1,) * 4, (1, 1), 1, 16, 16)
    t = K.conv_tiles(late, LEVELS["avx512"])
    assert (t.rb, t.rw) == (4, 6) and t.rw * t.rb + t.rb + 1 <= 32
    assert K.conv_tiles(late, LEVELS["avx2"]).rb == 2  # 16 registers: no quads
    # a flattened 1x1 conv that is one block group: its row is cut into strips for threads
    flat = K.ConvGeometry(1, 64, 1, 125, 64, 1, 125, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 16, 16)
    t = K.conv_tiles(flat, LEVELS["avx512"])
    assert t.threads == 1 and t.strip % t.rw == 0 and -(-125 // t.strip) >= K.TARGET_ITEMS


def test_conv1d_rows_are_cut_into_strips_that_sit_in_the_l2():
    # wav2vec2's second feature conv: 512 -> 512 channels, kernel 3, stride 2, 3199 samples
    geo = K.ConvGeometry(1, 512, 1, 3199, 512, 1, 1599, 1, 3, (1, 2), (0,) * 4, (1, 1), 1, 8, 8)
    assert K.is_conv1d(geo)
    for level in ("avx2", "avx512", "sse"):
        t = K.conv_tiles(geo, LEVELS[level])
        assert t.strip % t.rw == 0 and t.strip < geo.ow
        assert t.strip * 2 * 512 * 4 <= K.L2_BYTES // 4  # one input strip: a quarter of L2
        # blocks innermost (its 3 MiB of weights once per strip: 162 MiB) with 32 block pairs
        # (the 6.2 MiB row once per pair: 200 MiB); blocks outermost with AVX-512's 16 quads
        assert t.order == (0 if level == "avx512" else 1)
    wide = replace(geo, lanes=16, in_block=16)
    assert K.conv_tiles(wide, LEVELS["avx512"]).order == 0  # 8 quads
    fits = replace(wide, ic=128, oc=64)  # 96 KiB of weights: they fit half the L2
    assert K.conv_tiles(fits, LEVELS["avx512"]).order == 1
    short = K.ConvGeometry(1, 64, 1, 40, 64, 1, 38, 1, 3, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    t = K.conv_tiles(short, LEVELS["avx2"])
    assert t.order == 1 and t.strip == 38  # the whole row fits: one strip
    # not conv1d: a 2-D kernel on one row, a kernel-height-1 conv on a taller map, a 1x1
    for other in (K.ConvGeometry(1, 8, 3, 9, 8, 1, 7, 3, 3, (1, 1), (0,) * 4, (1, 1), 1, 8, 8),
                  K.ConvGeometry(1, 8, 4, 9, 8, 4, 7, 1, 3, (1, 1), (0,) * 4, (1, 1), 1, 8, 8),
                  K.ConvGeometry(1, 8, 1, 9, 8, 1, 9, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)):
        assert not K.is_conv1d(other)


def test_wrappers_refuse_bad_lanes_and_activations():
    from ember.runtime.errors import OpError
    from ember.te import tensor as te

    geo = K.ConvGeometry(1, 8, 4, 4, 6, 4, 4, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 6, 1)
    x = te.placeholder((1, 8, 4, 4, 1))
    with pytest.raises(OpError, match="lanes"):
        K.conv2d_nchwc(x, x, x, None, geo, LEVELS["avx2"])
    geo8 = K.ConvGeometry(1, 8, 4, 4, 8, 4, 4, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    with pytest.raises(OpError, match="activation"):
        # the relay op's name: the kernel's are gelu_erf and gelu_tanh
        K.conv2d_nchwc(x, x, x, None, geo8, LEVELS["avx2"], act="gelu")
    with pytest.raises(OpError, match="does not split"):
        K.pack_weight(np.zeros((6, 8, 1, 1), "float32"), 8, 8)


def test_unit_convs_run_as_one_long_row():
    geo = K.ConvGeometry(1, 64, 7, 5, 64, 7, 5, 1, 1, (1, 1), (0,) * 4, (1, 1), 1, 8, 8)
    flat = K.flattened(geo)
    assert (flat.h, flat.w, flat.oh, flat.ow) == (1, 35, 1, 35) and flat.macs == geo.macs
    strided = K.ConvGeometry(1, 64, 8, 8, 64, 4, 4, 1, 1, (2, 2), (0,) * 4, (1, 1), 1, 8, 8)
    assert K.flattened(strided) is strided


@st.composite
def recogniser_cases(draw: st.DrawFn) -> dict:
    """A text recogniser's convs and inception's factorised ones, with the AVX-512 cost model's
    plan on 16 lanes (else AVX2's): 3x3s over maps of 1 to 3 output rows and odd or 80-wide
    rows at strides (2, 1) and (1, 1), with enough input blocks for passes over them (each
    tile prefetching the next pass's weights); 1x7, 7x1, 1x3 and 3x1 kernels over 17- and
    8-wide maps (the flat tiles, in one pass or several); output blocks not a multiple of
    the tile's (the last block group prefetches nothing past the weights)."""
    lanes = draw(st.sampled_from(NATIVE_LANES))
    if draw(st.booleans()):
        k, s, pads = (3, 3), (draw(st.integers(1, 2)), 1), (1, 1, 1, 1)
        oh, ow = draw(st.integers(1, 3)), draw(st.sampled_from([17, 39, 80, 81]))
        h, w = (oh - 1) * s[0] + 1, ow
    else:
        n = draw(st.sampled_from([3, 7]))
        k = draw(st.sampled_from([(1, n), (n, 1)]))
        pads = (k[0] // 2, k[1] // 2, k[0] // 2, k[1] // 2)
        h = w = draw(st.sampled_from([8, 17]))
        s = (1, 1)
    blocks = draw(st.sampled_from([1, 8, 24])) * max(1, 16 // lanes)
    ic, oc = lanes * blocks, lanes * draw(st.integers(1, 9))
    oh = (h + pads[0] + pads[2] - k[0]) // s[0] + 1
    ow = (w + pads[1] + pads[3] - k[1]) // s[1] + 1
    level = LEVELS["avx512" if lanes == 16 else "avx2"]
    geo = K.ConvGeometry(1, ic, h, w, oc, oh, ow, *k, s, pads, (1, 1), 1, lanes, lanes)
    t = K.conv_tiles(geo, level)
    return {"ic": ic, "oc": oc, "h": h, "w": w, "k": k, "s": s, "pads": pads, "lanes": lanes,
            "act": draw(st.sampled_from(["none", "relu", "clip"])),
            "residual": draw(st.booleans()), "tasks": draw(st.integers(1, 3)),
            "tiles": (t.rb, t.rw, t.strip, t.order), "seed": draw(st.integers(0, 1000))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(case=recogniser_cases())
def test_recogniser_and_factorised_convs_match_numpy(harness_libs, case):
    run_case(_harness(harness_libs, "native", lanes=case["lanes"]), **case)


@pytest.mark.parametrize("k, s, hw", [((3, 3), (2, 1), (6, 80)), ((3, 3), (1, 1), (3, 80)),
                                      ((1, 7), (1, 1), (17, 17)), ((7, 1), (1, 1), (17, 17))])
def test_recogniser_and_factorised_convs_on_avx2_match_numpy(harness_libs, k, s, hw):
    # the 16-register build's plans (pairs; the 3x3s in passes over chunks of 32 input blocks)
    pads = (k[0] // 2, k[1] // 2, k[0] // 2, k[1] // 2)
    oh = (hw[0] + 2 * pads[0] - k[0]) // s[0] + 1
    ow = hw[1] + 2 * pads[1] - k[1] + 1
    geo = K.ConvGeometry(1, 256, *hw, 40, oh, ow, *k, s, pads, (1, 1), 1, 8, 8)
    t = K.conv_tiles(geo, LEVELS["avx2"])
    run_case(_harness(harness_libs, "x86-64-v3", lanes=8), ic=256, oc=40, h=hw[0], w=hw[1],
             k=k, s=s, pads=pads, lanes=8, tiles=(t.rb, t.rw, t.strip, t.order), tasks=2,
             residual=True)
