"""int8 matrix product with a constant weight through the C kernel of
``ember/include/ember/kernels/qdense.h``.

:func:`pack_weight` lays a (N, K) int8 weight (already minus its zero point) out in the
kernel's blocks, once at build time; the column sums that carry the left operand's zero point
come with it. :func:`reference` is the numpy oracle.
"""
from __future__ import annotations

import numpy as np

from ...te import tensor as te
from ...tir import op as tir
from .sizes import dims, prod, succeeds

QDENSE_HEADER = "ember/kernels/qdense.h"
NW = 16  # columns per packed block (EMBER_QDENSE_NW)


def pack_weight(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, K) int8 -> ((ceil(N / 16), ceil(K / 4), 16, 4) int8, colsum (N,) int32)."""
    n, k = weight.shape
    nb, k4 = -(-n // NW), -(-k // 4)
    out = np.zeros((nb * NW, k4 * 4), np.int8)
    out[:n, :k] = weight
    packed = out.reshape(nb, NW, k4, 4).transpose(0, 2, 1, 3)
    colsum = weight.astype(np.int64).sum(axis=1).astype(np.int32)
    return np.ascontiguousarray(packed), colsum


def unpack_weight(packed: np.ndarray, n: int, k: int) -> np.ndarray:
    nb, k4 = packed.shape[:2]
    return packed.transpose(0, 2, 1, 3).reshape(nb * NW, k4 * 4)[:n, :k]


def reference(a: np.ndarray, packed: np.ndarray, colsum: np.ndarray, a_zp: np.ndarray,
              *, units: int) -> np.ndarray:
    """What ``ember_qdense`` computes: a @ w^T - a_zp * colsum in int32 (with the colsum of
    :func:`pack_weight`, (a - a_zp) @ w^T), a of any rank >= 1."""
    k = a.shape[-1]
    w = unpack_weight(packed, units, k).astype(np.int64)
    zp = np.asarray(a_zp).astype(np.int64).reshape(())
    acc = a.astype(np.int64) @ w.T - zp * colsum.astype(np.int64)
    return acc.astype(np.int32)


def qdense(a: te.Tensor, weight: te.Tensor, colsum: te.Tensor, a_zp: te.Tensor, *,
           units: int) -> te.Tensor:
    """The ``ember_qdense`` stage: a.shape[:-1] + (units,) int32."""
    sizes = dims(a.shape)
    m, k = prod(sizes[:-1]), sizes[-1]
    macs = m * k * units if isinstance(m, int) and isinstance(k, int) else 1 << 30
    parallel = int(macs >= 1 << 16)

    def body(ins, outs):
        call = tir.call_extern(
            "int32", "ember_qdense", ins[0].data, ins[1].data, ins[2].data, ins[3].data,
            outs[0].data, m, tir.const(units, "int64"), k, int(a.dtype == "int8"), parallel,
            header=QDENSE_HEADER)
        return succeeds(call, "nn.contrib_qdense: ember_qdense failed (parallel launch)")

    return te.extern((*a.shape[:-1], units), [a, weight, colsum, a_zp], body,
                     name="T_qdense", dtype="int32", tag="qdense_kernel")
