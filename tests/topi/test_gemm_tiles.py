"""ember_sgemm's register tiles over drawn shapes: every row tail of the 12-row (AVX-512) and
6-row tiles, column tails of the 2-vector panels, k blocks, every B layout, serial and split
into tasks, against numpy in float64. The kernel is built once per SIMD level as a shared
library (``data/gemm_lib.c``) and called through ctypes, so hypothesis can draw many shapes.
"""
from __future__ import annotations

import ctypes
import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.contrib import cc
from ember.target.simd import LEVELS, host_features
from ember.topi.nn import gemm_kernel as G

HERE = Path(__file__).parent
INCLUDE = Path(ember.__file__).parent / "include"
X86 = platform.machine().lower() in ("x86_64", "amd64")
# the build flags of each kernel variant, and the SIMD level it needs; "avx512-eager" takes the
# paths gemm.h keeps for large products at every size: the B-panel prefetch
# (EMBER_GEMM_PREFETCH_BYTES of B), the C-tile prefetch (EMBER_GEMM_PREFETCH_C_BYTES of C) and,
# for a row stride of A that is a multiple of 1024, the packed A (EMBER_GEMM_PACK_A_PANELS
# panels), and the items' (batch, row block, panel) order of a product of 2-4 panels read in
# place (EMBER_GEMM_INNER_A_BYTES of A)
VARIANTS = {"avx512": ("avx512", ["-march=x86-64-v4"]), "avx2": ("avx2", ["-march=x86-64-v3"]),
            "avx512-eager": ("avx512", ["-march=x86-64-v4", "-DEMBER_GEMM_PREFETCH_BYTES=0",
                                        "-DEMBER_GEMM_PREFETCH_C_BYTES=0",
                                        "-DEMBER_GEMM_PACK_A_PANELS=1",
                                        "-DEMBER_GEMM_INNER_A_BYTES=0"]),
            "avx2-eager": ("avx2", ["-march=x86-64-v3", "-DEMBER_GEMM_PREFETCH_C_BYTES=0",
                                    "-DEMBER_GEMM_INNER_A_BYTES=0"])}
F32, I32 = ctypes.POINTER(ctypes.c_float), ctypes.c_int32
# ember_sgemm's parameters after the pointers' places are filled (EMBER_SGEMM_PARAMS)
ARGTYPES = [I32] * 4 + [F32, I32, I32, F32, I32, I32, I32, I32, F32, I32, I32, ctypes.c_float,
                        I32, F32, I32, F32, I32, ctypes.c_float, ctypes.c_float, I32,
                        ctypes.c_float, ctypes.c_float, I32, I32, I32, I32, I32, I32, I32]
_LIBS: dict[str, ctypes.CDLL] = {}


def _lib(variant: str, tmp: Path) -> ctypes.CDLL:
    """The kernel built as ``variant`` (VARIANTS; once per session)."""
    level, flags = VARIANTS[variant]
    if not X86 or not set(LEVELS[level].features) <= host_features():
        pytest.skip(f"this machine cannot run {level} code")
    compiler = cc.get_cc()
    if compiler is None:
        pytest.skip("no C compiler found")
    if variant not in _LIBS:
        so = tmp / f"gemm_{variant}.so"
        cmd = [compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *flags,
               "-fPIC", "-shared", "-I", str(INCLUDE), str(HERE / "data" / "gemm_lib.c"),
               "-o", str(so)]
        subprocess.run(cmd, check=True, capture_output=True)
        lib = ctypes.CDLL(str(so))
        lib.test_sgemm.argtypes, lib.test_sgemm.restype = ARGTYPES, I32
        _LIBS[variant] = lib
    return _LIBS[variant]


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(F32)


def _run(lib: ctypes.CDLL, a: np.ndarray, b: np.ndarray, layout: str, mc: int, kc: int,
         parallel: bool, bias: np.ndarray, res: np.ndarray | None, lda: int = 0) -> np.ndarray:
    """C = relu(A @ B + bias) + res through the kernel, B (K, N) passed in ``layout``; A read
    with row stride ``lda`` (its row length when 0) from a padded copy."""
    (m, k), n = a.shape, b.shape[1]
    lda = lda or k
    a_rows = np.zeros((m, lda), np.float32)
    a_rows[:, :k] = a
    c = np.empty((m, n), np.float32)
    if layout in ("packed", "packed4"):
        nr = lib.gemm_panel_width() if layout == "packed" else 4
        bb, strides = G.pack_weight_np(b, nr, transpose=False), (0, 0, nr)
    elif layout == "kn":
        bb, strides = b, (n, 1, 0)
    else:  # a dense weight (N, K)
        bb, strides = np.ascontiguousarray(b.T), (1, k, 0)
    res_arg = res if res is not None else c
    rc = lib.test_sgemm(1, m, n, k, _ptr(a_rows), 0, lda, _ptr(bb), 0, *strides, _ptr(c), 0, n, 1.0,
                        2, _ptr(bias), 0 if res is None else 2, _ptr(res_arg), 1, 0.0, 0.0, 0,
                        0.0, 0.0, mc, kc, int(parallel), 1, 0, 0, 0)
    assert rc == 0
    return c


@pytest.mark.parametrize("variant", list(VARIANTS))
@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 100), k=st.integers(1, 70),
       layout=st.sampled_from(["packed", "packed4", "kn", "nk"]), mc_tiles=st.integers(1, 4),
       kc_part=st.floats(0.05, 1.0), parallel=st.booleans(), residual=st.booleans(),
       lda_pad=st.sampled_from([0, 3, 1024, 4096]))
def test_tiles_match_numpy(variant: str, tmp_path_factory: pytest.TempPathFactory, m: int,
                           n: int, k: int, layout: str, mc_tiles: int, kc_part: float,
                           parallel: bool, residual: bool, lda_pad: int) -> None:
    """lda_pad: A's row stride is k, k + 3, or a multiple of 1024 or 4096 floats (every row
    of a tile in the same L1 set)."""
    lib = _lib(variant, tmp_path_factory.getbasetemp())
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    res = rng.standard_normal((m, n), dtype=np.float32) if residual else None
    mc = mc_tiles * lib.gemm_register_rows()
    lda = k + lda_pad if lda_pad < 1024 else -(-k // lda_pad) * lda_pad
    got = _run(lib, a, b, layout, mc, max(1, round(kc_part * k)), parallel, bias, res, lda)
    want = np.maximum(a.astype(np.float64) @ b + bias, 0) + (0 if res is None else res)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_register_rows_match_the_header() -> None:
    for level in ("avx512", "avx2"):
        if X86 and set(LEVELS[level].features) <= host_features() and cc.get_cc():
            lib = _lib(level, Path(__import__("tempfile").mkdtemp()))
            assert lib.gemm_register_rows() == G.register_rows(LEVELS[level])
            assert lib.gemm_panel_width() == G.panel_width(LEVELS[level])


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("mc_tiles,kc,parallel", [(1, 30, False), (2, 70, True), (4, 25, True)])
def test_packed_a_over_batches_and_row_blocks(variant: str, tmp_path_factory, mc_tiles: int,
                                              kc: int, parallel: bool) -> None:
    """A of row stride 1024 (packed by "avx512-eager": gemm.h's EMBER_GEMM_PACK_A_LDA), three
    batches of 37 rows (full tiles and a tail) in row blocks of mc_tiles tiles and k blocks of
    kc: each batch's block is packed again, none read from another batch's copy."""
    lib = _lib(variant, tmp_path_factory.getbasetemp())
    batch, m, n, k, lda = 3, 37, 70, 70, 1024
    rng = np.random.default_rng(5)
    a = np.zeros((batch, m, lda), np.float32)
    a[:, :, :k] = rng.standard_normal((batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    nr = lib.gemm_panel_width()
    bb = np.stack([G.pack_weight_np(b[i], nr, transpose=False) for i in range(batch)])
    c = np.empty((batch, m, n), np.float32)
    rc = lib.test_sgemm(batch, m, n, k, _ptr(a), m * lda, lda, _ptr(bb), bb[0].size, 0, 0, nr,
                        _ptr(c), m * n, n, 1.0, 2, _ptr(bias), 0, _ptr(c), 1, 0.0, 0.0, 0, 0.0,
                        0.0, mc_tiles * lib.gemm_register_rows(), kc, int(parallel), 1, 0, 0,
                        0)
    assert rc == 0
    want = np.maximum(a[:, :, :k].astype(np.float64) @ b + bias, 0)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("variant", ["avx512", "avx2-eager"])
@settings(max_examples=12, deadline=None)
@given(outer=st.integers(1, 3), heads=st.integers(1, 4), m=st.integers(1, 30),
       n=st.integers(1, 70), k=st.integers(1, 40), transposed=st.booleans(),
       parallel=st.booleans())
def test_heads_of_a_batch_read_and_written_through_two_strides(
        variant: str, tmp_path_factory: pytest.TempPathFactory, outer: int, heads: int, m: int,
        n: int, k: int, transposed: bool, parallel: bool) -> None:
    """Attention at batch > 1: batch b = (b / heads, b % heads), each operand at
    outer * bs + head * hs. A and B are heads of (outer, seq, heads * k) rows (B transposed,
    K^T, or row-major, V); C and the residual are written into (outer, m, heads * n)."""
    lib = _lib(variant, tmp_path_factory.getbasetemp())
    rng = np.random.default_rng(outer * 1000 + heads * 100 + m)
    a = rng.standard_normal((outer, m, heads, k), dtype=np.float32)
    b = rng.standard_normal((outer, n, heads, k) if transposed else (outer, k, heads, n),
                            dtype=np.float32)
    res = rng.standard_normal((outer, m, heads, n), dtype=np.float32)
    c = np.empty((outer, m, heads, n), np.float32)
    bias = np.zeros(1, np.float32)
    b_ks, b_ns, b_hs = (1, heads * k, k) if transposed else (heads * n, 1, n)
    rc = lib.test_sgemm(outer * heads, m, n, k, _ptr(a), m * heads * k, heads * k, _ptr(b),
                        b[0].size, b_ks, b_ns, 0, _ptr(c), m * heads * n, heads * n, 0.5, 0,
                        _ptr(bias), 2, _ptr(res), 0, 0.0, 0.0, 0, 0.0, 0.0,
                        lib.gemm_register_rows(), 16, int(parallel), heads, k, b_hs, n)
    assert rc == 0
    bt = b.transpose(0, 2, 3, 1) if transposed else b.transpose(0, 2, 1, 3)  # (o, h, k, n)
    want = 0.5 * (a.transpose(0, 2, 1, 3).astype(np.float64) @ bt) + res.transpose(0, 2, 1, 3)
    np.testing.assert_allclose(c.transpose(0, 2, 1, 3), want, rtol=1e-4,
                               atol=1e-4 * np.sqrt(k))
