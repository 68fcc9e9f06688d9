"""Channel counts that do not split into SIMD blocks, for AlterOpLayout's planning.

A conv with 150 output channels (SegFormer's classes), 255 (a YOLO head: 3 * (80 + 5)) or
21 (VOC classes) does not fill whole NCHW[L]c blocks. Rather than leave it as a plain
``nn.conv2d`` (no blocked kernel), the planner pads its weight and bias with zeros to whole
blocks at build time; the blocked kernel computes the padded lanes as zeros (plus the
epilogue's activation of zero) and the ``layout_transform`` back to NCHW is followed by a
``strided_slice`` that drops them. A padded result read by another conv stays blocked: that
conv's weight gets zero input channels for the padded lanes.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...ir.expr import Call, Constant, RelayExpr
from ...ir.op import Op

__all__ = ["feeds_conv", "pad_axis", "pad_output", "pads_over_half_blocks"]


def pad_output(channels: int, lanes: int, taps: int, in_channels: int,
               feeds_conv: bool) -> bool:
    """Whether a conv of ``channels`` output channels (not a multiple of ``lanes``), ``taps``
    kernel taps (kh * kw) and ``in_channels`` input channels is worth padding to whole blocks
    of ``lanes``; ``feeds_conv``: its result is read by another conv (which then reads it
    blocked instead of channel by channel).

    Measured (``benchmarks/bench_channel_pad.py``, AVX2, 1 thread, thread CPU time, padded
    against the plain ``nn.conv2d``): 256->150 1x1 on 64x64 6.7 vs 11.2 ms, 64->21 3x3 1.5 vs
    1.9 ms, 64->2 3x3 1.1 vs 1.6 ms, 64->255 1x1 then 255->64 1x1 1.6 vs 3.5 ms; but a 1x1
    conv that would compute more padded lanes than real ones stays plain (64->1: 0.33 vs
    0.12 ms), and so does a cheap one whose result only leaves the blocked world (fewer than
    64 taps x input channels: the transforms around it cost what the blocked kernel saves).
    YOLOv5n's 64->255 1x1 head on 40x40 into its detect decode pays since the decode no
    longer runs a select chain per element (whole model, 1 thread, interleaved: 11.36-11.70
    ms padded against 11.53-12.14 plain with AVX-512, 18.02 against 18.39 with AVX2; with
    the old decode, 1.12 ms padded against 1.01 plain for the head alone)."""
    if taps == 1 and 2 * channels <= lanes:
        return False
    return feeds_conv or taps * in_channels >= 64


def pads_over_half_blocks(channels: int, lanes: int, taps: int, in_channels: int,
                          share: int = 16, min_sum: int = 256) -> bool:
    """Whether a conv whose ``channels`` split into blocks of ``lanes // 2`` but not of
    ``lanes`` is better padded to whole blocks of ``lanes`` than run in the half blocks: when
    the padded lanes add at most 1 / ``share`` to its work and each output sums enough taps
    (``taps * in_channels``, ``min_sum`` or more) that the transform back of a padded result costs little beside
    it. Half blocks run the kernel at half the vector width: squeezenet's classifier 1x1
    512->1000 at 13x13 on AVX-512 (one thread, thread CPU time, conv + relu alone) 2007 us
    in NCHW8c against 1150 us padded to 1008 channels in NCHW16c. A conv reading the padded
    result skips the zero-weight lanes of its last input block (conv_nchwc.h's
    ember_conv_live_lanes), so only the producer pays them: with ``share`` 8, HRNet's
    72-channel branch (3x3 72->72 at 16x12, 1.28x onnxruntime's time in NCHW8c) runs in 80
    padded channels at onnxruntime's (whole model 20.4 -> 18.6 ms, one thread, Zen 5).
    MobileNetV2's 24 channels
    (32 padded: a third more) keep their half blocks, whose residual adds stay blocked."""
    extra = -channels % lanes
    return 0 < extra <= lanes // 2 and channels % (lanes // 2) == 0 and \
        share * extra <= channels and taps * in_channels >= min_sum


def feeds_conv(node: RelayExpr, readers: Mapping[int, list[RelayExpr]],
               through: frozenset[str]) -> bool:
    """Whether ``node``'s value is the data of an ungrouped or depthwise ``nn.conv2d``
    (which takes a padded value blocked), directly or through a chain of single readers
    among ``through`` (the ops a conv epilogue absorbs)."""
    for _ in range(8):  # an epilogue is a few ops long
        found = readers.get(id(node), [])
        if any(_is(r, "nn.conv2d") and r.args[0] is node and
               (r.attrs.groups == 1 or _depthwise(r)) for r in found):
            return True
        if len(found) != 1 or not _is(found[0], *through):
            return False
        node = found[0]
    return False


def _depthwise(conv: Call) -> bool:
    # a constant weight only (the planner blocks no other): its shape is concrete
    weight = conv.args[1]
    return conv.attrs.groups > 1 and isinstance(weight, Constant) and \
        tuple(weight.data.shape[:2]) == (conv.attrs.groups, 1)


def _is(e: RelayExpr, *names: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in names


def pad_axis(arr: np.ndarray, axis: int, lanes: int) -> np.ndarray:
    """``arr`` with zeros appended along ``axis`` up to a multiple of ``lanes``."""
    extra = -arr.shape[axis] % lanes
    if extra == 0:
        return arr
    widths = [(0, 0)] * arr.ndim
    widths[axis] = (0, extra)
    return np.pad(arr, widths)
