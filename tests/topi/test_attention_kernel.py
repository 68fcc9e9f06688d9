"""The fused attention C kernel (ember/kernels/attention.h) against numpy (float64 products,
numpy's softmax formula; rtol 1e-4, atol 1e-5), through a ctypes harness at every SIMD level
this machine runs (AVX-512 where the host has it, AVX2+FMA, SSE2, the portable C99 path):

- Q, K, V and the output read and written through head strides, (batch, seq, heads * dim)
  rows as the GEMM views give them, batch of 2 with heads 1, 3 and 12, head dims 32, 64 and
  80 (not a multiple of the panel width), odd sequence lengths, one query row, more keys than
  queries; row blocks of one register tile and of several; K stored transposed or not, V
  read in place or packed; the parallel split;
- a scalar and a per-key bias, additive masks broadcast over heads and rows, and a mask with
  a row of -inf (NaN as numpy's formula gives it).
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import HARNESS_LEVELS, harness_library

HERE = Path(__file__).parent
F32 = ctypes.POINTER(ctypes.c_float)
RNG = np.random.default_rng(5)


@pytest.fixture(scope="module", params=list(HARNESS_LEVELS))
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    level = request.param
    lib = harness_library(HERE / "data" / "attention_harness.c", level,
                          tmp_path_factory.mktemp(level))
    lib.harness_attention.argtypes = [F32, F32, F32, F32, F32, F32, ctypes.c_float,
                                      ctypes.POINTER(ctypes.c_int32)]
    return lib


def _ptr(a: np.ndarray | None) -> object:
    return None if a is None else a.ctypes.data_as(F32)


def _run(lib: ctypes.CDLL, outer: int, heads: int, M: int, N: int, D: int, DV: int, *,
         mb: int, k_rows: bool = True, alpha: float = 0.125, bias: np.ndarray | None = None,
         mask: np.ndarray | None = None, parallel: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The kernel on (outer, seq, heads * dim) rows (K as (outer, N, heads * D) rows when
    ``k_rows``, else (outer, heads, D, N)), against numpy. mask: (outer or 1, heads or 1,
    M or 1, N or 1)."""
    q = RNG.standard_normal((outer, M, heads * D)).astype(np.float32)
    k = RNG.standard_normal((outer, N, heads * D) if k_rows else (outer, heads, D, N))
    k = k.astype(np.float32)
    v = RNG.standard_normal((outer, N, heads * DV)).astype(np.float32)
    guarded = np.full(outer * M * heads * DV + 64, 7.0, np.float32)
    o = guarded[:-64]
    qh = q.reshape(outer, M, heads, D).transpose(0, 2, 1, 3)
    kh = (k.reshape(outer, N, heads, D).transpose(0, 2, 3, 1) if k_rows else k)
    vh = v.reshape(outer, N, heads, DV).transpose(0, 2, 1, 3)
    s = alpha * (qh.astype(np.float64) @ kh.astype(np.float64))
    bias_mode = 0
    if bias is not None:
        s = s + bias
        bias_mode = 1 if bias.size == 1 else 2
    m_str = (0, 0, 0, 0)
    if mask is not None:
        s = s + mask
        m_str = tuple(0 if d == 1 else st_ // 4 for d, st_ in zip(mask.shape, mask.strides))
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        want = (e / e.sum(-1, keepdims=True)) @ vh
    want = want.transpose(0, 2, 1, 3).reshape(outer, M, heads * DV)
    k_str = (N * heads * D, D, 1, heads * D) if k_rows else (heads * D * N, D * N, N, 1)
    ints = [outer * heads, heads, M, N, D, DV, M * heads * D, D, heads * D, *k_str,
            N * heads * DV, DV, heads * DV, 1, M * heads * DV, DV, heads * DV, bias_mode,
            *m_str, mb, D, N, int(parallel)]
    arr = (ctypes.c_int32 * len(ints))(*ints)
    rc = lib.harness_attention(_ptr(q), _ptr(k), _ptr(v), _ptr(o), _ptr(bias), _ptr(mask),
                               alpha, arr)
    assert rc == 0
    assert (guarded[-64:] == 7.0).all(), "the kernel wrote past its output"
    return o.reshape(outer, M, heads * DV), want


@settings(max_examples=12, deadline=None)
@given(heads=st.sampled_from([1, 3, 12]), M=st.sampled_from([1, 5, 13, 40]),
       N=st.sampled_from([1, 7, 33, 100]), D=st.sampled_from([32, 64, 80]),
       DV=st.sampled_from([32, 64, 80]), mb_tiles=st.integers(1, 3), k_rows=st.booleans(),
       parallel=st.booleans())
def test_attention_matches_numpy(lib: ctypes.CDLL, heads: int, M: int, N: int, D: int,
                                 DV: int, mb_tiles: int, k_rows: bool, parallel: bool) -> None:
    got, want = _run(lib, 2, heads, M, N, D, DV, mb=6 * mb_tiles, k_rows=k_rows,
                     parallel=parallel)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 1, 1, 9), (1, 3, 1, 9), (1, 1, 5, 9), (2, 3, 5, 9)])
def test_masks_broadcast_and_bias(lib: ctypes.CDLL, shape: tuple) -> None:
    mask = np.where(RNG.random(shape) < 0.3, -1e4, RNG.standard_normal(shape))
    mask = mask.astype(np.float32)
    bias = RNG.standard_normal(9).astype(np.float32)
    got, want = _run(lib, 2, 3, 5, 9, 32, 32, mb=6, bias=bias, mask=mask, parallel=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    got, want = _run(lib, 2, 3, 5, 9, 32, 32, mb=12, bias=np.float32([0.5]), mask=mask)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_causal_mask_and_an_all_masked_row_give_nan_like_numpy(lib: ctypes.CDLL) -> None:
    M = N = 21
    mask = np.triu(np.full((M, N), -np.inf, np.float32), 1)[None, None]
    mask = np.ascontiguousarray(mask)
    mask[0, 0, 4] = -np.inf  # row 4 sees no key: 0/0
    got, want = _run(lib, 1, 3, M, N, 64, 64, mb=12, mask=mask)
    assert np.isnan(got[0, 4]).all() and np.isnan(want[0, 4]).all()
    rows = [r for r in range(M) if r != 4]
    np.testing.assert_allclose(got[0, rows], want[0, rows], rtol=1e-4, atol=1e-5)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 9), st.integers(1, 3000), st.integers(1, 20000), st.booleans(),
       st.sampled_from(["avx2", "avx512"]))
def test_the_run_time_row_block_folds_to_the_static_one(batch: int, M: int, N: int,
                                                       parallel: bool, level: str) -> None:
    """With ``?`` sizes the kernel's row block is an expression (attention_kernel._tiles): at
    constant sizes it folds to the blocking rule's int (here in plain Python), so a dynamic
    build blocks as a static one."""
    from ember.target.simd import LEVELS
    from ember.tir import op as tir
    from ember.tir.expr import IntImm
    from ember.topi.nn import attention_kernel as ak
    from ember.topi.nn import gemm_kernel as gk

    lv = LEVELS[level]
    got = ak.row_block_expr(tir.const(batch), tir.const(M), tir.const(N),
                            tir.const(int(parallel)), lv)
    assert isinstance(got, IntImm), got
    # M in equal blocks of whole register tiles, the two buffers within BUFFER_BYTES, with
    # parallel at least TARGET_ITEMS items where M allows
    mr = gk.register_rows(lv)
    largest = max(mr, ak.BUFFER_BYTES // (8 * N) // mr * mr)
    blocks = -(-M // largest)
    if parallel:
        blocks = max(blocks, min(-(-gk.TARGET_ITEMS // batch), -(-M // mr)))
    rows = -(-M // blocks)
    want = -(-rows // mr) * mr
    assert got.value == want == ak.row_block(batch, M, N, parallel, lv)
