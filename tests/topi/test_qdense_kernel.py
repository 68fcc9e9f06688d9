"""The int8 dense kernel (ember/kernels/qdense.h) through a ctypes harness at every SIMD level
this machine runs, exactly against numpy's int64 products: with and without a workspace (the
AVX2 tiles widen rows into one; without it they take the byte-pair tiles, which need none)."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from topi_util import HARNESS_LEVELS, harness_library

from ember.topi.nn.qdense import pack_weight

HERE = Path(__file__).parent


@pytest.fixture(scope="module", params=list(HARNESS_LEVELS))
def harness(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = harness_library(HERE / "data" / "qdense_harness.c", request.param,
                          tmp_path_factory.mktemp(request.param))
    lib.harness_qdense.argtypes = [ctypes.c_void_p] * 5 + [ctypes.POINTER(ctypes.c_int64)]
    return lib


@pytest.mark.parametrize("workspace", [True, False])
@pytest.mark.parametrize("signed", [False, True])
def test_products_are_exact_with_and_without_a_workspace(harness: ctypes.CDLL, workspace: bool,
                                                         signed: bool) -> None:
    rng = np.random.default_rng(int(signed) * 2 + int(workspace))
    m, n, k = 70, 37, 23  # two row blocks, a ragged column block, k not a multiple of 4
    a = (rng.integers(-128, 128, (m, k)).astype(np.int8) if signed
         else rng.integers(0, 256, (m, k)).astype(np.uint8))
    a[0] = -128 if signed else 255  # extremes: pair sums an int16 product would saturate
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    w[:, 0] = -128
    zp = np.array([-3 if signed else 7], a.dtype)
    packed, colsum = pack_weight(w)
    y = np.zeros((m, n), np.int32)
    sizes = np.array([m, n, k, int(signed), 1, int(not workspace)], np.int64)
    rc = harness.harness_qdense(a.ctypes.data, packed.ctypes.data, colsum.ctypes.data,
                                zp.ctypes.data, y.ctypes.data,
                                sizes.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)))
    assert rc == 0
    want = (a.astype(np.int64) - int(zp[0])) @ w.astype(np.int64).T
    np.testing.assert_array_equal(y, want)
