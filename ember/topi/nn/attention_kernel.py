"""Attention (scores, mask, softmax and the second product) through the C kernel
``ember_attention`` (``ember/include/ember/kernels/attention.h``): per (batch, block of query
rows) the block's scores stay in a per-task buffer in L2 between the two products.

Operands are given by the two GEMMs' views (``relay/op/nn/gemm.py``): the scores product's
A (Q) and B (K) parts and the second product's B (V) and C (the output) parts.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from . import gemm_kernel as gk
from ...target.simd import simd_level
from ...tir.expr import PrimExpr
from .sizes import Check, Dim, ceildiv, checked, folded, i64, is_static, succeeds

HEADER = "ember/kernels/attention.h"
# Both buffers of a row block (scores and probabilities, mb x seq_k floats each) together
# stay within this: a quarter of a 1 MiB L2, leaving room for the K panel and V streaming
BUFFER_BYTES = 256 * 1024


@dataclass(frozen=True)
class AttentionOperands:
    """Sizes and strides (elements) of one fused attention: ``batch`` = outer x ``heads``
    products of M query rows against N keys, head dim D, value dim DV; each operand's batch
    b at (b // heads) * bs + (b % heads) * hs. The mask (``m_*``) is read at
    m_bs, m_hs, m_rs, m_cs (0 where it broadcasts)."""

    batch: Dim
    heads: Dim
    M: Dim
    N: Dim
    D: Dim
    DV: Dim
    q: tuple[Dim, Dim, Dim]  # bs, hs, row stride
    k: tuple[Dim, Dim, Dim, Dim]  # bs, hs, k stride, n stride (K read as a (D, N) matrix)
    v: tuple[Dim, Dim, Dim, Dim]  # bs, hs, k stride, n stride (V read as an (N, DV) matrix)
    o: tuple[Dim, Dim, Dim]  # bs, hs, row stride
    mask: tuple[Dim, Dim, Dim, Dim] = (0, 0, 0, 0)


def row_block(batch: int, M: int, N: int, parallel: bool, level=None) -> int:
    """Query rows per work item (:func:`row_block_expr` folded)."""
    return folded(row_block_expr(*(tir.const(int(d)) for d in (batch, M, N, parallel)), level),
                  "attention row block")


def row_block_expr(batch: Dim, M: Dim, N: Dim, parallel: PrimExpr, level=None) -> PrimExpr:
    """Query rows per work item: M in equal blocks of whole register tiles (no short last
    block to unbalance the tasks), each block's two buffers within BUFFER_BYTES, and with
    ``parallel`` at least gemm_kernel.TARGET_ITEMS items in all where M allows; an expression
    of run-time sizes (evaluated at each call), an int's IntImm for static ones."""
    mr = gk.register_rows(level)
    largest = tir.max(mr, tir.floordiv(tir.floordiv(BUFFER_BYTES // 8, tir.max(N, 1)), mr) * mr)
    blocks = tir.max(ceildiv(M, largest), 1)
    wanted = tir.min(ceildiv(gk.TARGET_ITEMS, tir.max(batch, 1)), ceildiv(M, mr))
    blocks = tir.Select_(tir.convert(parallel).equal(1), tir.max(blocks, wanted), blocks)
    return ceildiv(ceildiv(M, tir.max(blocks, 1)), mr) * mr


def _tiles(ops: AttentionOperands) -> tuple[Dim, Dim, Dim, Dim]:
    """(mb, kc1, kc2, parallel): ints for static sizes, else expressions of the run-time ones
    (the same blocking a static build of that shape gets)."""
    if is_static(ops.batch, ops.M, ops.N, ops.D, ops.DV):
        macs = ops.batch * ops.M * ops.N * (ops.D + ops.DV)
        parallel = int(macs >= gk.PARALLEL_MACS)
        mb = row_block(ops.batch, ops.M, ops.N, bool(parallel))
        return (mb, gk.gemm_tiles(1, mb, ops.N, ops.D).kc,
                gk.gemm_tiles(1, mb, ops.DV, ops.N).kc, parallel)
    level = simd_level(gk.current_target())
    macs = i64(ops.batch) * i64(ops.M) * i64(ops.N) * (i64(ops.D) + i64(ops.DV))
    parallel = tir.cast(macs >= tir.const(gk.PARALLEL_MACS, "int64"), "int32")
    mb = row_block_expr(ops.batch, ops.M, ops.N, parallel, level)
    one = tir.const(1)
    kc1 = gk.tile_exprs(one, mb, tir.convert(ops.N), tir.convert(ops.D), level)[1]
    kc2 = gk.tile_exprs(one, mb, tir.convert(ops.DV), tir.convert(ops.N), level)[1]
    return mb, kc1, kc2, parallel


def attention(q: te.Tensor, k: te.Tensor, v: te.Tensor, bias: te.Tensor | None,
              mask: te.Tensor | None, ops: AttentionOperands, alpha: float,
              out_shape: tuple[Dim, ...], name: str = "T_attention",
              mask_select: bool = False, checks: Sequence[Check] = ()) -> te.Tensor:
    """The extern stage: ``softmax(alpha * Q K + bias + mask) V`` into a new float32 tensor
    of ``out_shape`` (written through ``ops.o``). Sizes may be run-time ones (the blocking
    then computed at each call); ``checks`` are made first."""
    for t, what in ((q, "Q"), (k, "K"), (v, "V"), (bias, "bias"), (mask, "mask")):
        if t is not None and t.dtype != "float32":
            raise OpError(f"{name}: the C attention kernel is float32 only, {what} is {t.dtype}")
    mb, kc1, kc2, parallel = _tiles(ops)
    bias_mode, bias_checks = gk.operand_mode(bias, ops.N, f"{name}: bias")
    inputs = [q, k, v] + [t for t in (bias, mask) if t is not None]

    def body(ins, outs):
        out = outs[0].data
        bias_p = ins[3].data if bias is not None else out
        mask_p = ins[-1].data if mask is not None else tir.const(0, "int32")  # NULL
        call = tir.call_extern(
            "int32", "ember_attention", ops.batch, ops.heads, ops.M, ops.N, ops.D, ops.DV,
            ins[0].data, *ops.q, ins[1].data, *ops.k, ins[2].data, *ops.v, out, *ops.o,
            gk.f32_imm(alpha), bias_mode, bias_p, mask_p, *ops.mask, int(mask_select), mb, kc1, kc2,
            parallel,
            header=HEADER)
        return checked(succeeds(call, f"{name}: ember_attention failed (out of workspace "
                                      "memory or threads)"), [*checks, *bias_checks])

    return te.extern(out_shape, inputs, body, name=name, dtype="float32", tag="attention_kernel")
