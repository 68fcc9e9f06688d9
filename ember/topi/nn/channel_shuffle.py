"""A channel shuffle of two NCHW[L]c maps into an NCHW[L]c map through the C kernel of
``ember/include/ember/kernels/channel_shuffle.h``; :func:`reference` is the numpy oracle."""
from __future__ import annotations

import numpy as np

from ...te import tensor as te
from ...tir import op as tir
from .sizes import dims, succeeds

HEADER = "ember/kernels/channel_shuffle.h"
PARALLEL_ELEMENTS = 1 << 16  # below this the copy runs on the calling thread (a few us)
TILE = 64  # positions per work item (EMBER_SHUFFLE_TILE)


def _unblocked(x: np.ndarray, channels: int) -> np.ndarray:
    """The first ``channels`` channels of an NCHW[L]c array, as NCHW."""
    n, blocks, h, w, lanes = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, blocks * lanes, h, w)[:, :channels]


def reference(a: np.ndarray, b: np.ndarray, channels: tuple[int, int], groups: int,
              begin: int, end: int, lanes: int) -> np.ndarray:
    """Channels [begin, end) of shuffle(concat(a, b), groups) in NCHW[lanes]c, the lanes past
    end - begin zero."""
    x = np.concatenate([_unblocked(a, channels[0]), _unblocked(b, channels[1])], axis=1)
    n, c, h, w = x.shape
    y = x.reshape(n, groups, c // groups, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)
    kept = y[:, begin:end]
    blocks = -(-(end - begin) // lanes)
    out = np.zeros((n, blocks * lanes, h, w), a.dtype)
    out[:, :end - begin] = kept
    return np.ascontiguousarray(out.reshape(n, blocks, lanes, h, w).transpose(0, 1, 3, 4, 2))


def channel_shuffle_nchwc(a: te.Tensor, b: te.Tensor, channels: tuple[int, int], groups: int,
                          begin: int, end: int, lanes: int) -> te.Tensor:
    """The ``ember_channel_shuffle_nchwc`` stage: (N, ceil((end - begin) / lanes), H, W,
    lanes) from inputs in blocks of their own L (N may be a run-time size)."""
    n, _, h, w, block = dims(a.shape)
    blocks = -(-(end - begin) // lanes)
    hw = h * w
    per_batch = blocks * -(-hw // TILE)  # work items
    threads: object
    if isinstance(n, int):
        threads = int(n * blocks * lanes * hw >= PARALLEL_ELEMENTS and n * per_batch >= 2)
    else:  # a run-time batch: the same test, in the call
        threads = tir.cast(tir.all(n * (blocks * lanes * hw) >= PARALLEL_ELEMENTS,
                                   n * per_batch >= 2), "int32")

    def body(ins: list, outs: list) -> object:
        return succeeds(tir.call_extern(
            "int32", "ember_channel_shuffle_nchwc", ins[0].data, ins[1].data, outs[0].data, n,
            channels[0], channels[1], hw, block, lanes, groups, begin, end, threads,
            header=HEADER),
            "ember_channel_shuffle_nchwc failed (sizes or parallel launch)")

    return te.extern((n, blocks, h, w, lanes), [a, b], body, name="T_channel_shuffle",
                     dtype="float32", tag="channel_shuffle_nchwc")
