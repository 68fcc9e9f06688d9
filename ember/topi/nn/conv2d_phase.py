"""A transposed conv on a small map, phase by phase: a call of ``ember_conv2d_phase_x<L>``
(``ember/include/ember/kernels/conv_phase.h``).

The phase decomposition (``conv2d_transpose.py``) runs as one blocked conv of all ``s*s``
phases' channels, then an interleave. On a small map with big weights (DCGAN's 1024 -> 512
4x4/2 at 4x4: 33.5 MB of weights for 16 output pixels per phase) that conv streams every
weight block once per output row, and computes ``(Q+1)^2`` pixels per phase where a phase
needs ``Q^2``. This kernel computes each phase over exactly its pixels, in register tiles
that cover several rows of the map (a whole 4x4 map: each weight read once), and writes the
outputs with their bias and activation straight into the NCHW[L]c output.

:func:`phase_kernel_takes` is the selection (AlterOpLayout asks it); :func:`choose_tile`
picks the register tile at build time, :func:`pack_phase_weight` packs the weights for it.
"""
from __future__ import annotations

import numpy as np

from ...te import tensor as te
from ...tir import op as tir
from .conv2d_nchwc import pack_weight
from .gemm_kernel import ACTIVATIONS as GEMM_ACTIVATIONS
from .sizes import succeeds

HEADER = "ember/kernels/conv_phase.h"
LANES = (8, 16)  # the lane counts the header instantiates
# the register tiles (R rows, C columns of a phase's map, RB output blocks), in the order of
# EMBER_PHASE_TILES in conv_phase.h; the C kernel's tile index is the position here
TILES = ((1, 8, 3), (2, 4, 3), (4, 2, 3), (1, 12, 2), (2, 6, 2), (4, 4, 1), (1, 4, 1),
         (3, 4, 1), (1, 6, 2), (2, 2, 3))
# per lane count (16: AVX-512's 32 registers, 8: AVX2's 16), the tiles a build picks from
# and their measured rate relative to the best (one core, DCGAN's 4x4 and 8x8 layers in a
# harness). AVX-512: the 4x4x1 tile led on every map (one weight vector per 16 FMAs, every
# weight read once on a 4x4 map), the three-block ones ran 5-10% slower, the others 25-45%.
# AVX2 (haswell build): 4x4x1 and 2x2x3 alike, 3x4x1 5-25% and 1x6x2 15-25% slower.
TILE_SPEED = {16: {0: 0.92, 1: 0.92, 2: 0.93, 3: 0.7, 4: 0.75, 5: 1.0, 6: 0.6},
              8: {5: 1.0, 7: 0.85, 8: 0.8, 9: 0.97}}
MAX_PHASES = 16  # the kernel's per-phase tables (strides up to 4 x 4)
# the largest phase map (pixels) taken, per lane count. DCGAN's layers on one AVX-512 core,
# this kernel vs the blocked conv and its interleave: 4x4 maps 2120 vs 3890 us, 8x8 2100 vs
# 2250 (2300-2370 vs 2500-2580 on a loaded machine), 16x16 2100 vs 1975 (the blocked
# kernel's row tiles run at a higher rate there, which outweighs the 13% of extra pixels it
# computes). AVX2 (haswell build): 4x4 4460 vs 5980-6960; 8x8 4050-4150 vs 4260-4370, but
# the 16x16 layer after it then ran 10% slower (3590 vs 3220-3260 us, its kernel unchanged),
# a net loss: AVX2 takes 4x4 maps only
MAX_MAP_PIXELS = {16: 64, 8: 16}
PARALLEL_MACS = 1 << 16  # as conv2d_nchwc's: below this the call runs on one thread


def phase_ranges(out: int, stride: int, offset: int) -> list[tuple[int, int]]:
    """Per phase residue ``r`` along one axis: (first map row, rows) of the output rows
    ``y = q * stride + r - offset`` in ``[0, out)`` (conv_phase.h's ember_phase_range)."""
    ranges = []
    for r in range(stride):
        first = max(0, -(-(offset - r) // stride))
        y = first * stride + r - offset
        ranges.append((first, -(-(out - y) // stride) if y < out else 0))
    return ranges


def choose_tile(maps: list[tuple[int, int]], ocb: int, lanes: int = 16) -> int:
    """The register tile (an index of :data:`TILES`) for phase maps ``maps`` (rows, columns
    of each phase), ``ocb`` output blocks and ``lanes``: the least computed work (tiles
    overhanging a map, blocks padded to the tile's) over the tile's measured speed."""
    speed = TILE_SPEED[lanes]

    def cost(index: int) -> float:
        r, c, rb = TILES[index]
        pixels = sum(-(-h // r) * r * -(-w // c) * c for h, w in maps)
        return pixels * -(-ocb // rb) * rb / speed[index]

    return min(speed, key=cost)


def phase_kernel_takes(lanes: int, in_block: int, oc: int, groups: int, taps: tuple[int, int],
                       phases: int, map_pixels: int, static: bool, simd: bool) -> bool:
    """Whether a transposed conv runs on this kernel: ungrouped, output channels in whole
    blocks of 8 or 16 lanes, the input in blocks of the same lanes, static sizes, a SIMD
    build, a kernel wider than its stride (phase convs of more than one tap, where the
    blocked conv computes the crop's extra row and column) and phase maps of at most
    :data:`MAX_MAP_PIXELS` pixels for the lanes."""
    return (simd and static and groups == 1 and lanes in LANES and in_block == lanes
            and oc % lanes == 0 and taps != (1, 1) and phases <= MAX_PHASES
            and 0 < map_pixels <= MAX_MAP_PIXELS[lanes])


def pack_phase_weight(weights: np.ndarray, lanes: int, rb: int) -> np.ndarray:
    """The kernel's weight ``[S, OCBp, IC/L, TH, TW, L, L]`` from the phases' OIHW weights
    ``(S, OC, IC, TH, TW)`` (``conv2d_transpose.phase_weights``): each phase packed as the
    blocked conv's (``conv2d_nchwc.pack_weight``), its output blocks padded with zero blocks
    to a multiple of the tile's ``rb``."""
    packed = np.stack([pack_weight(w, lanes, lanes) for w in weights])
    ocb = packed.shape[1]
    pad = -ocb % rb
    if pad:
        packed = np.concatenate([packed, np.zeros((packed.shape[0], pad, *packed.shape[2:]),
                                                  packed.dtype)], axis=1)
    return np.ascontiguousarray(packed)


def pack_phase_bias(bias: np.ndarray, phases: int, lanes: int, rb: int) -> np.ndarray:
    """The kernel's bias ``[S * OCBp * L]`` from the phase conv's ``[S * OC]`` (phase
    major), zeros for the padded blocks."""
    per = bias.reshape(phases, -1)
    pad = -(per.shape[1] // lanes) % rb * lanes
    return np.ascontiguousarray(np.pad(per, ((0, 0), (0, pad))).reshape(-1)).astype("float32")


def activation_code(act: str, clip: tuple[float, float]) -> tuple[int, float, float]:
    """gemm_epilogue.h's code and parameters for a conv epilogue's activation (the names of
    ``conv2d_nchwc.ACTIVATIONS``)."""
    if act == "hardswish":
        return GEMM_ACTIVATIONS["hardswish"], 1.0 / 6.0, 0.0
    return GEMM_ACTIVATIONS[act], float(clip[0]), float(clip[1])


def conv2d_phase(data: te.Tensor, weight: te.Tensor, bias: te.Tensor, attrs: object,
                 out_shape: tuple[int, ...]) -> te.Tensor:
    """The transposed conv's NCHW[L]c output ``out_shape`` from NCHW[L]c ``data``, the packed
    ``weight`` and ``bias`` (:func:`pack_phase_weight`), with the phase plan, tile and
    activation of ``attrs`` (``nn.contrib_conv2d_transpose_phased``'s)."""
    a = attrs
    n, icb, h, w, lanes = (int(d) for d in data.shape)  # type: ignore[call-overload]
    th, tw = (int(d) for d in weight.shape[3:5])  # type: ignore[call-overload]
    ocb = out_shape[1]
    act, p0, p1 = activation_code(a.activation, (a.clip_min, a.clip_max))  # type: ignore[attr-defined]
    (sh, sw), (qh, qw) = a.strides, a.rows  # type: ignore[attr-defined]
    macs = n * sh * sw * qh * qw * ocb * lanes * icb * lanes * th * tw
    sizes = [n, icb, h, w, ocb, th, tw, a.padding[0], a.padding[1], qh, qw, sh, sw,  # type: ignore[attr-defined]
             *a.offset, *a.out_size, act, tir.const(p0, "float32"),  # type: ignore[attr-defined]
             tir.const(p1, "float32"), a.tile, int(macs >= PARALLEL_MACS)]  # type: ignore[attr-defined]

    def body(ins: list, outs: list) -> object:
        return succeeds(tir.call_extern("int32", f"ember_conv2d_phase_x{lanes}", ins[0].data,
                                        ins[1].data, ins[2].data, outs[0].data, *sizes,
                                        header=HEADER),
                        f"ember_conv2d_phase_x{lanes} failed (out of workspace memory, threads "
                        "or an unknown tile)")

    return te.extern(out_shape, [data, weight, bias], body, name="T_conv2d_transpose_phased",
                     tag="conv2d_nchwc")
