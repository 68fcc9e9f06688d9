"""dense, matmul and batch_matmul: packed, register-blocked GEMM with fused epilogues.

Compute (tags in brackets):
  pack   [gemm_pack]    Bp[(b,) no, k, ni] = B[(b,) no*bn + ni, k]     (zero past N)
  gemm   [gemm]         Cp[(b,) m, no, ni] = sum_k A[(b,) m, k] * Bp[(b,) no, k, ni]
  unpack [gemm_unpack]  C[(b,) m, n] = Cp[(b,) m, n // bn, n % bn] (+ bias[n])
Schedule: the output (the unpack stage, or the elementwise chain after it) is tiled bm x bn;
per tile (one parallel iteration) Cp is computed into a bm x bn local accumulator with the k
loop outside, rows unrolled and the bn lanes vectorised, then the tile is written out through
the fused epilogue. A single row (M == 1) reads the weight once instead: a k-split dot product
per output ([gemm_row]).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import IntImm, PrimExpr
from ..schedule import (
    FUSABLE,
    inline_injective,
    maybe_parallel,
    register_anchor,
    tile_rows,
    work_of,
)

BN, BM, VK = 16, 4, 16


def _static(name: str, d: PrimExpr) -> int:
    if not isinstance(d, IntImm):
        raise OpError(f"{name}: the packed template needs static shapes, got dimension {d}")
    return d.value


def choose_bm(m: int, bn: int = BN) -> int:
    """Rows per register tile (see ``schedule.tile_rows``)."""
    return tile_rows(m, bn)


def _gemm(name: str, batch: tuple, M: int, N: int, K: int, a_at: Callable, b_at: Callable,
          out_dtype: str, bias: te.Tensor | None) -> te.Tensor:
    nb = len(batch)
    bn = min(BN, N)
    no_ext = (N + bn - 1) // bn
    k = te.reduce_axis((0, K), "k")

    def pack(*i: PrimExpr) -> PrimExpr:
        b, no, kk, ni = i[:nb], i[nb], i[nb + 1], i[nb + 2]
        n = no * bn + ni
        v = b_at(b, n, kk)
        return v if N % bn == 0 else tir.if_then_else(n < N, v, tir.const(0, v.dtype))

    bp = te.compute(batch + (no_ext, K, bn), pack, name=f"{name}_pack", tag="gemm_pack")

    def gemm(*i: PrimExpr) -> PrimExpr:
        b, m, no, ni = i[:nb], i[nb], i[nb + 1], i[nb + 2]
        return te.sum(tir.cast(a_at(b, m, k), out_dtype) * tir.cast(bp(*b, no, k, ni), out_dtype),
                      axis=k)

    cp = te.compute(batch + (M, no_ext, bn), gemm, name=f"{name}_compute", tag="gemm",
                    attrs={"bm": choose_bm(M, bn), "bn": bn, "nbatch": nb})

    def unpack(*i: PrimExpr) -> PrimExpr:
        b, m, n = i[:nb], i[nb], i[nb + 1]
        v = cp(*b, m, n // bn, n % bn)
        return v + tir.cast(bias(n), out_dtype) if bias is not None else v

    return te.compute(batch + (M, N), unpack, name=name, tag="gemm_unpack")


def _gemm_row(name: str, N: int, K: int, a_at: Callable, b_at: Callable, out_dtype: str,
              bias: te.Tensor | None) -> te.Tensor:
    vk = min(VK, K)
    ko = te.reduce_axis((0, (K + vk - 1) // vk), "ko")

    def part(m: PrimExpr, n: PrimExpr, ki: PrimExpr) -> PrimExpr:
        kk = ko.var * vk + ki
        v = tir.cast(a_at((), m, kk), out_dtype) * tir.cast(b_at((), n, kk), out_dtype)
        return te.sum(v if K % vk == 0 else tir.if_then_else(kk < K, v, tir.const(0, out_dtype)),
                      axis=ko)

    p = te.compute((1, N, vk), part, name=f"{name}_partial", tag="gemm_row_partial")
    ki = te.reduce_axis((0, vk), "ki")
    out = te.compute((1, N), lambda m, n: te.sum(p[m, n, ki], axis=ki), name=f"{name}_row",
                     tag="gemm_row")
    if bias is None:
        return out
    return te.compute((1, N), lambda m, n: out[m, n] + tir.cast(bias(n), out_dtype), name=name,
                      tag="broadcast")


def _is_static(*shapes: tuple) -> bool:
    return all(isinstance(d, IntImm) for shape in shapes for d in shape)


def _gemm_generic(name: str, batch: tuple, M: PrimExpr, N: PrimExpr, K: PrimExpr,
                  a_at: Callable, b_at: Callable, out_dtype: str,
                  bias: te.Tensor | None) -> te.Tensor:
    """Symbolic shapes: a plain reduction (scheduled as one, parallel over the outputs)."""
    nb = len(batch)
    k = te.reduce_axis((0, K), "k")
    out = te.compute(batch + (M, N), lambda *i: te.sum(
        tir.cast(a_at(i[:nb], i[nb], k), out_dtype) * tir.cast(b_at(i[:nb], i[nb + 1], k),
                                                               out_dtype), axis=k),
        name=name, tag="gemm_generic")
    if bias is None:
        return out
    return te.compute(out.shape, lambda *i: out(*i) + tir.cast(bias(i[-1]), out_dtype),
                      name=f"{name}_bias", tag="broadcast")


def dense(data: te.Tensor, weight: te.Tensor, bias: te.Tensor | None = None,
          out_dtype: str | None = None) -> te.Tensor:
    """``data[M, K] x weight[N, K]^T (+ bias[N])`` -> [M, N] (any dimension may be symbolic)."""
    if data.ndim != 2 or weight.ndim != 2:
        raise OpError(f"nn.dense: data and weight must have rank 2, got ranks {data.ndim} and "
                      f"{weight.ndim}")
    if not _is_static(data.shape, weight.shape):
        return _gemm_generic("T_dense", (), data.shape[0], weight.shape[0], data.shape[1],
                             lambda b, m, k: data[m, k], lambda b, n, k: weight[n, k],
                             out_dtype or data.dtype, bias)
    M, K = (_static("nn.dense", d) for d in data.shape)
    N, K2 = (_static("nn.dense", d) for d in weight.shape)
    if K != K2:
        raise OpError(f"nn.dense: data has {K} columns but weight has {K2} (shapes "
                      f"{(M, K)} and {(N, K2)})")
    out_dtype = out_dtype or data.dtype
    a_at = lambda b, m, k: data[m, k]
    b_at = lambda b, n, k: weight[n, k]
    if M == 1:
        return _gemm_row("T_dense", N, K, a_at, b_at, out_dtype, bias)
    return _gemm("T_dense", (), M, N, K, a_at, b_at, out_dtype, bias)


def matmul(a: te.Tensor, b: te.Tensor, transpose_a: bool = False, transpose_b: bool = False,
           out_dtype: str | None = None) -> te.Tensor:
    """2-d matrix product with optional transposes: [M, K] x [K, N] -> [M, N]."""
    a_at = (lambda _, m, k: a[k, m]) if transpose_a else (lambda _, m, k: a[m, k])
    b_at = (lambda _, n, k: b[n, k]) if transpose_b else (lambda _, n, k: b[k, n])
    if not _is_static(a.shape, b.shape):
        sa = a.shape[::-1] if transpose_a else a.shape
        sb = b.shape[::-1] if transpose_b else b.shape
        return _gemm_generic("T_matmul", (), sa[0], sb[1], sa[1], a_at, b_at,
                             out_dtype or a.dtype, None)
    M, K = (_static("nn.matmul", d) for d in (a.shape[::-1] if transpose_a else a.shape))
    K2, N = (_static("nn.matmul", d) for d in (b.shape[::-1] if transpose_b else b.shape))
    if K != K2:
        raise OpError(f"nn.matmul: inner dimensions differ: {K} vs {K2}")
    out_dtype = out_dtype or a.dtype
    if M == 1:
        return _gemm_row("T_matmul", N, K, a_at, b_at, out_dtype, None)
    return _gemm("T_matmul", (), M, N, K, a_at, b_at, out_dtype, None)


def batch_matmul(x: te.Tensor, y: te.Tensor, out_dtype: str | None = None,
                 transpose_a: bool = False, transpose_b: bool = True) -> te.Tensor:
    """Batched product: x[B, M, K] x y[B, N, K] (transpose_b) -> [B, M, N]; batch 1 broadcasts."""
    if x.ndim != 3 or y.ndim != 3:
        raise OpError(f"nn.batch_matmul: inputs must have rank 3, got {x.ndim} and {y.ndim}")
    if not _is_static(x.shape, y.shape):
        one = lambda d: isinstance(d, IntImm) and d.value == 1
        xi = (lambda b: 0) if one(x.shape[0]) else (lambda b: b)
        yi = (lambda b: 0) if one(y.shape[0]) else (lambda b: b)
        sx = (x.shape[2], x.shape[1]) if transpose_a else (x.shape[1], x.shape[2])
        n = y.shape[1] if transpose_b else y.shape[2]
        return _gemm_generic(
            "T_batch_matmul", (y.shape[0] if one(x.shape[0]) else x.shape[0],), sx[0], n, sx[1],
            (lambda b, m, k: x[xi(b[0]), k, m]) if transpose_a else (
                lambda b, m, k: x[xi(b[0]), m, k]),
            (lambda b, n_, k: y[yi(b[0]), n_, k]) if transpose_b else (
                lambda b, n_, k: y[yi(b[0]), k, n_]), out_dtype or x.dtype, None)
    bx, by = _static("nn.batch_matmul", x.shape[0]), _static("nn.batch_matmul", y.shape[0])
    if bx != by and 1 not in (bx, by):
        raise OpError(f"nn.batch_matmul: batch sizes {bx} and {by} do not broadcast")
    M, K = (_static("nn.batch_matmul", d) for d in (
        x.shape[:0:-1] if transpose_a else x.shape[1:]))
    N, K2 = (_static("nn.batch_matmul", d) for d in (
        y.shape[1:] if transpose_b else y.shape[:0:-1]))
    if K != K2:
        raise OpError(f"nn.batch_matmul: inner dimensions differ: {K} vs {K2}")
    xb = (lambda b: 0) if bx == 1 else (lambda b: b)
    yb = (lambda b: 0) if by == 1 else (lambda b: b)
    a_at = (lambda b, m, k: x[xb(b[0]), k, m]) if transpose_a else (
        lambda b, m, k: x[xb(b[0]), m, k])
    b_at = (lambda b, n, k: y[yb(b[0]), n, k]) if transpose_b else (
        lambda b, n, k: y[yb(b[0]), k, n])
    return _gemm("T_batch_matmul", (max(bx, by),), M, N, K, a_at, b_at, out_dtype or x.dtype,
                 None)


# -- schedules ---------------------------------------------------------------------------------
def _consumer(s: Any, op: Any, tag: str) -> Any:
    for st in s.stages:
        if st.op.tag == tag and any(t.op is op for t in st.op.input_tensors):
            return st.op
    return None


def fusable(s: Any, anchor_out: Any, out_op: Any) -> bool:
    """True when ``out_op`` is ``anchor_out`` or an elementwise/broadcast chain over it with the
    same shape, so the anchor's output tiling applies to the output loops."""
    if out_op is None or out_op is anchor_out:
        return out_op is anchor_out
    same = [str(d) for d in out_op.output(0).shape] == [str(d) for d in anchor_out.output(0).shape]
    stack, seen = [out_op], set()
    while stack:
        op = stack.pop()
        if op is anchor_out or id(op) in seen or isinstance(op, te.PlaceholderOp):
            continue
        seen.add(id(op))
        if not isinstance(op, te.ComputeOp) or op.tag not in FUSABLE:
            return False
        stack.extend(t.op for t in op.input_tensors)
    return same


@register_anchor("gemm")
def schedule_gemm(s: Any, cp_op: Any, out_op: Any) -> None:
    """The packed GEMM template (see module docstring)."""
    unpack = _consumer(s, cp_op, "gemm_unpack")
    target = out_op if fusable(s, unpack, out_op) else unpack
    pack = next(t.op for t in cp_op.input_tensors if t.op.tag == "gemm_pack")
    inline_injective(s, keep=[pack, target])
    if target is not unpack and s[unpack].attach_type != "inline":
        s[unpack].compute_inline()
    nb, bm, bn = cp_op.attrs["nbatch"], cp_op.attrs["bm"], cp_op.attrs["bn"]
    ps = s[pack]
    maybe_parallel(ps, ps.fuse(*ps.op.axis[:nb + 1]) if nb else ps.op.axis[0], work_of(pack))
    ts = s[target]
    axes = list(ts.op.axis)
    mo, mi = ts.split(axes[nb], bm)
    no, ni = ts.split(axes[nb + 1], bn)
    ts.reorder(*axes[:nb], mo, no, mi, ni)
    fused = ts.fuse(*axes[:nb], mo, no)
    maybe_parallel(ts, fused, work_of(cp_op))
    ts.vectorize(ni)
    cs = s[cp_op]
    cs.compute_at(ts, fused)
    c_axes = list(cs.op.axis)
    (k,) = cs.op.reduce_axis
    cs.reorder(*c_axes[:nb], c_axes[nb + 1], k, c_axes[nb], c_axes[nb + 2])
    cs.unroll(c_axes[nb])
    cs.vectorize(c_axes[nb + 2])


@register_anchor("gemm_row")
def schedule_gemm_row(s: Any, row_op: Any, out_op: Any) -> None:
    """One row: parallel over outputs, each a vectorised k-split dot product."""
    target = out_op if fusable(s, row_op, out_op) else row_op
    part = next(t.op for t in row_op.input_tensors if t.op.tag == "gemm_row_partial")
    inline_injective(s, keep=[target])
    ts = s[target]
    fused = ts.fuse(*ts.op.axis)
    maybe_parallel(ts, fused, work_of(part))
    attach = fused
    if target is not row_op:
        s[row_op].compute_at(ts, fused)
        attach = row_op.axis[1]
    ps = s[part]
    ps.compute_at(s[row_op], attach)
    pm, pn, pki = ps.op.axis
    (ko,) = ps.op.reduce_axis
    ps.reorder(pm, pn, ko, pki)
    ps.vectorize(pki)
