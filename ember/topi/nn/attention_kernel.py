"""Attention (scores, mask, softmax and the second product) through the C kernel
``ember_attention`` (``ember/include/ember/kernels/attention.h``): per (batch, block of query
rows) the block's scores stay in a per-task buffer in L2 between the two products.

Operands are given by the two GEMMs' views (``relay/op/nn/gemm.py``): the scores product's
A (Q) and B (K) parts and the second product's B (V) and C (the output) parts.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from . import gemm_kernel as gk
from .sizes import succeeds

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

    batch: int
    heads: int
    M: int
    N: int
    D: int
    DV: int
    q: tuple[int, int, int]  # bs, hs, row stride
    k: tuple[int, int, int, int]  # bs, hs, k stride, n stride (K read as a (D, N) matrix)
    v: tuple[int, int, int, int]  # bs, hs, k stride, n stride (V read as an (N, DV) matrix)
    o: tuple[int, int, int]  # bs, hs, row stride
    mask: tuple[int, int, int, int] = (0, 0, 0, 0)


def row_block(batch: int, M: int, N: int, parallel: bool, level=None) -> int:
    """Query rows per work item: M in equal blocks of whole register tiles (no short last
    block to unbalance the tasks), each block's two buffers within BUFFER_BYTES, and with
    ``parallel`` at least gemm_kernel.TARGET_ITEMS items in all where M allows."""
    mr = gk.register_rows(level)
    largest = max(mr, BUFFER_BYTES // (8 * max(N, 1)) // mr * mr)
    blocks = -(-M // largest)
    if parallel:
        blocks = max(blocks, min(-(-gk.TARGET_ITEMS // batch), -(-M // mr)))
    rows = -(-M // blocks)
    return -(-rows // mr) * mr


def attention(q: te.Tensor, k: te.Tensor, v: te.Tensor, bias: te.Tensor | None,
              mask: te.Tensor | None, ops: AttentionOperands, alpha: float,
              out_shape: tuple[int, ...], name: str = "T_attention",
              mask_select: bool = False) -> te.Tensor:
    """The extern stage: ``softmax(alpha * Q K + bias + mask) V`` into a new float32 tensor
    of ``out_shape`` (written through ``ops.o``)."""
    for t, what in ((q, "Q"), (k, "K"), (v, "V"), (bias, "bias"), (mask, "mask")):
        if t is not None and t.dtype != "float32":
            raise OpError(f"{name}: the C attention kernel is float32 only, {what} is {t.dtype}")
    macs = ops.batch * ops.M * ops.N * (ops.D + ops.DV)
    parallel = int(macs >= gk.PARALLEL_MACS)
    mb = row_block(ops.batch, ops.M, ops.N, bool(parallel))
    kc1 = gk.gemm_tiles(1, mb, ops.N, ops.D).kc
    kc2 = gk.gemm_tiles(1, mb, ops.DV, ops.N).kc
    bias_mode, _ = gk._mode(bias, ops.N, f"{name}: bias")
    inputs = [q, k, v] + [t for t in (bias, mask) if t is not None]

    def body(ins, outs):
        out = outs[0].data
        bias_p = ins[3].data if bias is not None else out
        mask_p = ins[-1].data if mask is not None else tir.const(0, "int32")  # NULL
        call = tir.call_extern(
            "int32", "ember_attention", ops.batch, ops.heads, ops.M, ops.N, ops.D, ops.DV,
            ins[0].data, *ops.q, ins[1].data, *ops.k, ins[2].data, *ops.v, out, *ops.o,
            gk._f32(alpha), bias_mode, bias_p, mask_p, *ops.mask, int(mask_select), mb, kc1, kc2,
            parallel,
            header=HEADER)
        return succeeds(call, f"{name}: ember_attention failed (out of workspace memory or "
                              "threads)")

    return te.extern(out_shape, inputs, body, name=name, dtype="float32", tag="attention_kernel")
