"""conv2d, depthwise conv2d and pools in the blocked layout NCHW[L]c, as calls of ember's C
micro-kernels (``ember/include/ember/kernels/conv_nchwc.h``, ``pool_nchwc.h``).

Layouts (``L`` = lanes, the float32 lanes of the build's SIMD level; ``CB`` = L, or 1 for a
plain NCHW input, which is NCHW1c in memory):

- data ``[N, IC/CB, H, W, CB]``; weight ``[OC/L, ICg/CB, KH, KW, CB, L]`` (``ICg``: input
  channels of a group), depthwise ``[C/L, 1, KH, KW, 1, L]``; bias ``[OC]``; output and
  residual ``[N, OC/L, OH, OW, L]``.

The epilogue (bias, residual add, activation) runs in the kernel; :func:`conv_tiles` picks the
register tile, the work split and whether to use threads: a tuning record measured on this
machine (``ember tune``) or a cost model.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...runtime.cpu_features import host_cache_bytes
from ...runtime.errors import OpError
from ...target.simd import SimdLevel
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import IntImm, PrimExpr
from .. import tile_records
from .conv2d_fewoc import conv2d_fewoc, fewoc_applies
from .sizes import (Dim, ceildiv, folded, i64, is_static, let_shared, static_or_expr, succeeds,
                    widest)

HEADER = "ember/kernels/conv_nchwc.h"
LANES = (4, 8, 16)  # lane counts the kernels are instantiated for
# activation codes (EMBER_CONV_ACT_* in conv_simd.h); the two parameters (``clip``) are the
# bounds of clip, the slope and offset of hardsigmoid, the slope of leaky_relu, the output and
# inner scales of the GELUs (``lo * x * (1 + erf(hi * x))``, the tanh form's likewise)
ACTIVATIONS = {"none": 0, "relu": 1, "clip": 2, "hardswish": 3, "hardsigmoid": 4,
               "leaky_relu": 5, "sigmoid": 6, "silu": 7, "mish": 8, "gelu_erf": 9,
               "gelu_tanh": 10, "tanh": 11}
RESIDUAL, ACT_AFTER_ADD, STREAM = 1, 2, 4  # epilogue flags (EMBER_EPI_* in conv_simd.h)
TILE_WIDTHS = (12, 8, 6, 4, 2, 1)  # the register tile widths the header instantiates
PAIR_1X1_WIDTH = 5  # a pair's width for 1x1 convs on 16 registers (instantiated for pairs)
QUAD_WIDTHS = (6, 4, 2, 1)  # widths of the 4-block tiles (AVX-512 builds only)
TARGET_ITEMS = 4  # work items wanted for a parallel kernel: enough to balance 2-4 threads
PARALLEL_MACS = 1 << 16  # below this a kernel runs on the calling thread (~30 us of work)
L2_BYTES = 512 * 1024  # per-core L2 the loop order and strips are sized for
# input channel blocks from which the kernel packs each strip of a 1x1 conv looping over its
# output blocks innermost, the block groups that must read each strip, and the input size it
# must exceed (EMBER_CONV_PACK_MIN_* in conv_nchwc.h)
PACK_MIN_BLOCKS = 16
PACK_MIN_GROUPS = 4
PACK_MIN_BYTES = 512 * 1024
# widest output row the kernel runs in tiles of flattened positions across rows
# (EMBER_CONV_FLAT_MAX_OW in conv_nchwc_flat_impl.h), and AVX-512's quads over a strided conv
# (EMBER_CONV_FLAT_MAX_STRIDED_OW: its padded copy is sh * sw times the output map)
FLAT_MAX_OW = 35
FLAT_MAX_STRIDED_OW = 14
# AVX-512's pair tiles for 1x1 convs to 8-lane blocks (conv_nchwc_pair_impl.h): blocks per
# group at most, the tile width for each count of pairs (ember_pair_width), the smallest map
PAIR_MAX_BLOCKS = 8
PAIR_WIDTHS = {1: 12, 2: 12, 3: 8, 4: 6}
PAIR_MIN_PIXELS = 64


@dataclass(frozen=True)
class ConvGeometry:
    """Sizes of one NCHW[L]c convolution: the batch and the image sizes (``n``, ``h``, ``w``,
    ``oh``, ``ow``) may be run-time ones (expressions of the kernel's ``?`` dimensions), the
    channels, kernel window and layout are static."""

    n: Dim
    ic: int
    h: Dim
    w: Dim
    oc: int
    oh: Dim
    ow: Dim
    kh: int
    kw: int
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]
    dilation: tuple[int, int]
    groups: int
    lanes: int
    in_block: int

    @property
    def macs(self) -> int:
        return folded(conv_macs(self), "conv geometry")

    @property
    def static(self) -> bool:
        return is_static(self.n, self.h, self.w, self.oh, self.ow)


@dataclass(frozen=True)
class ConvTiles:
    """The kernel's schedule: ``rb`` output blocks x ``rw`` output columns per register
    tile, ``strip`` output columns per work item, ``order`` 1 to loop over output blocks
    innermost (input strip reused from cache), ``threads`` 1 to split work over threads."""

    rb: int
    rw: int
    strip: int
    order: int
    threads: int


def vector_registers(level: SimdLevel) -> int:
    """Vector registers of the level (AVX-512 and NEON 32, the others 16)."""
    return 32 if level.name in ("avx512", "neon") else 16


def conv_key(geo: ConvGeometry) -> tuple[int, ...]:
    """The geometry as the flat integer key of a tuning record (:func:`conv_of_key`)."""
    return (geo.n, geo.ic, geo.h, geo.w, geo.oc, geo.oh, geo.ow, geo.kh, geo.kw, *geo.strides,
            *geo.padding, *geo.dilation, geo.groups, geo.lanes, geo.in_block)


def conv_of_key(key: tuple[int, ...]) -> ConvGeometry:
    """The inverse of :func:`conv_key`."""
    k = list(key)
    return ConvGeometry(*k[:9], (k[9], k[10]), (k[11], k[12], k[13], k[14]), (k[15], k[16]),
                        *k[17:])


def conv_tiles(geo: ConvGeometry, level: SimdLevel) -> ConvTiles:
    """The schedule of one conv kernel call: the tuning record's for exactly this call when
    there is one (``topi/tile_records.py``), else :func:`model_conv_tiles`'s; with run-time
    sizes, the model's expressions (:func:`conv_tile_exprs`)."""
    if not geo.static:
        return conv_tile_exprs(geo, level)
    return tile_records.lookup("conv2d_nchwc", conv_key(geo), level, model_conv_tiles(geo, level),
                               lambda tiles: check_conv_tiles(tiles, geo))


def check_conv_tiles(tiles: ConvTiles, geo: ConvGeometry) -> str | None:
    """Why the conv kernel cannot run ``tiles`` for ``geo`` (None if it can)."""
    pairs = takes_pairs(geo)  # AVX-512's pair tiles take groups of 6 and 8 blocks too
    problems = [(tiles.rb not in ((1, 2, 4, 6, 8) if pairs else (1, 2, 4)),
                 "rb must be 1, 2, 4, 6 or 8" if pairs else "rb must be 1, 2 or 4"),
                (tiles.rw not in (*TILE_WIDTHS, PAIR_1X1_WIDTH),
                 f"rw must be one of {(*TILE_WIDTHS, PAIR_1X1_WIDTH)}"),
                (tiles.order not in (0, 1), "order must be 0 or 1")]
    found = next((what for bad, what in problems if bad), None)
    return found or _check_split(tiles.strip, tiles.threads, geo)


def _check_split(strip: int, threads: int, geo: ConvGeometry) -> str | None:
    if not 1 <= strip <= max(geo.ow, 1):
        return f"strip must be in 1..{geo.ow}"
    return None if threads in (0, 1) else "threads must be 0 or 1"


def model_conv_tiles(geo: ConvGeometry, level: SimdLevel) -> ConvTiles:
    """Cost model of the conv kernel.

    - Register tile: ``rb * rw`` accumulators (each ``ceil(L*4 / vector_bytes)`` registers)
      plus ``rb`` weight vectors and one broadcast must fit the register file; two output
      blocks per tile halve the broadcasts per FMA, so rb = 2 whenever a group has two or
      more output blocks (an odd count ends with a one-block tile). rw is the widest
      instantiated width that fits and does not exceed the output row. With AVX-512's 32
      registers, a group of four or more blocks takes quads instead (rb = 4, rw up to 6):
      as many accumulators as the 12-wide pair (twice as many on rows shorter than 12), and
      10 loads per 24 FMAs instead of 14 (measured on Zen 4: resnet18's 3x3 convs 99 -> 107
      GFLOP/s, its 7x7 maps 48 -> 90, 1x1 convs about 10% faster).
    - Loop order: output blocks innermost when all the weights fit in half the L2 (each input
      strip is then read once from memory), else blocks outermost (each block's weights stay
      in cache while the rows stream by). A 1x1 conv with :data:`PACK_MIN_BLOCKS` or more
      input blocks (:func:`packs_strips`) always loops over its blocks innermost: the kernel
      then copies each input strip to one contiguous run that serves every block group
      (SegFormer's 1x1 1024->256 at 64x64, blocks outermost and unpacked: 157 ms, 4.9x
      onnxruntime's time; innermost and packed: 26 ms, onnxruntime 32 ms). A small map that
      the kernel runs in tiles of flattened positions across rows (:func:`flat_tiles`) always
      loops over its blocks outermost: its input sits in the L2, and each tile of up to 6
      positions (not 4 + 3 columns of a 7-wide row) streams a block pair's weights once
      (resnet18's 3x3 512->512 at 7x7: 1.26x -> 1.02x onnxruntime's time on one AVX2 core),
      in quads on AVX-512 (a 7-wide row was a 6-wide quad and a 1-wide one at half speed).
    - Strips: a whole output row, except for 1x1 stride-1 convolutions flattened to one long
      row (H*W) and 1-D convolutions (:func:`is_conv1d`), cut so that one input strip fills at
      most a quarter of the L2. A 1-D convolution's long row also loops over its output blocks
      innermost where its weights fit half the L2, or where they are more to stream once per
      strip than the row once per block group (:func:`conv1d_order`): blocks outermost
      streamed the whole row from memory once per block pair (wav2vec2's 512-channel convs
      over 3199 and 1599 samples on AVX2: 2-4x onnxruntime's time; strips of ~30 columns with
      blocks innermost: 1.9x, on a 2-core machine shared by other jobs). AVX-512's quads have
      a quarter as many block groups, and there the weights streamed once per strip were the
      larger part (wav2vec2's 512->512 over 3199 samples: 18.4 -> 15.1 ms with blocks
      outermost, onnxruntime 13.2 ms; one AVX2 core keeps blocks innermost, 28.6 vs 34.3 ms).
    - Threads only above ``PARALLEL_MACS`` multiply-adds and with at least two work items; a
      parallel kernel with fewer than ``TARGET_ITEMS`` items has its rows cut into strips.
    """
    return ConvTiles(*(folded(v, "conv tile model") for v in _fields(conv_tile_exprs(geo, level))))


def conv_tile_exprs(geo: ConvGeometry, level: SimdLevel) -> ConvTiles:
    """:func:`model_conv_tiles` over the geometry's sizes, which may be run-time ones (batch,
    height, width): then the fields that depend on them are expressions the kernel's wrapper
    evaluates at each call (the tiles a static build of that shape gets).

    Where AVX-512's pair tiles depend on the run-time map (:func:`pair_tiles`: at least
    :data:`PAIR_MIN_PIXELS` output pixels), every field is chosen between the pair plan and
    the plain one at each call, as a static build of that shape chooses (a pair plan on a
    smaller map ran the 8-lane tiles with 6 or 8 blocks: mobilenet_v3_large's 1x1s at 5x4
    and 2x2)."""
    pairs = pair_tiles(geo, level)
    tiles = _tile_exprs(geo, level, pairs)
    if pairs is None or geo.static:
        return tiles
    plain = _tile_exprs(geo, level, None)
    many = i64(geo.n) * i64(geo.oh) * i64(geo.ow) >= tir.const(PAIR_MIN_PIXELS, "int64")
    return ConvTiles(*(a if isinstance(a, int) and isinstance(b, int) and a == b
                       else static_or_expr(tir.Select_(many, a, b))
                       for a, b in zip(_fields(tiles), _fields(plain))))


def _fields(tiles: ConvTiles) -> tuple:
    return tiles.rb, tiles.rw, tiles.strip, tiles.order, tiles.threads


def _tile_exprs(geo: ConvGeometry, level: SimdLevel, pairs: tuple[int, int] | None) -> ConvTiles:
    """:func:`conv_tile_exprs` with the pair tiles ``pairs`` (None: the plain tiles)."""
    lanes = geo.lanes
    # A portable (scalar) build still gets 4-lane vectors from the C compiler: size the tile
    # for 16-byte registers.
    vector_bytes = 16 if level.name == "scalar" else level.vector_bytes
    per_vec = max(1, -(-lanes * 4 // vector_bytes))
    ocb_g = geo.oc // lanes // geo.groups
    rb = 2 if ocb_g >= 2 else 1
    budget = vector_registers(level) - rb * per_vec - 2
    row = tir.max(geo.ow, 1)
    # a 1x1 pair on 16 registers: 5 columns, not 6 (12 accumulators, 2 weights and a
    # broadcast made GCC spill in the unrolled block loop: 3-10% slower on MobileNet's 1x1s)
    fits = [w for w in TILE_WIDTHS if w * rb * per_vec <= budget]
    if geo.kh == geo.kw == 1 and rb == 2 and vector_registers(level) == 16 and per_vec == 1:
        fits = [PAIR_1X1_WIDTH] + [w for w in fits if w < PAIR_1X1_WIDTH]
    rw = widest(fits, row)
    if level.name == "avx512" and per_vec == 1 and ocb_g >= 4:
        rb, rw = 4, widest(QUAD_WIDTHS, row)
    if pairs is not None:
        rb, rw = pairs
    weight_bytes = geo.oc * (geo.ic // geo.groups) * geo.kh * geo.kw * 4
    conv1d = is_conv1d(geo)
    # a conv1d streams its blocks over strips that sit in the L2, or its row block group by
    # block group (conv1d_order, once the strip is known; see model_conv_tiles)
    packs = packs_strips(geo, rb)
    order = 1 if conv1d or weight_bytes <= L2_BYTES // 2 or packs is True else 0
    if order == 0 and not isinstance(packs, bool):  # packs at run-time sizes over the minimum
        order = tir.Select_(packs, 1, 0)
    if pairs is not None:
        order = 1  # the pair tiles' groups share each input strip from the L1 and L2
    if flat_tiles(geo, level, rb):
        order = 0  # the flat tiles need blocks outermost; a small map's input sits in the L2
    elif not is_static(geo.ow) and order != 0 and flat_tiles_apart_from_row(geo, level, rb):
        # a run-time row: blocks outermost (the flat tiles) when it is short enough, as a
        # static build of that shape gets (squeezenet/hw's fire 3x3s at 15x15 and 7x7: 20%
        # slower with blocks innermost in row tiles); the kernel checks the row itself
        order = tir.Select_(tir.max(geo.ow, 1) <= flat_max_ow(geo, rb), 0, order)
    strip = tir.convert(geo.ow)
    if geo.kh == geo.kw == 1 or conv1d:  # a single-row conv (1x1 flattened, or a conv1d):
        col_bytes = max(1, geo.ic // geo.groups * 4 * geo.strides[1])  # strips fit the L2
        flat = tir.min(tir.max(rw, tir.floordiv(L2_BYTES // 4 // col_bytes, rw) * rw), geo.ow)
        strip = flat if conv1d else tir.Select_(tir.convert(geo.oh).equal(1), flat, strip)
    if conv1d and weight_bytes > L2_BYTES // 2:
        order = conv1d_order(geo, rb, strip, weight_bytes)
    rows = geo.n * geo.groups * ceildiv(ocb_g, rb) * geo.oh  # work items per strip column
    big = conv_macs(geo) >= tir.const(PARALLEL_MACS, "int64")
    # too few items to share between threads (a flattened 1x1 conv of one block group): cut
    # the rows into shorter strips, whole tiles each
    few = rows * ceildiv(geo.ow, tir.max(strip, 1)) < TARGET_ITEMS
    per_cut = ceildiv(geo.ow, ceildiv(TARGET_ITEMS, tir.max(rows, 1)))
    cut = tir.min(strip, tir.max(rw, ceildiv(per_cut, rw) * rw))
    strip = tir.max(tir.Select_(tir.all(big, few), cut, strip), 1)
    items = rows * ceildiv(geo.ow, strip)
    threads = tir.cast(tir.all(big, items >= 2), "int32")
    return ConvTiles(rb, *(static_or_expr(v) for v in (rw, strip, order, threads)))


def takes_pairs(geo: ConvGeometry) -> bool:
    """Whether an AVX-512 build's 8-lane kernel runs ``geo`` on its pair tiles
    (``conv_nchwc_pair_impl.h``: two 8-lane output blocks per 16-lane accumulator) when
    planned with an even ``rb`` of at most :data:`PAIR_MAX_BLOCKS`: a dense 1x1 stride-1
    unpadded conv (the flattened form) to 8-lane blocks over an input in blocks of 8 or 16."""
    return (geo.lanes == 8 and geo.kh == geo.kw == 1 and geo.strides == (1, 1)
            and not any(geo.padding) and geo.groups == 1 and geo.in_block in (8, 16))


def pair_tiles(geo: ConvGeometry, level: SimdLevel) -> tuple[int, int] | None:
    """``(rb, rw)`` of the pair tiles for ``geo`` on AVX-512 (:func:`takes_pairs`), None where
    the 8-lane tiles run it: output blocks in groups of up to :data:`PAIR_MAX_BLOCKS` (every
    block of a conv to 24, 40 or 64 channels in one tile, so its input is read once), as few
    groups as that allows and evened out (9 blocks: 6 + 3, not 8 + 1); the tile as wide as
    the group's pairs leave registers for (``ember_pair_width``). Not for one block (half of
    each accumulator would be zeros: the 8-lane tiles do as well) nor for a map of fewer than
    :data:`PAIR_MIN_PIXELS` pixels (the per-call repacking of the weights would cost more than
    the wide FMAs save: an SE block's convs on a 1x1 map)."""
    ocb = geo.oc // geo.lanes
    if level.name != "avx512" or ocb < 2 or not takes_pairs(geo):
        return None
    if geo.static and int(geo.n) * int(geo.oh) * int(geo.ow) < PAIR_MIN_PIXELS:
        return None
    pairs = -(-ocb // 2)
    per = -(-pairs // -(-pairs // (PAIR_MAX_BLOCKS // 2)))  # pairs per group
    return 2 * per, PAIR_WIDTHS[per]


def flat_tiles(geo: ConvGeometry, level: SimdLevel, rb: int) -> bool:
    """Whether the kernel runs ``geo`` in tiles of flattened positions across rows when its
    blocks are outermost (``ember_conv_flat`` in conv_nchwc_flat_impl.h): a dense conv over
    a channel-blocked input with a kernel of more than one tap (a 7x1 too), unit column dilation, a static row
    of at most :func:`flat_max_ow` columns, and pairs of output blocks with 16 vector
    registers or quads with AVX-512's 32 (its pairs keep the row tiles)."""
    return (isinstance(geo.ow, int) and geo.ow <= flat_max_ow(geo, rb)
            and flat_tiles_apart_from_row(geo, level, rb))


def flat_max_ow(geo: ConvGeometry, rb: int) -> int:
    """The widest row :func:`flat_tiles` takes: :data:`FLAT_MAX_STRIDED_OW` for AVX-512's
    quads over a strided conv (its padded input copy is ``sh * sw`` times the output map; the
    row tiles lose little on 15 to 28 columns: resnet18's 3x3 64->128 at stride 2 to 28x28
    is 8% faster in them), else :data:`FLAT_MAX_OW`."""
    strided = geo.strides[0] * geo.strides[1] > 1
    return FLAT_MAX_STRIDED_OW if rb == 4 and strided else FLAT_MAX_OW


def flat_tiles_apart_from_row(geo: ConvGeometry, level: SimdLevel, rb: int) -> bool:
    """:func:`flat_tiles` but for the row's width, which may be a run-time size."""
    pairs = rb == 2 and vector_registers(level) == 16
    quads = rb == 4 and level.name == "avx512"  # EMBER_FLAT_RB in conv_nchwc_flat_impl.h
    return (geo.kh * geo.kw > 1 and (pairs or quads) and geo.groups == 1 and geo.in_block == geo.lanes
            and geo.dilation[1] == 1)


def packs_strips(geo: ConvGeometry, rb: int = 2) -> bool | PrimExpr:
    """Whether the kernel packs the input strips of ``geo`` when its blocks are innermost
    (``ember_conv_packs`` in conv_nchwc.h): a dense 1x1 conv with many input blocks, whose
    blocks lie a whole plane apart in NCHW[L]c, read by :data:`PACK_MIN_GROUPS` or more
    groups of ``rb`` output blocks, over an input larger than :data:`PACK_MIN_BYTES` (a
    smaller one stays in the L2 unpacked). With run-time image sizes: the size test as an
    expression (the kernel makes it too, at each call)."""
    blocks = geo.ic // geo.in_block if geo.in_block else 0
    if not (geo.kh == geo.kw == 1 and geo.groups == 1 and geo.in_block > 1
            and blocks >= PACK_MIN_BLOCKS and ceildiv(geo.oc // geo.lanes, rb) >= PACK_MIN_GROUPS):
        return False
    in_bytes = i64(geo.h) * i64(geo.w) * (blocks * geo.in_block * 4)
    big = in_bytes > tir.const(PACK_MIN_BYTES, "int64")
    return bool(big.value) if isinstance(big, IntImm) else big


def conv1d_order(geo: ConvGeometry, rb: int, strip: PrimExpr, weight_bytes: int) -> PrimExpr:
    """The loop order of a conv1d whose weights overflow half the L2: blocks outermost (0)
    where its input row, read once per block group, is less to stream than its weights, read
    once per strip with blocks innermost (1). An expression when the row's width is a run-time
    one (both sides grow with it)."""
    block_groups = ceildiv(geo.oc // geo.lanes // geo.groups, rb)  # each reads its group's row
    row_stream = i64(geo.n) * i64(geo.w) * (geo.ic * 4) * block_groups
    weight_stream = i64(geo.n) * i64(ceildiv(geo.ow, tir.max(strip, 1))) * weight_bytes
    return tir.Select_(row_stream < weight_stream, 0, 1)


def is_conv1d(geo: ConvGeometry) -> bool:
    """Whether ``geo`` is a 1-D convolution run as a conv2d (a kernel of height 1 wider than 1
    on a single-row map, as the ONNX importer and the audio zoo write one)."""
    return geo.kh == 1 and geo.kw > 1 and is_static(geo.oh) and int(geo.oh) == 1


def conv_macs(geo: ConvGeometry) -> PrimExpr:
    """The multiply-adds of ``geo`` as an int64 expression (constant for static sizes)."""
    out = i64(geo.n) * i64(geo.oh) * i64(geo.ow)
    return out * (geo.oc * (geo.ic // geo.groups) * geo.kh * geo.kw)


def flattened(geo: ConvGeometry) -> ConvGeometry:
    """A 1x1, stride-1, unpadded conv as one image row of H*W pixels (the same memory in
    NCHW[L]c): register tiles then run along whole planes instead of short rows (7x7, 14x14
    feature maps would otherwise leave most tiles partly empty)."""
    if geo.kh == geo.kw == 1 and geo.strides == (1, 1) and not any(geo.padding):
        return replace(geo, h=1, w=geo.h * geo.w, oh=1, ow=geo.oh * geo.ow, dilation=(1, 1))
    return geo


def subsampled(data: te.Tensor, geo: ConvGeometry) -> tuple[te.Tensor, ConvGeometry]:
    """A strided, unpadded 1x1 conv as the stride-1 conv of the pixels it reads: the kernel
    then runs it flattened (:func:`flattened`), its register tiles along contiguous vectors,
    where the strided form reads every vector from a different cache line (a quarter of
    what it loads at stride 2, and short rows). The gather is one injective stage in the same
    kernel, a copy of the output's size (1x1 stride-2 projections of resnet18: 10-30% faster)."""
    sh, sw = geo.strides
    if geo.kh != 1 or geo.kw != 1 or (sh, sw) == (1, 1) or any(geo.padding) or not geo.static:
        return data, geo
    picked = te.compute((geo.n, geo.ic // geo.in_block, geo.oh, geo.ow, geo.in_block),
                        lambda n, c, y, x, l: data[n, c, y * sh, x * sw, l],
                        name="T_conv_input_strided", tag="injective")
    return picked, replace(geo, h=geo.oh, w=geo.ow, strides=(1, 1), dilation=(1, 1))


def _check_lanes(lanes: int, where: str) -> None:
    if lanes not in LANES:
        raise OpError(f"{where}: the blocked kernels have {LANES} lanes, not {lanes}")


def _epilogue(act: str, clip: tuple[float, float], flags: int) -> list:
    if act not in ACTIVATIONS:
        raise OpError(f"conv2d_nchwc: activation {act!r} is not one of {sorted(ACTIVATIONS)}")
    lo, hi = clip
    return [ACTIVATIONS[act], tir.const(float(lo), "float32"), tir.const(float(hi), "float32"),
            flags]


def call_sizes(geo: ConvGeometry) -> list[int]:
    """The size arguments of ``ember_conv2d_nchwc_x<L>`` for ``geo``, in the header's order."""
    return [geo.n, geo.ic // geo.in_block, geo.in_block, geo.h, geo.w, geo.oc // geo.lanes,
            geo.groups, geo.oh, geo.ow, geo.kh, geo.kw, *geo.strides, *geo.dilation,
            geo.padding[0], geo.padding[1]]


def conv2d_nchwc(data: te.Tensor, weight: te.Tensor, bias: te.Tensor,
                 residual: te.Tensor | None, geo: ConvGeometry, level: SimdLevel,
                 act: str = "none", clip: tuple[float, float] = (0.0, 0.0),
                 act_after_add: bool = True) -> te.Tensor:
    """Dense or grouped conv2d in NCHW[L]c with its epilogue (layouts: module docstring)."""
    lanes = geo.lanes
    _check_lanes(lanes, "conv2d_nchwc")
    flags = (RESIDUAL | (ACT_AFTER_ADD if act_after_add else 0)) if residual is not None else 0
    few = _few_output_channels(data, weight, bias, residual, geo, level, act, clip, flags)
    if few is not None:
        return few
    # a CNN's first conv (plain NCHW input, few channels) has a kernel of its own; imported
    # here because that module builds on this one
    from .conv2d_nchw_input import conv2d_nchw_input, nchw_input_applies

    if nchw_input_applies(geo):
        return conv2d_nchw_input(data, weight, bias, residual, geo, level,
                                 _epilogue(act, clip, flags))
    data, geo = subsampled(data, geo)
    run = flattened(geo)
    tiles = conv_tiles(run, level)
    if streams_output(geo, residual is not None, act):
        flags |= STREAM
    tail = _epilogue(act, clip, flags) + [tiles.rb, tiles.rw, tiles.strip, tiles.order,
                                          tiles.threads]
    return conv_extern(f"ember_conv2d_nchwc_x{lanes}", HEADER, "T_conv2d_nchwc", data, weight,
                       bias, residual, geo, [*call_sizes(run), *tail])


def streams_output(geo: ConvGeometry, residual: bool, act: str,
                   cache_bytes: dict[int, int] | None = None) -> bool:
    """Whether the kernel stores the output of ``geo`` past the caches (``STREAM``,
    non-temporal stores): a 1x1 conv plus a residual add, no activation, whose output and
    residual (static sizes) together outgrow the last-level cache (``cache_bytes``, default
    the host's: ``host_cache_bytes``; unknown, never). Such a conv has few multiply-adds per
    output (16 for a 1x1 over 16 channels) and waits on memory: plain stores read each output
    line in before writing it, a third of its traffic. A text detector's FPN 1x1 16->256 plus
    add at 160x160 (26 MB out, 26 MB residual in; a Zen 5 core with 32 MB of L3): 2.4 ms ->
    1.1 ms, onnxruntime (which adds into the residual's buffer) 1.0 ms. Only where the two
    together exceed the whole cache: a smaller output would be read back from it by the next
    kernel."""
    if not (residual and act == "none" and geo.kh == geo.kw == 1 and geo.static):
        return False
    caches = host_cache_bytes() if cache_bytes is None else cache_bytes
    last = max(caches.values(), default=0)
    out_bytes = int(geo.n) * geo.oc * int(geo.oh) * int(geo.ow) * 4
    return last > 0 and 2 * out_bytes > last


def _few_output_channels(data: te.Tensor, weight: te.Tensor, bias: te.Tensor,
                         residual: te.Tensor | None, geo: ConvGeometry, level: SimdLevel,
                         act: str, clip: tuple[float, float], flags: int) -> te.Tensor | None:
    """The conv on the few-output-channel kernel (``conv2d_fewoc.py``) where it applies."""
    if not fewoc_applies(geo, level, residual is not None):
        return None
    return conv2d_fewoc(data, weight, bias, geo, _epilogue(act, clip, flags))


def conv_extern(entry: str, header: str, name: str, data: te.Tensor, weight: te.Tensor,
                bias: te.Tensor, residual: te.Tensor | None, geo: ConvGeometry,
                args: list) -> te.Tensor:
    """The NCHW[L]c output of ``geo`` as a call of the C kernel ``entry``: (data, weights,
    bias, residual (the output itself when None), output, *args)."""
    inputs = [data, weight, bias] + ([residual] if residual is not None else [])

    def body(ins: list, outs: list) -> object:
        res = ins[3] if residual is not None else outs[0]
        call = tir.call_extern("int32", entry, ins[0].data, ins[1].data, ins[2].data, res.data,
                               outs[0].data, *args, header=header)
        # run-time tiles: each shared choice (the tile width...) computed once, before the call
        return let_shared(call, lambda c: succeeds(
            c, f"{name}: {entry} failed (parallel launch or workspace)"), "ember_tile")

    shape = (geo.n, geo.oc // geo.lanes, geo.oh, geo.ow, geo.lanes)
    return te.extern(shape, inputs, body, name=name, tag="conv2d_nchwc")


@dataclass(frozen=True)
class DepthwiseTiles:
    """The depthwise kernel's work split (its register tile is fixed): ``strip`` output
    columns per work item, ``threads`` 1 to split the items over threads."""

    strip: int
    threads: int


def depthwise_tiles(geo: ConvGeometry, level: SimdLevel) -> DepthwiseTiles:
    """The tuning record's split for exactly this call, else the cost model's: whole rows,
    threads above ``PARALLEL_MACS`` multiply-adds with at least two rows of blocks."""
    items = geo.n * (geo.oc // geo.lanes) * geo.oh
    big = conv_macs(geo) >= tir.const(PARALLEL_MACS, "int64")
    threads = static_or_expr(tir.cast(tir.all(big, tir.convert(items) >= 2), "int32"))
    model = DepthwiseTiles(static_or_expr(tir.max(geo.ow, 1)), threads)
    if not geo.static:
        return model
    return tile_records.lookup("depthwise_nchwc", conv_key(geo), level, model,
                               lambda tiles: _check_split(tiles.strip, tiles.threads, geo))


def depthwise_sizes(geo: ConvGeometry) -> list[int]:
    """The size arguments of ``ember_depthwise_nchwc_x<L>`` for ``geo``, in the header's
    order."""
    return [geo.n, geo.oc // geo.lanes, geo.h, geo.w, geo.oh, geo.ow, geo.kh, geo.kw,
            *geo.strides, *geo.dilation, geo.padding[0], geo.padding[1]]


def depthwise_nchwc(data: te.Tensor, weight: te.Tensor, bias: te.Tensor,
                    residual: te.Tensor | None, geo: ConvGeometry, level: SimdLevel,
                    act: str = "none", clip: tuple[float, float] = (0.0, 0.0),
                    act_after_add: bool = True) -> te.Tensor:
    """Depthwise conv2d (multiplier 1) in NCHW[L]c with its epilogue."""
    lanes = geo.lanes
    _check_lanes(lanes, "depthwise_nchwc")
    flags = (RESIDUAL | (ACT_AFTER_ADD if act_after_add else 0)) if residual is not None else 0
    tiles = depthwise_tiles(geo, level)
    tail = _epilogue(act, clip, flags) + [tiles.strip, tiles.threads]
    ints = depthwise_sizes(geo)
    inputs = [data, weight, bias] + ([residual] if residual is not None else [])

    def body(ins: list, outs: list) -> object:
        res = ins[3] if residual is not None else outs[0]
        entry = f"ember_depthwise_nchwc_x{lanes}"
        return succeeds(tir.call_extern("int32", entry, ins[0].data, ins[1].data, ins[2].data,
                                        res.data, outs[0].data, *ints, *tail, header=HEADER),
                        f"T_depthwise_nchwc: {entry} failed (parallel launch)")

    shape = (geo.n, geo.oc // lanes, geo.oh, geo.ow, lanes)
    return te.extern(shape, inputs, body, name="T_depthwise_nchwc", tag="conv2d_nchwc")


def pack_weight(weight: np.ndarray, lanes: int, in_block: int) -> np.ndarray:
    """OIHW weight (I: input channels of a group) -> ``[O/L, I/CB, KH, KW, CB, L]``."""
    o, i, kh, kw = weight.shape
    if o % lanes or i % in_block:
        raise OpError(f"pack_weight: weight {weight.shape} does not split into {lanes} output "
                      f"and {in_block} input lanes")
    blocks = weight.reshape(o // lanes, lanes, i // in_block, in_block, kh, kw)
    return np.ascontiguousarray(blocks.transpose(0, 2, 4, 5, 3, 1))


def to_blocked(x: np.ndarray, lanes: int) -> np.ndarray:
    """NCHW -> NCHW[lanes]c (numpy, for constants and tests)."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // lanes, lanes, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    """NCHW[L]c -> NCHW (numpy)."""
    n, cb, h, w, lanes = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * lanes, h, w))
