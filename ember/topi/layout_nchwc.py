"""layout_transform between NCHW and NCHW[L]c as a call of ember's blocked-copy kernel
(``ember/include/ember/kernels/layout_nchwc.h``): each channel block is an L x HW matrix on
one side and its transpose on the other, copied in tiles (8x8 blocks in registers with AVX),
at about memory bandwidth; channels that are not a multiple of L (a padded last block) get
zeros in its other lanes, or lose them on the way back (``channel_prefix``: a slice of the
first channels of a copy back is the copy itself). The generic lowering (``topi.transform.layout_transform``) computes
one element at a time and stays for every other pair of layouts, for run-time sizes, and where
the transform reads another kernel's result inlined into it (a fused producer)."""
from __future__ import annotations

import re

from ..te import tensor as te
from ..tir import op as tir
from .nn.sizes import dims

HEADER = "ember/kernels/layout_nchwc.h"
PARALLEL_ELEMENTS = 1 << 16  # below this the copy runs on the calling thread (a few us)
_BLOCKED = re.compile(r"^NCHW(\d+)c$")


def blocked_copy(src_layout: str, dst_layout: str) -> tuple[int, bool] | None:
    """(block, to_blocked) when the pair is NCHW -> NCHW[L]c or the reverse, else None."""
    for layout, to_blocked in ((dst_layout, True), (src_layout, False)):
        other = src_layout if to_blocked else dst_layout
        m = _BLOCKED.match(layout)
        if other == "NCHW" and m and int(m.group(1)) > 0:
            return int(m.group(1)), to_blocked
    return None


def layout_nchwc(x: te.Tensor, src_layout: str, dst_layout: str,
                 shape: tuple) -> te.Tensor | None:
    """The transform of ``x`` (a function input, float32, static shape) through the kernel;
    None when the kernel does not apply. ``shape``: the output shape. To NCHW[L]c, channels
    that are not a multiple of L fill the last block's remaining lanes with zeros."""
    pair = blocked_copy(src_layout, dst_layout)
    sizes = dims(x.shape)
    if pair is None or x.dtype != "float32" or not isinstance(x.op, te.PlaceholderOp) or not all(
            isinstance(d, int) for d in sizes):
        return None
    block, to_blocked = pair
    n, c, h, w = (sizes[0], sizes[1] * block, *sizes[2:4]) if not to_blocked else sizes
    return _kernel_call(x, (n, c, h, w), block, to_blocked, tuple(shape))


def channel_prefix(x: te.Tensor, starts: list, steps: list, shape: list) -> te.Tensor | None:
    """``x[:, :c]`` (``starts``, ``steps``, ``shape``: a strided_slice of ``x`` per axis) as
    one kernel call, when ``x`` is the kernel's NCHW[L]c -> NCHW copy and the slice keeps the
    first c channels and everything else: the padded lanes of a last block are dropped by the
    copy itself (AlterOpLayout slices them off a conv whose channels it padded). Else None."""
    if not (isinstance(x.op, te.ExternOp) and x.op.tag == "layout_nchwc" and x.ndim == 4):
        return None
    src = x.op.inputs[0]
    sizes, (n, c, h, w) = dims(src.shape), dims(shape)
    if any(b != 0 for b in dims(starts)) or any(s != 1 for s in steps) or (n, h, w) != tuple(
            sizes[i] for i in (0, 2, 3)) or not (isinstance(c, int) and 0 < c <= sizes[1] *
                                                  sizes[4]):
        return None
    return _kernel_call(src, (n, c, h, w), sizes[4], False, (n, c, h, w))


def _kernel_call(x: te.Tensor, nchw: tuple[int, int, int, int], block: int, to_blocked: bool,
                 shape: tuple) -> te.Tensor:
    """ember_layout_nchwc on ``x``; ``nchw``: the sizes of the NCHW side (c not necessarily a
    multiple of ``block``)."""
    n, c, h, w = nchw
    threads = int(n * c * h * w >= PARALLEL_ELEMENTS and n * -(-c // block) >= 2)

    def body(ins: list, outs: list) -> object:
        return tir.call_extern("int32", "ember_layout_nchwc", ins[0].data, outs[0].data, n, c,
                               h * w, block, int(to_blocked), threads, header=HEADER)

    return te.extern(shape, [x], body, name="T_layout_trans", tag="layout_nchwc")
