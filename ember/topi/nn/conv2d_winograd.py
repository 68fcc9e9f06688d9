"""3x3 stride-1 dense conv2d in NCHW[L]c by Winograd's minimal filtering F(m x m, 3x3), as a
call of ember's C kernel (``ember/include/ember/kernels/conv_winograd.h``).

F(2x2, 3x3) computes each 2x2 output tile with 16 products per channel pair instead of 36,
F(4x4, 3x3) each 4x4 tile with 36 instead of 144: the input patches and the output tiles are
transformed (vector adds over the L channel lanes) and the products become a*a GEMMs
(a = m + 2) over the channels. Layouts (``L`` = lanes):

- data ``[N, IC/L, H, W, L]``; bias ``[OC]``; output and residual ``[N, OC/L, OH, OW, L]``;
- weight ``U[a*a, OC/L, IC, L]``: ``G g G^T`` of every (output, input) channel's 3x3 filter,
  computed here in float64 (:func:`transform_weight`).

:func:`winograd_tile` is the selection: whether a conv runs here and with which m, from the
geometry alone (a cost model measured on this machine: ``benchmarks/bench_winograd.py``).
The layout planner (``relay.transform.AlterOpLayout``) asks it for each 3x3 conv it blocks;
``relay.backend.use_winograd`` (PassContext config; default on, off for a scalar build)
turns it off.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from .conv2d_nchwc import (ACT_AFTER_ADD, L2_BYTES, LANES, PARALLEL_MACS, RESIDUAL,
                           ConvGeometry, _epilogue, conv_extern)
from .sizes import ceildiv, i64, is_static, static_or_expr

HEADER = "ember/kernels/conv_winograd.h"
CONFIG = "relay.backend.use_winograd"  # PassContext switch (default on but for scalar builds)
TILE_SIZES = (2, 4)  # the m the kernel implements
# the filter transforms G (a x 3), Lavin & Gray's points 0, +-1, (+-2), infinity
_G = {2: np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], "float64"),
      4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                   [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], "float64")}
# B^T (a x a) and A^T (m x a), as the kernel's tables (conv_winograd.h)
_BT = {2: [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
       4: [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
           [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]}
_AT = {2: [[1, 1, 1, 0], [0, 1, -1, -1]],
       4: [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]}
# selection (measured: benchmarks/bench_winograd.py; see predicted_speedup)
MIN_CHANNELS = 32
MIN_SPEEDUP = 1.15  # below this the direct kernel stays (the model is +-20%)
E_M4, E_M2 = 0.7, 0.9
U_CACHED_BYTES = 16 << 20  # transformed weights that stay in the last-level cache
# the workspace of one work item (V and M) is sized for this (the L2 of one core)
ITEM_BYTES = L2_BYTES
MIN_TILES, MAX_TILES = 18, 96  # tiles per item: fewer re-read U per few tiles (512->512 at
# 14x14, F(4,3): 6 tiles 3.5 ms, 18-24 tiles 2.2 ms), more gain nothing
PROBE_SIDES = (8, 16, 32, 64)  # a run-time side's lengths the selection judges it at
TILE_RW = 6  # the GEMM register tile width in tiles (EMBER_WINO_RW; 3 for 16 lanes on AVX2)


@dataclass(frozen=True)
class WinogradTiles:
    """A kernel call's schedule: ``tiles`` output tiles and ``blocks`` output blocks per work
    item, ``threads`` 1 to split the items over threads."""

    tiles: int
    blocks: int
    threads: int


def applies(geo: ConvGeometry) -> bool:
    """Whether the kernel can run ``geo``: a dense 3x3 stride-1, dilation-1 conv over a
    channel-blocked input whose block is the output's (padding 0..2 a side)."""
    return (geo.kh == geo.kw == 3 and geo.strides == (1, 1) and geo.dilation == (1, 1)
            and geo.groups == 1 and geo.lanes in LANES and geo.in_block == geo.lanes
            and geo.ic % geo.lanes == 0 and geo.oc % geo.lanes == 0
            and all(0 <= p <= 2 for p in geo.padding))


def winograd_tile(geo: ConvGeometry) -> int:
    """The m of F(m x m, 3x3) for ``geo``, or 0 to keep the direct kernel: the m of the larger
    :func:`predicted_speedup`, if that reaches :data:`MIN_SPEEDUP`. Both channel counts must
    reach :data:`MIN_CHANNELS`. A map of run-time size is judged at each of
    :data:`PROBE_SIDES` for its run-time sides: the m of the larger geometric mean of the
    predicted gains, if that reaches :data:`MIN_SPEEDUP` and no size is predicted slower
    than the direct kernel (512->512: F(4, 3) loses on an 8x8 map, so F(2, 3); a static
    side of 1 row, a CRNN's, gains with neither)."""
    if not applies(geo) or min(geo.ic, geo.oc) < MIN_CHANNELS:
        return 0
    if not is_static(geo.oh, geo.ow):
        gains = {m: [predicted_speedup(_probe(geo, side), m) for side in PROBE_SIDES]
                 for m in TILE_SIZES}
        mean = {m: float(np.prod(g)) ** (1 / len(g)) for m, g in gains.items() if min(g) >= 1}
        best = max(mean, key=mean.get, default=0)
        return best if best and mean[best] >= MIN_SPEEDUP else 0
    best = max(TILE_SIZES, key=lambda m: predicted_speedup(geo, m))
    return best if predicted_speedup(geo, best) >= MIN_SPEEDUP else 0


def _probe(geo: ConvGeometry, side: int) -> ConvGeometry:
    """``geo`` with each run-time output side ``side`` long (static sizes, batch 1)."""
    oh, ow = (d if is_static(d) else side for d in (geo.oh, geo.ow))
    return replace(geo, n=1, h=oh + 2, w=ow + 2, oh=oh, ow=ow, padding=(0, 0, 0, 0))


def predicted_speedup(geo: ConvGeometry, m: int) -> float:
    """The direct kernel's time over the Winograd kernel's for ``geo`` (static sizes), a model
    fitted to benchmarks/bench_winograd.py's shapes on one Zen 4 core (AVX-512):
    ``r * e / (1 + c / T)`` where

    - ``r``: the direct multiply-adds over the GEMMs' (``9 OH OW`` against ``a^2`` per tile,
      the tiles of an item rounded up to the register tile's :data:`TILE_RW`: a 4x4 map is one
      F(4, 3) tile padded to 6, r = 0.67; measured 0.67);
    - ``e``: the share of that left after the transforms, which cost per channel what the
      GEMMs cost per channel pair: ``E_M4 c / (c + 16)`` (``E_M2`` for F(2, 3)), c the smaller
      channel count (measured F(4, 3): 0.33 at 16 channels, 0.44 at 32, 0.5-0.65 at 64,
      0.6-0.9 from 128; F(2, 3): 0.7-0.9 from 64);
    - ``c / T``: the transformed weights streamed once per work item of T (padded) tiles:
      c = 1 where they fit :data:`U_CACHED_BYTES` x L / 16, else 5 (512->512 at 7x7: 37 MB for
      F(4, 3) read for every 4 tiles, 0.68-0.77x the direct kernel's speed, predicted 0.76;
      256->256 at 7x7, 9 MB: 1.29x)."""
    a, oh, ow = m + 2, int(geo.oh), int(geo.ow)
    tiles = -(-oh // m) * -(-ow // m)
    per_item = min(tiles, int(winograd_tiles(geo, m).tiles))
    def padded(k: int) -> int:
        return -(-k // TILE_RW) * TILE_RW

    gemm = (tiles // per_item * padded(per_item) + padded(tiles % per_item)) * a * a
    r = 9 * oh * ow / gemm
    c = min(geo.ic, geo.oc)
    e = (E_M4 if m == 4 else E_M2) * c / (c + 16)
    u_bytes = a * a * geo.ic * geo.oc * 4
    # the cache share scaled by the lanes: AVX2's 8 lanes ran 512->512 at 7x7 by F(2, 3)
    # (16 MB of U) at 0.70x the direct kernel's speed, AVX-512 at 1.15-1.28x
    stream = 1 if u_bytes <= U_CACHED_BYTES * geo.lanes // 16 else 5
    return r * e / (1 + stream / padded(per_item))


def plan_tile(weight_shape: tuple[int, ...], strides: tuple, padding: tuple, dilation: tuple,
              groups: int, lanes: int, in_block: int, out_hw: tuple) -> int:
    """:func:`winograd_tile` for the layout planner's conv: its OIHW weight's shape, its
    window attrs, blocks and output image (sizes may be symbolic; ``()``: unknown)."""
    oc, ic_g, kh, kw = weight_shape
    if (kh, kw) != (3, 3) or len(out_hw) != 2 or len(padding) != 4:
        return 0
    oh, ow = out_hw  # the selection reads the output's sizes, not the input's
    geo = ConvGeometry(1, ic_g * groups, oh, ow, oc, oh, ow, kh, kw, tuple(strides),
                       tuple(padding), tuple(dilation), groups, lanes, in_block)
    return winograd_tile(geo)


def winograd_tiles(geo: ConvGeometry, m: int) -> WinogradTiles:
    """Tiles per item so that an item's V (a*a x IC per tile) and M (a*a x blocks x L per
    tile) fill about :data:`ITEM_BYTES`, whole register tiles, within
    [:data:`MIN_TILES`, :data:`MAX_TILES`] and at most the image's, then evened out over the
    image's chunks; all output blocks per item (the kernel cuts chunks and block ranges finer
    where the items are too few for its tasks: conv_winograd.h ember_wino_share)."""
    a = m + 2
    ocb = geo.oc // geo.lanes
    per_tile = a * a * 4 * (geo.ic + geo.oc)
    tiles = max(MIN_TILES, min(MAX_TILES, ITEM_BYTES // per_tile // TILE_RW * TILE_RW))
    image_tiles = ceildiv(geo.oh, m) * ceildiv(geo.ow, m)
    chunks = ceildiv(image_tiles, tiles)
    # chunks of equal size (whole register tiles): 20 tiles in chunks of 18 gave two threads
    # 18 and 2 (crnn's 256->256 at 3x80); in chunks of 12, 12 and 8
    even = ceildiv(ceildiv(image_tiles, tir.max(chunks, 1)), TILE_RW) * TILE_RW
    tiles_e = tir.max(tir.min(even, image_tiles), 1)
    macs = i64(geo.n) * i64(image_tiles) * (a * a * geo.ic * geo.oc)
    threads = tir.cast(macs >= tir.const(PARALLEL_MACS, "int64"), "int32")
    return WinogradTiles(static_or_expr(tiles_e), ocb, static_or_expr(threads))


_TRANSFORM_CHUNK = 1 << 16  # filters per GEMM of transform_weight (float64 temporaries: 18 MB)


def transform_weight(weight: np.ndarray, m: int, lanes: int) -> np.ndarray:
    """OIHW 3x3 weight -> ``U[a*a, O/L, I, L]`` float32 (``G g G^T`` in float64)."""
    if m not in TILE_SIZES:
        raise OpError(f"conv2d_winograd: tile size {m} is not one of {TILE_SIZES}")
    o, i, kh, kw = weight.shape
    if (kh, kw) != (3, 3) or o % lanes:
        raise OpError(f"conv2d_winograd: weight {weight.shape} is not a 3x3 filter bank of "
                      f"whole blocks of {lanes} output channels")
    g, a = _G[m], m + 2
    # G g G^T of every filter as one GEMM: kron(G, G) [a*a, 9] times the filters [9, O*I]
    # (taken in the output's [O/L, I, L] order, so the result needs no reordering), in float64
    # chunks (an einsum took 0.3 s of resnet18's build; this, 0.03 s)
    kron = np.kron(g, g)
    flat = weight.reshape(o // lanes, lanes, i, 9).transpose(3, 0, 2, 1).reshape(9, o * i)
    u = np.empty((a * a, o * i), "float32")
    for start in range(0, o * i, _TRANSFORM_CHUNK):
        stop = start + _TRANSFORM_CHUNK
        u[:, start:stop] = kron @ flat[:, start:stop].astype("float64")
    return u.reshape(a * a, o // lanes, i, lanes)


def transforms(m: int) -> tuple[list, list]:
    """B^T and A^T of F(m x m, 3x3) (the data and output transforms; G: transform_weight)."""
    return _BT[m], _AT[m]


def conv2d_winograd(data: te.Tensor, weight: te.Tensor, bias: te.Tensor,
                    residual: te.Tensor | None, geo: ConvGeometry, m: int, act: str = "none",
                    clip: tuple[float, float] = (0.0, 0.0),
                    act_after_add: bool = True) -> te.Tensor:
    """The conv of ``geo`` (3x3, stride 1) by F(m x m, 3x3) with its epilogue."""
    if not applies(geo) or m not in TILE_SIZES:
        raise OpError(f"conv2d_winograd: the kernel takes dense 3x3 stride-1 convs over "
                      f"whole blocks with padding 0..2 and m in {TILE_SIZES}; got {geo}, m={m}")
    flags = (RESIDUAL | (ACT_AFTER_ADD if act_after_add else 0)) if residual is not None else 0
    tiles = winograd_tiles(geo, m)
    args = [geo.n, geo.ic // geo.lanes, geo.h, geo.w, geo.oc // geo.lanes, geo.oh, geo.ow,
            geo.padding[0], geo.padding[1], m, *_epilogue(act, clip, flags), tiles.tiles,
            tiles.blocks, tiles.threads]
    return conv_extern(f"ember_conv_winograd_x{geo.lanes}", HEADER, "T_conv2d_winograd", data,
                       weight, bias, residual, geo, args)
