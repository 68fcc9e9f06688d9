"""The first conv of a CNN (a plain NCHW input of 1-8 channels, NCHW[L]c out) as a call of
``ember/include/ember/kernels/conv_nchw_input.h``.

The NCHW[L]c op (``nn.contrib_conv2d_NCHWc_fused``) with ``in_block`` 1 reads its input as
plain NCHW with the weight ``[OC/L, IC, KH, KW, 1, L]``: exactly this kernel's operands, so
:func:`conv2d_nchwc` hands such a conv here when :func:`nchw_input_applies` (no relay change).
The kernel copies the input rows of each work item to a zero-padded buffer and runs register
tiles of ``rw`` output columns x 2 output blocks over every input channel and tap; its
epilogue is the NCHW[L]c kernel's.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...runtime.errors import OpError
from ...target.simd import SimdLevel
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ...tir.simplify import simplify
from . import conv2d_nchwc as K
from .sizes import ceildiv, i64, is_static, static_or_expr

HEADER = "ember/kernels/conv_nchw_input.h"
# input channels up to which the kernel is used: against the NCHW[L]c kernel on the input as
# one block of all channels, 3x3/1 on 56x56 -> 32: 4 channels 0.74x its time, 6 0.80x, 8 0.91x
# (and no transform of the input)
MAX_CHANNELS = 8
WIDTHS = (6, 5, 4)  # register tile widths with 16 vector registers (conv_nchw_input_impl.h)
WIDE_WIDTHS = (12, 10, 8, 6, 5, 4)  # and with AVX-512's 32
TILE_COST = 2  # fixed cost of a tile, in output columns (weight loads, epilogue, call)
BUFFER_BYTES = 64 * 1024  # the row buffer of a work item: in the L2 with the weights


@dataclass(frozen=True)
class NchwInputTiles:
    """The kernel's schedule: ``rw`` output columns per register tile, ``rows`` output rows
    and ``blocks`` output blocks per work item, ``threads`` 1 to split the items over
    threads."""

    rw: int
    rows: int
    blocks: int
    threads: int


def nchw_input_wins(ic: int, groups: int, kernel: tuple[int, int],
                    dilation: tuple[int, int]) -> bool:
    """Whether a conv of a plain NCHW input runs on this kernel (the layout planner then keeps
    its input plain): a dense conv with at most :data:`MAX_CHANNELS` input channels, a kernel
    window larger than 1x1 and unit dilation. Others keep the NCHW[L]c kernel (a 1x1 conv has
    no taps to share a row buffer)."""
    return (groups == 1 and ic <= MAX_CHANNELS and kernel[0] * kernel[1] > 1
            and tuple(dilation) == (1, 1))


def nchw_input_applies(geo: K.ConvGeometry) -> bool:
    """Whether ``geo`` runs on this kernel: :func:`nchw_input_wins` for a plain NCHW input
    (``in_block`` 1); the batch and the image may be run-time sizes
    (:func:`nchw_input_tile_exprs`)."""
    return geo.in_block == 1 and nchw_input_wins(geo.ic, geo.groups, (geo.kh, geo.kw),
                                                 geo.dilation)


def _widths(level: SimdLevel, lanes: int) -> tuple[int, ...]:
    """The tile widths the kernel has for ``level``: the wide ones only where it instantiates
    them (AVX-512, ``conv_nchw_input_impl.h``), at most one register per vector."""
    wide = level.name == "avx512" and lanes * 4 <= level.vector_bytes
    return WIDE_WIDTHS if wide else WIDTHS


def tile_width(ow: int, level: SimdLevel, lanes: int) -> int:
    """The register tile width with the least work for a row of ``ow`` columns: whole tiles
    (a tail tile computes its full width) plus :data:`TILE_COST` per tile; the wider on a
    tie."""
    widths = _widths(level, lanes)
    return min(widths, key=lambda w: (-(-ow // w) * (w + TILE_COST), -w))


def nchw_input_tiles(geo: K.ConvGeometry, level: SimdLevel) -> NchwInputTiles:
    """The schedule of ``geo`` (static image sizes): rows per item so that the item's row buffer
    fits :data:`BUFFER_BYTES`, cut further for a parallel kernel to give
    ``K.TARGET_ITEMS`` items, and where the rows are too few for that (a 1-D conv), the output
    blocks split in groups of pairs; threads above ``K.PARALLEL_MACS`` multiply-adds with two
    items or more."""
    # a run-time batch: the schedule of one image (rows and threads do not depend on it)
    n = int(geo.n) if is_static(geo.n) else 1
    oh, ow = int(geo.oh), int(geo.ow)
    rw = tile_width(ow, level, geo.lanes)
    wb = (-(-ow // rw) * rw - 1) * geo.strides[1] + geo.kw
    fit = (BUFFER_BYTES // (4 * geo.ic * wb) - geo.kh) // geo.strides[0] + 1
    rows = max(1, min(oh, fit))
    big = n * oh * ow * geo.oc * geo.ic * geo.kh * geo.kw >= K.PARALLEL_MACS
    ocb = geo.oc // geo.lanes
    blocks = ocb
    if big:
        rows = min(rows, max(1, -(-oh // -(-K.TARGET_ITEMS // n))))
        runs = n * -(-oh // rows)
        if runs < K.TARGET_ITEMS:  # few rows (a 1-D conv's one): split the blocks, in pairs
            groups = -(-K.TARGET_ITEMS // runs)
            blocks = min(ocb, 2 * -(-ocb // (2 * groups)))
    items = n * -(-oh // rows) * -(-ocb // max(blocks, 1))
    return NchwInputTiles(rw, rows, blocks, int(big and items >= 2))


def nchw_input_tile_exprs(geo: K.ConvGeometry, level: SimdLevel) -> NchwInputTiles:
    """:func:`nchw_input_tiles` for a run-time image (height, width, or both): the fields are
    expressions the kernel's wrapper evaluates at each call, giving what a static build of
    that shape gets (a run-time batch plans one image, as there)."""
    n = geo.n if is_static(geo.n) else 1
    oh, ow = tir.convert(geo.oh), tir.convert(geo.ow)
    widths = sorted(_widths(level, geo.lanes), reverse=True)
    # tile_width: the least (whole tiles) * (width + TILE_COST), the wider on a tie
    rw: PrimExpr = tir.const(widths[0])
    cost = ceildiv(ow, widths[0]) * (widths[0] + TILE_COST)
    for w in widths[1:]:
        mine = ceildiv(ow, w) * (w + TILE_COST)
        rw, cost = tir.Select_(mine < cost, w, rw), tir.Select_(mine < cost, mine, cost)
    wb = (ceildiv(ow, rw) * rw - 1) * geo.strides[1] + geo.kw
    fit = tir.floordiv(tir.floordiv(tir.const(BUFFER_BYTES), 4 * geo.ic * wb) - geo.kh,
                       geo.strides[0]) + 1
    rows = tir.max(1, tir.min(oh, fit))
    big = i64(n) * i64(oh) * i64(ow) * (geo.oc * geo.ic * geo.kh * geo.kw) >= tir.const(
        K.PARALLEL_MACS, "int64")
    ocb = geo.oc // geo.lanes
    rows = tir.Select_(big, tir.min(rows, tir.max(1, ceildiv(oh, ceildiv(K.TARGET_ITEMS, n)))),
                       rows)
    runs = n * ceildiv(oh, rows)
    groups = ceildiv(K.TARGET_ITEMS, runs)
    split = tir.all(big, runs < K.TARGET_ITEMS)
    blocks = tir.Select_(split, tir.min(ocb, 2 * ceildiv(ocb, 2 * groups)), ocb)
    items = n * ceildiv(oh, rows) * ceildiv(ocb, tir.max(blocks, 1))
    threads = tir.cast(tir.all(big, items >= 2), "int32")
    return NchwInputTiles(*(static_or_expr(simplify(x)) for x in (rw, rows, blocks, threads)))


def conv2d_nchw_input(data: te.Tensor, weight: te.Tensor, bias: te.Tensor,
                      residual: te.Tensor | None, geo: K.ConvGeometry, level: SimdLevel,
                      epilogue: list) -> te.Tensor:
    """The conv of ``geo`` (see :func:`nchw_input_applies`) with its epilogue arguments
    (``K._epilogue``'s: activation code, its two parameters, flags)."""
    if not nchw_input_applies(geo):
        raise OpError(f"conv2d_nchw_input: the kernel takes a dense conv of a plain NCHW input "
                      f"(in_block 1) of at most {MAX_CHANNELS} channels, a window larger than "
                      f"1x1 and unit dilation; got in_block={geo.in_block}, "
                      f"ic={geo.ic}, groups={geo.groups}, kernel {geo.kh}x{geo.kw}, "
                      f"dilation {geo.dilation}, image {geo.h}x{geo.w}")
    static = is_static(geo.h, geo.w, geo.oh, geo.ow)
    tiles = nchw_input_tiles(geo, level) if static else nchw_input_tile_exprs(geo, level)
    ints = [geo.n, geo.ic, geo.h, geo.w, geo.oc // geo.lanes, geo.oh, geo.ow, geo.kh, geo.kw,
            *geo.strides, *geo.dilation, geo.padding[0], geo.padding[1]]
    tail = [*epilogue, tiles.rw, tiles.rows, tiles.blocks, tiles.threads]
    return K.conv_extern(f"ember_conv2d_nchw_input_x{geo.lanes}", HEADER,
                         "T_conv2d_nchw_input", data, weight, bias, residual, geo, [*ints, *tail])
