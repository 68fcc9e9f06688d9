"""conv2d to few output channels in NCHW[L]c: a call of ``ember_conv2d_fewoc_x<CB>``
(``ember/include/ember/kernels/conv_fewoc.h``).

A conv whose output is one block of 4 or 8 channels over an input in wider blocks (CB = 8
or 16 lanes: the phase convs of a transposed conv to one channel, as DBNet's head ends; heads
to a few channels; or the phase conv of a transposed conv whose 9 to 15 phase channels are
padded to one block as wide as the input's: DCGAN's 128 -> 3, 12 phase channels) runs the blocked kernel at OC lanes per FMA, a broadcast per input channel
each. This kernel vectorises over the input block's channel lanes instead, with a tile of
``CB / OC`` pixels x OC accumulators whose lanes are summed at the end of the reduction, so
every FMA is full width (DBNet's 64 -> 4 phase conv at 320x320 on one AVX-512 core: figures
in the commit that added it). :func:`fewoc_applies` is the selection, called first by
``conv2d_nchwc``; the layouts are that kernel's (weight packed by ``pack_weight``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...target.simd import SimdLevel
from ...te import tensor as te
from ...tir import op as tir
from .sizes import static_or_expr, succeeds

if TYPE_CHECKING:
    from .conv2d_nchwc import ConvGeometry

HEADER = "ember/kernels/conv_fewoc.h"
IN_BLOCKS = (8, 16)  # input block widths the header instantiates
OUT_BLOCKS = (4, 8)  # output channels (one block) its register tiles take
PARALLEL_MACS = 1 << 16  # as conv2d_nchwc's: below this the call runs on one thread


@dataclass(frozen=True)
class Interleave:
    """Where a phase conv's outputs go in its transposed conv's NCHW output: the strides
    (sh, sw), the offset (off_h, off_w) of the crop in the first phase row, and the output's
    (OH, OW) (``nn.contrib_conv2d_transpose_interleave``'s attributes); ``channels`` the
    phase conv's real channels when zero channels pad them to the block (0: none do)."""

    strides: tuple[int, int]
    offset: tuple[int, int]
    out: tuple[int, int]
    channels: int = 0


def fewoc_takes(oc: int, lanes: int, in_block: int, groups: int,
                interleaved: bool = False) -> bool:
    """Whether a conv of ``oc`` output channels in blocks of ``lanes``, over input blocks of
    ``in_block`` channels, runs on the few-output-channel kernel: one ungrouped output block
    of 4 or 8 channels, narrower than the input's block of 8 or 16 (a full-width output
    block already fills the blocked kernel's vectors); ``interleaved`` (a transposed conv's
    phase conv, its channels padded to the block: 12 of DCGAN's conv to 3) also a block as
    wide as the input's, a tile of one pixel."""
    if interleaved and groups == 1 and oc == lanes == in_block and in_block in IN_BLOCKS:
        return True
    return (groups == 1 and in_block in IN_BLOCKS and oc == lanes and lanes in OUT_BLOCKS
            and lanes < in_block)


def fewoc_applies(geo: ConvGeometry, level: SimdLevel, residual: bool) -> bool:
    """Whether ``geo`` runs on the few-output-channel kernel (:func:`fewoc_takes`, no
    residual, a SIMD build)."""
    return (level.name != "scalar" and not residual
            and fewoc_takes(geo.oc, geo.lanes, geo.in_block, geo.groups))


def conv2d_fewoc(data: te.Tensor, weight: te.Tensor, bias: te.Tensor, geo: ConvGeometry,
                 epilogue: list, interleave: Interleave | None = None) -> te.Tensor:
    """The NCHW[OC]c output of ``geo`` with its bias and activation (``epilogue``: the
    activation code and its two parameters, as ``conv2d_nchwc._epilogue`` gives them, and
    the residual flags, which must be 0); with ``interleave``, ``geo`` is the phase conv of
    a transposed conv and the result that conv's plain NCHW output, each phase's outputs
    written straight to their places (conv_fewoc.h)."""
    g = geo
    macs = tir.const(g.oc * (g.ic // g.in_block) * g.in_block * g.kh * g.kw, "int64") * \
        tir.cast(g.n, "int64") * tir.cast(g.oh, "int64") * tir.cast(g.ow, "int64")
    rows = tir.convert(g.n) * g.oh
    threads = static_or_expr(tir.cast(tir.all(macs >= tir.const(PARALLEL_MACS, "int64"),
                                              rows >= 2), "int32"))
    act, lo, hi, _flags = epilogue
    il = interleave or Interleave((0, 0), (0, 0), (0, 0))
    sizes = [g.n, g.ic // g.in_block, g.h, g.w, g.oc, g.oh, g.ow, g.kh, g.kw, *g.strides,
             *g.dilation, g.padding[0], g.padding[1], act, lo, hi, threads, *il.strides,
             *il.offset, *il.out, il.channels or g.oc]

    def body(ins: list, outs: list) -> object:
        entry = f"ember_conv2d_fewoc_x{g.in_block}"
        return succeeds(tir.call_extern("int32", entry, ins[0].data, ins[1].data, ins[2].data,
                                        outs[0].data, *sizes, header=HEADER),
                        f"T_conv2d_fewoc: {entry} failed (workspace or parallel launch)")

    if interleave is not None:
        phases = interleave.strides[0] * interleave.strides[1]
        shape: tuple = (g.n, (interleave.channels or g.oc) // phases, *interleave.out)
    else:
        shape = (g.n, 1, g.oh, g.ow, g.lanes)
    return te.extern(shape, [data, weight, bias], body, name="T_conv2d_fewoc",
                     tag="conv2d_nchwc")
