"""dense / matmul / batch_matmul through the C micro-kernel ``ember_sgemm``
(``ember/include/ember/kernels/gemm.h``), with the epilogue applied in the kernel.

The stage is a ``te.extern`` whose body is one ``tir.call_extern``; the kernel reads the
operands in place (batch dims of a dense input are flattened into rows: row-major data is
contiguous), so nothing is copied per call. A constant weight is packed at build time into
the kernel's panel layout (:func:`pack_weight`, the ``nn.contrib_gemm_pack`` op folded by
FoldConstant); any other B is read strided and its panels copied once per call inside the
kernel. Tile sizes come from :func:`gemm_tiles`: a tuning record measured on this machine
(``ember tune``) or a cost model of the register file and the caches; the register tile (12 rows
x 2 vectors on AVX-512, 6 rows x 2 vectors elsewhere) is fixed by the ISA.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...runtime.errors import OpError
from ...target.simd import SimdLevel, simd_level
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import EQ, PrimExpr, StringImm
from ...tir.stmt import AssertStmt, Evaluate
from .. import tile_records
from .sizes import Check, Dim, ceildiv, checked, dims, folded, i64, must_equal, prod

HEADER = "ember/kernels/gemm.h"
L2_BYTES = 512 * 1024
# AVX-512 cores have at least 1 MiB of L2 (Intel since Skylake-SP: 1-2 MiB; AMD Zen 4: 1 MiB)
L2_BYTES_AVX512 = 1024 * 1024
# A k block of one B panel: up to 96 KiB (kc 1536 for AVX2's 16-column panels). It need not
# fit L1: the panel is read in order, which the hardware prefetcher streams from L2, while
# each further k block stores and reloads every C tile (on a 2-core EPYC, GPT-2's MLP
# down-projection 128x1536x384: kc 768 -> 1536 is 89 -> 91 GFLOP/s in the kernel alone).
KC_PANEL_BYTES = L2_BYTES * 3 // 16
PARALLEL_MACS = 1 << 20  # below this a parallel launch costs more than it saves
# ... unless B is this large (1 MiB of floats): a product of few rows streams B from L3 or
# memory once, at a core's bandwidth, not at its FMA rate (resnet18's 512x1000 classifier:
# 0.5M multiply-adds but 130 us on one thread), and two cores stream it faster than one
PARALLEL_B_FLOATS = 1 << 18
TARGET_ITEMS = 8  # work items wanted for a parallel kernel: enough to balance 2-4 threads

# Activation codes of gemm_epilogue.h (EMBER_ACT_*).
ACTIVATIONS = {"none": 0, "relu": 1, "clip": 2, "gelu_erf": 3, "gelu_tanh": 4, "sigmoid": 5,
               "hardswish": 6, "tanh": 7, "leaky_relu": 8, "silu": 9, "hardsigmoid": 10,
               "mish": 11}
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
    level = level or simd_level(current_target())
    return 2 * max(4, level.lanes("float32"))


def register_rows(level: SimdLevel | None = None) -> int:
    """Rows of the register tile, EMBER_GEMM_MR: 12 on AVX-512, whose 32 vector registers hold
    12 x 2 accumulators besides 2 B vectors and a broadcast (each B vector loaded then feeds 12
    FMAs, not 6: on a Sapphire Rapids core GPT-2's 128x384x384 product goes from 141 to 169
    GFLOP/s); else 6 (12 accumulators of 16 registers)."""
    level = level or simd_level(current_target())
    return 12 if level.lanes("float32") == 16 else 6


def gemm_tiles(batch: int, M: int, N: int, K: int, level: SimdLevel | None = None) -> GemmTiles:
    """The blocking of one ``ember_sgemm`` call: the tuning record's for exactly this call
    when there is one (``topi/tile_records.py``), else :func:`model_gemm_tiles`'s."""
    level = level or simd_level(current_target())
    model = model_gemm_tiles(batch, M, N, K, level)
    return tile_records.lookup("sgemm", (batch, M, N, K), level, model,
                               lambda tiles: check_gemm_tiles(tiles, level))


def check_gemm_tiles(tiles: GemmTiles, level: SimdLevel) -> str | None:
    """Why ``ember_sgemm`` cannot use ``tiles`` at ``level`` (None if it can)."""
    if tiles.nr != panel_width(level):
        return f"nr must be {panel_width(level)} (two {level.name} vectors), got {tiles.nr}"
    mr = register_rows(level)
    if tiles.mc < mr or tiles.mc % mr:
        return f"mc must be a positive multiple of {mr}, got {tiles.mc}"
    return None if tiles.kc >= 1 else f"kc must be positive, got {tiles.kc}"


def model_gemm_tiles(batch: int, M: int, N: int, K: int,
                     level: SimdLevel | None = None) -> GemmTiles:
    """The cost model of ``ember_sgemm``'s blocking (ints in, ints out; the formulas are
    :func:`tile_exprs`'s, folded).

    - ``nr``: the register tile is MR rows x 2 vectors (:func:`register_rows`): 6 rows on
      AVX2/SSE (12 accumulators, 2 B vectors and one broadcast use 15 of the 16 registers), 12
      on AVX-512 (27 of 32; more rows rather than wider panels, which would pad small N more).
    - ``kc``: a kc x nr block of the B panel is reused by every row tile; it may exceed L1
      (up to KC_PANEL_BYTES: kc 1536 for AVX2), since the hardware prefetcher streams the
      panel from L2 in order, while each further k block costs a store and reload of every
      C tile (on a 2-core EPYC, kc 768 instead of 256 is 5-10% faster for K of 384 to 1536,
      e.g. GPT-2's 128x384x16384 LM head 22.0 -> 20.2 ms, and kc 1536 instead of 768 about
      2% for its 128x1536x384 MLP down-projection); K itself when K is at most 1.25 kc_max
      (a short last block costs more than the slight overflow), else K in equal blocks of at
      most kc_max, and K itself when M fits one row tile (nothing reuses the block; products
      of a few rows ignore kc anyway: gemm_few_rows.h streams B once, several panels side
      by side, at the rate memory delivers it).
    - ``mc``: rows per work item, a multiple of MR; the item's A block (mc x kc) should sit in
      a quarter of L2 (512 KiB, or 1 MiB on AVX-512 machines), and a parallel kernel wants about TARGET_ITEMS items in total to balance the threads.
    - ``parallel``: only from PARALLEL_MACS multiply-adds on (about 25 us of work at
      40 GFLOP/s; a launch and join costs a few us), or from PARALLEL_B_FLOATS of B on (a
      matrix-vector product runs at memory bandwidth).
    """
    level = level or simd_level(current_target())
    mc, kc, parallel = tile_exprs(*(tir.const(int(d)) for d in (batch, M, N, K)), level)
    what = "gemm tile model"
    return GemmTiles(panel_width(level), folded(kc, what), folded(mc, what),
                     bool(folded(parallel, what)))


def tile_exprs(batch: PrimExpr, M: PrimExpr, N: PrimExpr, K: PrimExpr,
               level: SimdLevel) -> tuple[PrimExpr, PrimExpr, PrimExpr]:
    """``(mc, kc, parallel)`` of :func:`model_gemm_tiles` as expressions of the sizes: the
    kernel of a product with run-time extents computes its blocking from them at each call,
    the same blocking a static build of that shape gets. Constant sizes fold to constants."""
    nr, mr = panel_width(level), register_rows(level)
    l2_bytes = L2_BYTES_AVX512 if mr == 12 else L2_BYTES
    kc_max = max(nr, KC_PANEL_BYTES // (4 * nr))
    # K in equal blocks of at most kc_max (no short last block)
    kc_split = ceildiv(K, ceildiv(K, kc_max))
    kc = tir.Select_(tir.any(K <= kc_max + kc_max // 4, M <= mr), tir.max(K, 1), kc_split)
    # mc from L2: (L2 / 4 / (4 kc)) // mr * mr, at least mr
    mc = tir.max(mr, tir.floordiv(tir.floordiv(l2_bytes // 16, kc), mr) * mr)
    macs = i64(batch) * i64(M) * i64(N) * i64(K)
    parallel = tir.any(macs >= tir.const(PARALLEL_MACS, "int64"),
                       i64(batch) * i64(N) * i64(K) >= tir.const(PARALLEL_B_FLOATS, "int64"))
    items_per_row_block = batch * ceildiv(N, nr)
    want_blocks = ceildiv(TARGET_ITEMS, tir.max(items_per_row_block, 1))
    balanced = tir.max(mr, ceildiv(ceildiv(M, want_blocks), mr) * mr)
    mc = tir.Select_(parallel, tir.min(mc, balanced), mc)
    mc = tir.min(mc, tir.max(mr, ceildiv(M, mr) * mr))
    return mc, kc, tir.cast(parallel, "int32")


def current_target():
    """The target in scope (imported on call, as before: keeps topi's import light)."""
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
    n_, k_ = dims((n, k))
    if not isinstance(n_, int):
        raise OpError(f"nn.contrib_gemm_pack: the C GEMM kernel packs a weight of static N, got "
                      f"dimension {n}")

    def at(p, kk, j):
        col = p * nr + j
        v = w[col, kk] if transpose else w[kk, col]
        if n_ % nr == 0:
            return v
        return tir.if_then_else(col < n_, v, tir.const(0, w.dtype))

    return te.compute(packed_shape(n_, k_, nr), at, name="T_gemm_pack", tag="injective")


# ----------------------------------------------------------------------- the extern stage
@dataclass(frozen=True)
class Epilogue:
    """``act2(act1(alpha * acc + bias) + residual)``; activations by name (ACTIVATIONS) with
    two parameters each (clip: bounds; gelu: output scale and inner scale; leaky: slope;
    hardsigmoid: slope and offset)."""

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
    batch and row strides default to a dense (batch, M, N) layout. Any field may be an
    expression of run-time sizes (``?`` dimensions): the kernel takes them as arguments.
    ``require`` lists conditions on those sizes (with the message) that the kernel checks
    before it reads anything."""

    batch: Dim
    M: Dim
    N: Dim
    K: Dim
    a_bs: Dim
    lda: Dim
    b_bs: Dim
    b_ks: Dim
    b_ns: Dim
    b_nr: int = 0
    c_bs: Dim | None = None
    ldc: Dim | None = None
    require: tuple[Check, ...] = ()
    # batch b is (b // heads, b % heads): each operand at outer * bs + head * hs (attention's
    # heads inside a batch > 1 of (batch, seq, heads * dim) rows); heads 1: b * bs
    heads: int = 1
    a_hs: int = 0
    b_hs: int = 0
    c_hs: int = 0


def f32_imm(x: float) -> tir.PrimExpr:
    """``x`` as a float32 argument of a kernel call, clamped to float32's finite range."""
    return tir.const(float(min(max(x, -_FLOAT_MAX), _FLOAT_MAX)), "float32")


def operand_mode(t: te.Tensor | None, full: Dim, what: str) -> tuple[Dim, list[Check]]:
    """How the epilogue reads ``t``: 0 absent, 1 one value, 2 ``full`` values; with run-time
    sizes, an expression and the condition the kernel checks."""
    if t is None:
        return 0, []
    size = prod(dims(t.shape))
    if isinstance(size, int) and isinstance(full, int):
        if size != 1 and size != full:
            raise OpError(f"{what}: expected 1 or {full} values, got shape "
                          f"{tuple(dims(t.shape))}")
        return (1 if size == 1 else 2), []
    if isinstance(size, int) and size == 1:
        return 1, []
    ok = tir.any(tir.convert(size).equal(1), tir.convert(size).equal(full))
    return tir.Select_(tir.convert(size).equal(1), 1, 2), [(ok, f"{what}: expected 1 value or "
                                                            "one per output element")]


def _residual_mode(residual: te.Tensor | None, out_shape: tuple[Dim, ...], ops: GemmOperands,
                   name: str) -> tuple[Dim, list[Check]]:
    """A residual of the output's shape (2; with run-time sizes, each checked against the
    output's) or of one value (1)."""
    size = None if residual is None else prod(dims(residual.shape))
    if residual is None or residual.ndim != len(out_shape) or (isinstance(size, int) and
                                                                size == 1):
        return operand_mode(residual, prod([ops.batch, ops.M, ops.N]), f"{name} residual")
    checks = []
    for k, (got, want) in enumerate(zip(dims(residual.shape), dims(out_shape))):
        checks += must_equal(
            got, want, f"{name} residual: dimension {k} differs from the output's (a residual "
            "of the output's shape is read in place; it does not broadcast)",
            f"{name} residual: expected the output's shape {tuple(dims(out_shape))}, got "
            f"{tuple(dims(residual.shape))}")
    return 2, checks


def sgemm(a: te.Tensor, b: te.Tensor, ops: GemmOperands, out_shape: tuple[Dim, ...],
          epilogue: Epilogue = Epilogue(), bias: te.Tensor | None = None,
          residual: te.Tensor | None = None, name: str = "T_gemm",
          level: SimdLevel | None = None) -> te.Tensor:
    """The extern stage computing ``epilogue(A @ B)`` into a new float32 tensor of
    ``out_shape`` (batch, M, N in row-major order). ``bias`` has 1 or N values, ``residual``
    1 value or the output's shape. Sizes may be run-time ones: the blocking is then computed
    from them at each call (:func:`tile_exprs`), the register tile and packed panels stay."""
    for t, what in ((a, "A"), (b, "B"), (bias, "bias"), (residual, "residual")):
        if t is not None and t.dtype != "float32":
            raise OpError(f"{name}: the C GEMM kernel is float32 only, {what} is {t.dtype}")
    sizes = (ops.batch, ops.M, ops.N, ops.K)
    if all(isinstance(d, int) for d in sizes):
        tiles = gemm_tiles(*sizes, level)  # type: ignore[arg-type]
        mc, kc, parallel = tiles.mc, tiles.kc, int(tiles.parallel)
    else:
        level = level or simd_level(current_target())
        mc, kc, parallel = tile_exprs(*(tir.convert(d) for d in sizes), level)
    bias_mode, bias_req = operand_mode(bias, ops.N, f"{name} bias")
    res_mode, res_req = _residual_mode(residual, out_shape, ops, name)
    checks = [*ops.require, *bias_req, *res_req]
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
            f32_imm(e.alpha), bias_mode, bias_p, res_mode, res_p,
            ACTIVATIONS[e.act1], f32_imm(e.p1[0]), f32_imm(e.p1[1]),
            ACTIVATIONS[e.act2], f32_imm(e.p2[0]), f32_imm(e.p2[1]),
            mc, kc, parallel, ops.heads, ops.a_hs, ops.b_hs, ops.c_hs, header=HEADER)
        msg = StringImm(f"{name}: ember_sgemm failed (out of workspace memory or threads)")
        return checked(AssertStmt(EQ(call, tir.const(0)), msg, Evaluate(tir.const(0))),
                       [(cond, f"{name}: {text}") for cond, text in checks])

    return te.extern(out_shape, inputs, body, name=name, dtype="float32", tag="gemm_kernel")


# ----------------------------------------------------------------------- the ops
def eligible(*tensors: te.Tensor | None) -> bool:
    """True when the C kernel can compute with these operands: float32 (static or run-time
    sizes)."""
    return all(t is None or t.dtype == "float32" for t in tensors)


def _same_k(op: str, k_a: Dim, k_b: Dim) -> list[Check]:
    """The reduction lengths must agree: an error now when both are static, else a check."""
    return must_equal(k_a, k_b, f"{op}: the operands' inner (reduction) dimensions must have "
                      "the same size", f"{op}: the operands disagree on the reduction length: "
                      f"{k_a} vs {k_b}")


def _static_k(k_a: Dim, k_b: Dim) -> Dim:
    return k_b if isinstance(k_b, int) else k_a


def dense_operands(data: te.Tensor, weight: te.Tensor, packed_n: int = 0) -> GemmOperands:
    """data (..., K) x weight (N, K)^T, or x a packed weight (P, K, nr) of ``packed_n``
    columns; the leading dims of data are rows (row-major, so contiguous)."""
    lead = dims(data.shape)
    M = prod(lead[:-1])
    if packed_n:
        _, k2, nr = dims(weight.shape)
        K = _static_k(lead[-1], k2)
        return GemmOperands(1, M, packed_n, K, 0, K, 0, nr, 1, nr,
                            require=tuple(_same_k("nn.dense", lead[-1], k2)))
    N, k2 = dims(weight.shape)
    K = _static_k(lead[-1], k2)
    return GemmOperands(1, M, N, K, 0, K, 0, 1, K, require=tuple(_same_k("nn.dense", lead[-1],
                                                                         k2)))


def matmul_operands(a: te.Tensor, b: te.Tensor, transpose_b: bool) -> GemmOperands:
    """a (..., K) x b (K, N), or b (N, K) with ``transpose_b``."""
    if transpose_b:
        return dense_operands(a, b)
    lead = dims(a.shape)
    k2, N = dims(b.shape)
    K = _static_k(lead[-1], k2)
    return GemmOperands(1, prod(lead[:-1]), N, K, 0, K, 0, N, 1,
                        require=tuple(_same_k("nn.matmul", lead[-1], k2)))


def batch_matmul_operands(x: te.Tensor, y: te.Tensor, transpose_b: bool) -> GemmOperands:
    """x (Bx, M, K) x y (By, N, K) (``transpose_b``) or y (By, K, N); a batch of 1
    broadcasts (batch stride 0)."""
    op = "nn.batch_matmul"
    bx, M, kx = dims(x.shape)
    by, d1, d2 = dims(y.shape)
    N, ky = (d1, d2) if transpose_b else (d2, d1)
    K = _static_k(kx, ky)
    require = _same_k(op, kx, ky)
    if isinstance(bx, int) and isinstance(by, int):
        if bx != by and 1 not in (bx, by):
            raise OpError(f"{op}: batch sizes {bx} and {by} do not broadcast")
    else:
        bx_, by_ = tir.convert(bx), tir.convert(by)
        require.append((tir.any(bx_.equal(by_), bx_.equal(1), by_.equal(1)),
                        f"{op}: the batch sizes must be equal or 1 (they do not broadcast)"))
    batch = _bcast(bx, by)
    b_ks, b_ns = (1, K) if transpose_b else (N, 1)
    return GemmOperands(batch, M, N, K, _bstride(bx, M * K), K, _bstride(by, N * K), b_ks, b_ns,
                        require=tuple(require))


def _bcast(a: Dim, b: Dim) -> Dim:
    """The broadcast of two batch sizes (1 or equal)."""
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    if a is b or (isinstance(b, int) and b == 1):
        return a
    return b if isinstance(a, int) and a == 1 else tir.max(a, b)


def _bstride(batch: Dim, size: Dim) -> Dim:
    """The batch stride of an operand: 0 when its batch is 1 (it broadcasts)."""
    if isinstance(batch, int):
        return 0 if batch == 1 else size
    return tir.Select_(tir.convert(batch).equal(1), 0, size)


def output_shape(data: te.Tensor, ops: GemmOperands, batched: bool) -> tuple[Dim, ...]:
    """The product's output shape: (batch, M, N), or data's leading dims and N."""
    return (ops.batch, ops.M, ops.N) if batched else (*data.shape[:-1], ops.N)
