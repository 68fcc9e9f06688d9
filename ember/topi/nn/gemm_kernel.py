"""dense / matmul / batch_matmul through the C micro-kernel ``ember_sgemm``
(``ember/include/ember/kernels/gemm.h``), with the epilogue applied in the kernel.

The stage is a ``te.extern`` whose body is one ``tir.call_extern``; the kernel reads the
operands in place (batch dims of a dense input are flattened into rows: row-major data is
contiguous), so nothing is copied per call. A constant weight is packed at build time into
the kernel's panel layout (:func:`pack_weight`, the ``nn.contrib_gemm_pack`` op folded by
FoldConstant); any other B is read strided and its panels copied once per call inside the
kernel. Tile sizes come from :func:`gemm_tiles`: a tuning record measured on this machine
(``ember tune``) or a cost model of the register file and the caches; the register tile (6 rows
x 2 vectors) is fixed by the ISA.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...runtime.errors import OpError
from ...target.simd import SimdLevel, simd_level
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import EQ, IntImm, StringImm
from ...tir.stmt import AssertStmt, Evaluate
from .. import tile_records

HEADER = "ember/kernels/gemm.h"
MR = 6  # rows of the register tile (EMBER_GEMM_MR)
L1_BYTES = 32 * 1024
L2_BYTES = 512 * 1024
PARALLEL_MACS = 1 << 20  # below this a parallel launch costs more than it saves
TARGET_ITEMS = 8  # work items wanted for a parallel kernel: enough to balance 2-4 threads

# Activation codes of gemm_epilogue.h (EMBER_ACT_*).
ACTIVATIONS = {"none": 0, "relu": 1, "clip": 2, "gelu_erf": 3, "gelu_tanh": 4, "sigmoid": 5,
               "hardswish": 6, "tanh": 7, "leaky_relu": 8}
_FLOAT_MAX = 3.4028234e38


@dataclass(frozen=True)
class GemmTiles:
    """Blocking of one GEMM: ``nr`` columns per panel (two vectors), ``kc`` k per block,
    ``mc`` rows per work item, and whether to launch threads."""

    nr: int
    kc: int
    mc: int
    parallel: bool


def panel_width(level: SimdLevel | None = None) -> int:
    """Columns of the register tile, EMBER_GEMM_NR = 2 vectors: 32 (AVX-512), 16 (AVX2),
    8 (SSE, NEON and the portable build, which use 4-lane vectors)."""
    level = level or simd_level(_current_target())
    return 2 * max(4, level.lanes("float32"))


def gemm_tiles(batch: int, M: int, N: int, K: int, level: SimdLevel | None = None) -> GemmTiles:
    """The blocking of one ``ember_sgemm`` call: the tuning record's for exactly this call
    when there is one (``topi/tile_records.py``), else :func:`model_gemm_tiles`'s."""
    level = level or simd_level(_current_target())
    model = model_gemm_tiles(batch, M, N, K, level)
    return tile_records.lookup("sgemm", (batch, M, N, K), level, model,
                               lambda tiles: check_gemm_tiles(tiles, level))


def check_gemm_tiles(tiles: GemmTiles, level: SimdLevel) -> str | None:
    """Why ``ember_sgemm`` cannot use ``tiles`` at ``level`` (None if it can)."""
    if tiles.nr != panel_width(level):
        return f"nr must be {panel_width(level)} (two {level.name} vectors), got {tiles.nr}"
    if tiles.mc < MR or tiles.mc % MR:
        return f"mc must be a positive multiple of {MR}, got {tiles.mc}"
    return None if tiles.kc >= 1 else f"kc must be positive, got {tiles.kc}"


def model_gemm_tiles(batch: int, M: int, N: int, K: int,
                     level: SimdLevel | None = None) -> GemmTiles:
    """The cost model of ``ember_sgemm``'s blocking.

    - ``nr``: the register tile is MR=6 rows x 2 vectors: 12 accumulators, 2 B vectors and one
      broadcast use 15 of the 16 AVX2/SSE registers (AVX-512 has room, but wider panels would
      pad small N more).
    - ``kc``: a kc x nr block of the B panel is reused by every row tile, so it should take at
      most half of L1 (the other half streams A): kc = L1 / 2 / (4 nr); K itself when K is at
      most 1.25 kc (a short last block costs more than the slight overflow), and when M fits
      one row tile (nothing reuses the block; a matrix-vector product then streams B once
      through the row kernel's four FMA chains instead of re-entering partial sums).
    - ``mc``: rows per work item; the item's A block (mc x kc) should sit in a quarter of L2,
      and a parallel kernel wants about TARGET_ITEMS items in total to balance the threads.
    - ``parallel``: only from PARALLEL_MACS multiply-adds on (about 25 us of work at
      40 GFLOP/s; a launch and join costs a few us).
    """
    nr = panel_width(level)
    kc = max(nr, L1_BYTES // 2 // (4 * nr))
    if K <= kc + kc // 4 or M <= MR:
        kc = max(K, 1)
    mc = max(MR, (L2_BYTES // 4 // (4 * kc)) // MR * MR)
    parallel = batch * M * N * K >= PARALLEL_MACS
    if parallel:
        items_per_row_block = batch * math.ceil(N / nr)
        want_blocks = math.ceil(TARGET_ITEMS / items_per_row_block)
        mc = min(mc, max(MR, math.ceil(math.ceil(M / want_blocks) / MR) * MR))
    return GemmTiles(nr, kc, min(mc, max(MR, math.ceil(M / MR) * MR)), parallel)


def _current_target():
    from ...target import Target

    return Target.current()


# ----------------------------------------------------------------------- weight packing
def packed_shape(n: int, k: int, nr: int) -> tuple[int, int, int]:
    """Shape of a (N, K) weight packed into panels of ``nr`` columns."""
    return (-(-n // nr), k, nr)


def pack_weight_np(w: np.ndarray, nr: int, transpose: bool = True) -> np.ndarray:
    """numpy: ``w`` (N, K) (``transpose``, dense's layout) or (K, N) -> (ceil(N/nr), K, nr),
    ``out[p, k, j] = B[k, p * nr + j]`` (zero past N)."""
    b = w.T if transpose else w  # (K, N)
    k, n = b.shape
    pad = -n % nr
    b = np.pad(b, ((0, 0), (0, pad)))
    return np.ascontiguousarray(b.reshape(k, -1, nr).transpose(1, 0, 2))


def pack_weight(w: te.Tensor, nr: int, transpose: bool = True) -> te.Tensor:
    """The te form of :func:`pack_weight_np` (a per-call kernel when the weight is not a
    constant; FoldConstant uses the numpy form)."""
    n, k = (w.shape[0], w.shape[1]) if transpose else (w.shape[1], w.shape[0])
    n_, k_ = _ints("nn.contrib_gemm_pack", n, k)

    def at(p, kk, j):
        col = p * nr + j
        v = w[col, kk] if transpose else w[kk, col]
        if n_ % nr == 0:
            return v
        return tir.if_then_else(col < n_, v, tir.const(0, w.dtype))

    return te.compute(packed_shape(n_, k_, nr), at, name="T_gemm_pack", tag="injective")


def _ints(where: str, *dims) -> list[int]:
    out = []
    for d in dims:
        if not isinstance(d, (int, IntImm)):
            raise OpError(f"{where}: the C GEMM kernel needs static shapes, got dimension {d}")
        out.append(int(d.value) if isinstance(d, IntImm) else int(d))
    return out


# ----------------------------------------------------------------------- the extern stage
@dataclass(frozen=True)
class Epilogue:
    """``act2(act1(alpha * acc + bias) + residual)``; activations by name (ACTIVATIONS) with
    two parameters each (clip: bounds; gelu: output scale and inner scale; leaky: slope)."""

    alpha: float = 1.0
    act1: str = "none"
    p1: tuple[float, float] = (0.0, 0.0)
    act2: str = "none"
    p2: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        for act in (self.act1, self.act2):
            if act not in ACTIVATIONS:
                raise OpError(f"gemm epilogue: unknown activation {act!r}; known: "
                              f"{', '.join(ACTIVATIONS)}")


@dataclass(frozen=True)
class GemmOperands:
    """Shapes and strides of one batched product C[b] = A[b] @ B[b] (elements); the output's
    batch and row strides default to a dense (batch, M, N) layout."""

    batch: int
    M: int
    N: int
    K: int
    a_bs: int
    lda: int
    b_bs: int
    b_ks: int
    b_ns: int
    b_nr: int = 0
    c_bs: int | None = None
    ldc: int | None = None


def _f32(x: float) -> tir.PrimExpr:
    return tir.const(float(min(max(x, -_FLOAT_MAX), _FLOAT_MAX)), "float32")


def _mode(t: te.Tensor | None, full: int, what: str) -> int:
    if t is None:
        return 0
    size = math.prod(_ints(what, *t.shape))
    if size == 1:
        return 1
    if size != full:
        raise OpError(f"{what}: expected 1 or {full} values, got shape "
                      f"{tuple(_ints(what, *t.shape))}")
    return 2


def sgemm(a: te.Tensor, b: te.Tensor, ops: GemmOperands, out_shape: tuple[int, ...],
          epilogue: Epilogue = Epilogue(), bias: te.Tensor | None = None,
          residual: te.Tensor | None = None, name: str = "T_gemm",
          level: SimdLevel | None = None) -> te.Tensor:
    """The extern stage computing ``epilogue(A @ B)`` into a new float32 tensor of
    ``out_shape`` (batch, M, N in row-major order). ``bias`` has 1 or N values, ``residual``
    1 value or the output's shape."""
    for t, what in ((a, "A"), (b, "B"), (bias, "bias"), (residual, "residual")):
        if t is not None and t.dtype != "float32":
            raise OpError(f"{name}: the C GEMM kernel is float32 only, {what} is {t.dtype}")
    tiles = gemm_tiles(ops.batch, ops.M, ops.N, ops.K, level)
    bias_mode = _mode(bias, ops.N, f"{name} bias")
    res_mode = _mode(residual, ops.batch * ops.M * ops.N, f"{name} residual")
    inputs = [a, b] + [t for t in (bias, residual) if t is not None]
    e = epilogue

    def body(ins, outs):
        out = outs[0].data
        bias_p = ins[2].data if bias is not None else out
        res_p = ins[-1].data if residual is not None else out
        call = tir.call_extern(
            "int32", "ember_sgemm", ops.batch, ops.M, ops.N, ops.K,
            ins[0].data, ops.a_bs, ops.lda,
            ins[1].data, ops.b_bs, ops.b_ks, ops.b_ns, ops.b_nr,
            out, ops.M * ops.N if ops.c_bs is None else ops.c_bs,
            ops.N if ops.ldc is None else ops.ldc,
            _f32(e.alpha), bias_mode, bias_p, res_mode, res_p,
            ACTIVATIONS[e.act1], _f32(e.p1[0]), _f32(e.p1[1]),
            ACTIVATIONS[e.act2], _f32(e.p2[0]), _f32(e.p2[1]),
            tiles.mc, tiles.kc, int(tiles.parallel), header=HEADER)
        msg = StringImm(f"{name}: ember_sgemm failed (out of workspace memory or threads)")
        return AssertStmt(EQ(call, tir.const(0)), msg, Evaluate(tir.const(0)))

    return te.extern(out_shape, inputs, body, name=name, dtype="float32", tag="gemm_kernel")


# ----------------------------------------------------------------------- the ops
def eligible(*tensors: te.Tensor | None) -> bool:
    """True when the C kernel can compute with these operands: float32 and static shapes."""
    return all(t is None or (t.dtype == "float32" and all(isinstance(d, IntImm) for d in t.shape))
               for t in tensors)


def dense_operands(data: te.Tensor, weight: te.Tensor, packed_n: int = 0) -> GemmOperands:
    """data (..., K) x weight (N, K)^T, or x a packed weight (P, K, nr) of ``packed_n``
    columns; the leading dims of data are rows (row-major, so contiguous)."""
    dims = _ints("nn.dense", *data.shape)
    K = dims[-1]
    M = math.prod(dims[:-1])
    if packed_n:
        _, k2, nr = _ints("nn.dense", *weight.shape)
        return GemmOperands(1, M, packed_n, K, 0, K, 0, nr, 1, nr) if k2 == K else _k_error(
            "nn.dense", K, k2)
    N, k2 = _ints("nn.dense", *weight.shape)
    if k2 != K:
        _k_error("nn.dense", K, k2)
    return GemmOperands(1, M, N, K, 0, K, 0, 1, K)


def matmul_operands(a: te.Tensor, b: te.Tensor, transpose_b: bool) -> GemmOperands:
    """a (..., K) x b (K, N), or b (N, K) with ``transpose_b``."""
    if transpose_b:
        return dense_operands(a, b)
    dims = _ints("nn.matmul", *a.shape)
    K, N = _ints("nn.matmul", *b.shape)
    if dims[-1] != K:
        _k_error("nn.matmul", dims[-1], K)
    return GemmOperands(1, math.prod(dims[:-1]), N, K, 0, K, 0, N, 1)


def batch_matmul_operands(x: te.Tensor, y: te.Tensor, transpose_b: bool) -> GemmOperands:
    """x (Bx, M, K) x y (By, N, K) (``transpose_b``) or y (By, K, N); a batch of 1
    broadcasts (batch stride 0)."""
    bx, M, K = _ints("nn.batch_matmul", *x.shape)
    by, d1, d2 = _ints("nn.batch_matmul", *y.shape)
    N, k2 = (d1, d2) if transpose_b else (d2, d1)
    if k2 != K:
        _k_error("nn.batch_matmul", K, k2)
    if bx != by and 1 not in (bx, by):
        raise OpError(f"nn.batch_matmul: batch sizes {bx} and {by} do not broadcast")
    b_ks, b_ns = (1, K) if transpose_b else (N, 1)
    return GemmOperands(max(bx, by), M, N, K, 0 if bx == 1 else M * K, K,
                        0 if by == 1 else N * K, b_ks, b_ns)


def _k_error(op: str, k_a: int, k_b: int) -> GemmOperands:
    raise OpError(f"{op}: the operands disagree on the reduction length: {k_a} vs {k_b}")
