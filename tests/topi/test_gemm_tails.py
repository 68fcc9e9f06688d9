"""The C GEMM kernel (ember/kernels/gemm.h) called directly through ctypes, against numpy,
over random shapes (hypothesis): M tails of every length (the 6-row tile, the 3-row tile of
2-3 rows, 4 rows as 3 + 1, the row kernel of 1), N not a multiple of the panel, odd K, k blocks (kc < K, so
later blocks accumulate into C), row blocks (mc), packed and row-major B, a bias, a residual
and the tanh-GELU epilogue, serial and split into tasks; products of 1-6 rows, which stream
several panels side by side (gemm_few_rows.h), with groups of panels cut by N, by the task
split and by a partial row-major panel; at the host's SIMD level, at AVX2 (16 registers:
fewer panels side by side) and at SSE2 (the 4-lane build). One library per level, built once
per session."""
from __future__ import annotations

import ctypes
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.contrib import cc

HERE = Path(__file__).parent
INCLUDE = Path(ember.__file__).parent / "include"
LEVELS = {"native": ["-march=native"], "avx2": ["-march=x86-64-v3"],
          "sse2": ["-march=x86-64-v2"]}
ACT_RELU, ACT_GELU_TANH = 1, 4  # gemm_epilogue.h's EMBER_ACT_*
FLOATS = ctypes.POINTER(ctypes.c_float)


@pytest.fixture(scope="module", params=list(LEVELS))
def gemm_lib(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    compiler = cc.get_cc()
    if compiler is None:
        pytest.skip("no C compiler found")
    out = tmp_path_factory.mktemp("gemm") / f"gemm_{request.param}.so"
    subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC",
                    "-shared", "-ffp-contract=fast", *LEVELS[request.param], "-I", str(INCLUDE),
                    str(HERE / "data" / "gemm_ctypes.c"), "-o", str(out), "-lm"], check=True,
                   capture_output=True)
    lib = ctypes.CDLL(str(out))
    lib.gemm_call.restype = ctypes.c_int32
    lib.gemm_call.argtypes = [ctypes.c_int32] * 3 + [FLOATS, FLOATS, ctypes.c_int32, FLOATS,
                                                     FLOATS, FLOATS] + [ctypes.c_int32] * 4
    lib.gemm_call_b.restype = ctypes.c_int32
    lib.gemm_call_b.argtypes = [ctypes.c_int32] * 3 + [FLOATS, FLOATS] + [ctypes.c_int32] * 3 \
        + [FLOATS, FLOATS] + [ctypes.c_int32] * 3
    return lib


def _ptr(a: np.ndarray | None):  # type: ignore[no-untyped-def]
    return None if a is None else a.ctypes.data_as(FLOATS)


def _pack(b: np.ndarray, nr: int) -> np.ndarray:
    k, n = b.shape
    padded = np.pad(b, ((0, 0), (0, -n % nr)))
    return np.ascontiguousarray(padded.reshape(k, -1, nr).transpose(1, 0, 2))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def run_gemm(lib, a: np.ndarray, b: np.ndarray, packed: bool, bias: np.ndarray,
             res: np.ndarray | None, gelu: bool | int, mc: int, kc: int,
             tasks: int) -> np.ndarray:
    """C = act(A B + bias) + res through the kernel; ``gelu``: True for tanh-GELU, or an
    activation code."""
    (m, k), n = a.shape, b.shape[1]
    nr = 2 * max(4, lib.gemm_lanes())
    bb = _pack(b, nr) if packed else b
    c = np.full((m, n), np.nan, np.float32)
    rc = lib.gemm_call(m, n, k, _ptr(a), _ptr(bb), nr if packed else 0, _ptr(c), _ptr(bias),
                       _ptr(res), ACT_GELU_TANH if gelu is True else int(gelu), mc, kc, tasks)
    assert rc == 0
    return c


def reference(a, b, bias, res, gelu):  # type: ignore[no-untyped-def]
    y = a.astype(np.float64) @ b.astype(np.float64) + bias
    if gelu is True or gelu == ACT_GELU_TANH:
        y = _gelu_tanh(y)
    elif gelu == ACT_RELU:
        y = np.maximum(y, 0)
    return y + (0 if res is None else res)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 50), k=st.integers(1, 70),
       packed=st.booleans(), residual=st.booleans(), gelu=st.booleans(),
       mc=st.sampled_from([6, 12, 18, 60]), kc=st.integers(1, 80), tasks=st.sampled_from([1, 3]),
       seed=st.integers(0, 2**16))
def test_gemm_matches_numpy_over_shapes(gemm_lib, m: int, n: int, k: int, packed: bool,
                                        residual: bool, gelu: bool, mc: int, kc: int,
                                        tasks: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    res = rng.uniform(-1, 1, (m, n)).astype(np.float32) if residual else None
    got = run_gemm(gemm_lib, a, b, packed, bias, res, gelu, mc, kc, tasks)
    np.testing.assert_allclose(got, reference(a, b, bias, res, gelu), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("m", [2, 3, 4, 8, 9, 16, 128])
def test_short_row_tiles_with_k_blocks(gemm_lib, m: int) -> None:
    """2, 3 and 4 rows (alone, after a 6-row tile, M = 128's last tile; 4 rows run as 3 + 1)
    over an odd K split into k blocks of odd length: the 3-row tile's odd-k step and its
    accumulation into C."""
    rng = np.random.default_rng(m)
    a = rng.uniform(-1, 1, (m, 301)).astype(np.float32)
    b = rng.uniform(-1, 1, (301, 40)).astype(np.float32)
    bias = np.zeros(40, np.float32)
    for kc in (301, 77, 1):
        got = run_gemm(gemm_lib, a, b, True, bias, None, False, 12, kc, 1)
        np.testing.assert_allclose(got, reference(a, b, bias, None, False), rtol=1e-5,
                                   atol=1e-4, err_msg=f"M={m} kc={kc}")


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("n", [1, 33, 130, 200])
def test_few_rows_stream_panels_side_by_side(gemm_lib, m: int, n: int) -> None:
    """1-6 rows (and 7, the first past the path) over N of 1 panel, 2 (33 columns), 4-5 and
    7-13 panels (groups of 2-4 side by side, then single panels), an odd K, packed and
    row-major B (whose partial last panel is copied), bias and ReLU or a residual, one task
    and three (each task's range cuts a group)."""
    rng = np.random.default_rng(100 * m + n)
    a = rng.uniform(-1, 1, (m, 203)).astype(np.float32)
    b = rng.uniform(-1, 1, (203, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    res = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    for packed in (True, False):
        for tasks in (1, 3):
            for act, r in ((ACT_RELU, None), (0, res)):
                got = run_gemm(gemm_lib, a, b, packed, bias, r, act, 12, 64, tasks)
                np.testing.assert_allclose(got, reference(a, b, bias, r, act), rtol=1e-5,
                                           atol=1e-4, err_msg=f"packed={packed} tasks={tasks} "
                                           f"act={act}")


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 7), n=st.integers(1, 300), k=st.integers(1, 90), packed=st.booleans(),
       act=st.sampled_from([0, ACT_RELU, ACT_GELU_TANH]), residual=st.booleans(),
       tasks=st.sampled_from([1, 2, 3]), seed=st.integers(0, 2**16))
def test_few_rows_match_numpy_over_shapes(gemm_lib, m: int, n: int, k: int, packed: bool,
                                          act: int, residual: bool, tasks: int,
                                          seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    res = rng.uniform(-1, 1, (m, n)).astype(np.float32) if residual else None
    got = run_gemm(gemm_lib, a, b, packed, bias, res, act, 12, k, tasks)
    np.testing.assert_allclose(got, reference(a, b, bias, res, act), rtol=1e-5, atol=2e-5)


def _b_layout(b: np.ndarray, layout: str, nr: int) -> tuple[np.ndarray, int, int, int]:
    """B (K, N) stored as ``layout``: (array, b_ks, b_ns, b_nr) for ``gemm_call_b``."""
    k, n = b.shape
    if layout == "row-major":
        return np.ascontiguousarray(b), n, 1, 0
    if layout == "row stride":  # rows further apart than N (a slice of a wider matrix)
        wide = np.zeros((k, n + 5), np.float32)
        wide[:, :n] = b
        return wide, n + 5, 1, 0
    if layout == "transposed":  # (N, K) row-major: a dense weight, or K^T of attention
        return np.ascontiguousarray(b.T), 1, k, 0
    width = {"packed other": nr // 2 if nr > 8 else 2 * nr, "packed": nr}[layout]
    return _pack(b, width), 0, 0, width


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 70), k=st.integers(1, 70),
       layout=st.sampled_from(["row-major", "row stride", "transposed", "packed other",
                               "packed"]),
       kc=st.integers(1, 80), tasks=st.sampled_from([1, 3]), seed=st.integers(0, 2**16))
def test_gemm_reads_every_b_layout(gemm_lib, m: int, n: int, k: int, layout: str, kc: int,
                                   tasks: int, seed: int) -> None:
    """B row-major (its partial last panel copied), with a row stride past N, transposed
    (every panel copied, a column of B at a time from strided elements) and packed for
    another vector width, at run-time rows 1..40 (the few-rows path below 7) and odd N and
    K, in k blocks (each block's panel copied again) and split into tasks."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    nr = 2 * max(4, gemm_lib.gemm_lanes())
    stored, b_ks, b_ns, b_nr = _b_layout(b, layout, nr)
    c = np.full((m, n), np.nan, np.float32)
    rc = gemm_lib.gemm_call_b(m, n, k, _ptr(a), _ptr(stored), b_ks, b_ns, b_nr, _ptr(c),
                              _ptr(bias), 12, kc, tasks)
    assert rc == 0
    np.testing.assert_allclose(c, reference(a, b, bias, None, 0), rtol=1e-5, atol=2e-5)
