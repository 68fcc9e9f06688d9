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

import numpy as np

__all__ = ["pad_axis", "pad_output"]


def pad_output(channels: int, lanes: int, taps: int) -> bool:
    """Whether a conv of ``channels`` output channels (not a multiple of ``lanes``) and
    ``taps`` kernel taps (kh * kw) is worth padding to whole blocks of ``lanes``.

    Measured (``benchmarks/bench_channel_pad.py``, AVX2, 1 thread, thread CPU time, against
    the plain ``nn.conv2d``): 256->150 1x1 on 64x64 7.2 vs 10.7 ms, 64->21 3x3 1.6 vs 2.0 ms,
    64->2 3x3 1.1 vs 1.6 ms, a 150- or 255-channel result read by the next conv 2x faster;
    but 64->1 1x1 0.33 vs 0.12 ms: a 1x1 conv that would compute more padded lanes than
    real ones stays plain."""
    return taps > 1 or 2 * channels > lanes


def pad_axis(arr: np.ndarray, axis: int, lanes: int) -> np.ndarray:
    """``arr`` with zeros appended along ``axis`` up to a multiple of ``lanes``."""
    extra = -arr.shape[axis] % lanes
    if extra == 0:
        return arr
    widths = [(0, 0)] * arr.ndim
    widths[axis] = (0, extra)
    return np.pad(arr, widths)
