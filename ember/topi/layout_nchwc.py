"""layout_transform between NCHW or channels-last (NHWC; NWC, a transformer's tokens) and
NCHW[L]c as a call of ember's blocked-copy kernels
(``ember/include/ember/kernels/layout_nchwc.h``): for NCHW each channel block is an L x HW
matrix on one side and its transpose on the other, copied in tiles (8x8 blocks in registers
with AVX), at about memory bandwidth; channels that are not a multiple of L (a padded last
block) get zeros in its other lanes, or lose them on the way back (``channel_prefix``: a slice
of the first channels of a copy back is the copy itself). For channels-last a position's
channel block is L contiguous floats on both sides (one L-float move each). The generic
lowering (``topi.transform.layout_transform``) computes one element at a time and stays for
every other pair of layouts, for run-time channel counts (a run-time batch, height or width
is passed to the kernel, but for whole copies back to NCHW: see ``layout_nchwc``), and where
the transform reads another kernel's result inlined into it (a fused producer). A reshape of
a function input is no producer: it keeps the input's memory, so the kernel reads the input
itself."""
from __future__ import annotations

import math
import re

from ..te import tensor as te
from ..tir import op as tir
from .nn.sizes import dims, succeeds

HEADER = "ember/kernels/layout_nchwc.h"
PARALLEL_ELEMENTS = 1 << 16  # below this the copy runs on the calling thread (a few us)
TILE = 64  # positions per work item (EMBER_LAYOUT_TILE)
_BLOCKED = re.compile(r"^NC([A-Z]*)(\d+)c$")


def blocked_copy(src_layout: str, dst_layout: str) -> tuple[int, bool, bool] | None:
    """(block, to_blocked, channels_last) when the pair is NCHW -> NCHW[L]c, a channels-last
    layout (``N{spatial}C``: NHWC, NWC) -> ``NC{spatial}[L]c``, or the reverse; else None."""
    for layout, to_blocked in ((dst_layout, True), (src_layout, False)):
        other = src_layout if to_blocked else dst_layout
        m = _BLOCKED.match(layout)
        if not m or int(m.group(2)) <= 0 or "N" in m.group(1) or "C" in m.group(1):
            continue
        spatial, block = m.group(1), int(m.group(2))
        if other == "NCHW" and spatial == "HW":
            return block, to_blocked, False
        if other == f"N{spatial}C":
            return block, to_blocked, True
    return None


def gathers_when_fused(src_layout: str, dst_layout: str, dtype: str, shape: tuple) -> bool:
    """Whether a transform NCHW -> NCHW[L]c of a tensor of ``dtype`` and (NCHW) ``shape`` is
    one the blocked-copy kernel runs when its input is in memory, and whose generic loop,
    with a producer inlined into it, would gather: the loop's vector runs along the L
    channels of the output block, which lie H x W floats apart in the input (GroupNorm's
    scale, shift and SiLU fused into a transform to NCHW16c ran 6x onnxruntime's
    GroupNorm; alone, the same elementwise ops and then the copy run at memory speed)."""
    pair = blocked_copy(src_layout, dst_layout)
    return pair is not None and pair[1] and not pair[2] and dtype == "float32" and \
        len(shape) == 4 and isinstance(shape[1], int)


def _memory_of(x: te.Tensor) -> te.Tensor | None:
    """The function input whose memory ``x`` is: ``x`` itself or a reshape of it."""
    if isinstance(x.op, te.PlaceholderOp):
        return x
    if isinstance(x.op, te.ComputeOp) and x.op.name == "T_reshape":
        inputs = x.op.input_tensors
        if len(inputs) == 1 and isinstance(inputs[0].op, te.PlaceholderOp):
            return inputs[0]
    return None


def layout_nchwc(x: te.Tensor, src_layout: str, dst_layout: str,
                 shape: tuple) -> te.Tensor | None:
    """The transform of ``x`` (a function input or a reshape of one, float32, static
    channels) through a kernel; None when no kernel applies. ``shape``: the output shape. To
    NCHW[L]c, channels that are not a multiple of L fill the last block's remaining lanes with
    zeros."""
    pair = blocked_copy(src_layout, dst_layout)
    source = _memory_of(x)
    sizes = dims(x.shape)
    if pair is not None and pair[1] and not pair[2] and source is None:
        source, real = _channels_padded(x, pair[0])  # to NCHW[L]c: the kernel zero-fills
        sizes = [sizes[0], real, *sizes[2:]]  # the last block's lanes itself
    if pair is None or x.dtype != "float32" or source is None:
        return None
    block, to_blocked, last = pair
    if not to_blocked:  # (N, C / L, *spatial, L)
        n, c, hw = sizes[0], sizes[1] * block if isinstance(sizes[1], int) else None, \
            math.prod(sizes[2:-1])
    elif last:  # (N, *spatial, C)
        n, c, hw = sizes[0], sizes[-1], math.prod(sizes[1:-1])
    else:  # (N, C, H, W)
        n, c, hw = sizes[0], sizes[1], sizes[2] * sizes[3]
    if not isinstance(c, int):  # the batch and the image may be run-time sizes, not channels
        return None
    if not to_blocked and not all(isinstance(d, int) for d in (n, hw)):
        # Back to NCHW at run-time sizes: the generic loop, which its readers inline. With
        # static sizes SimplifyExpr folds a following reshape and transpose into the layout
        # (one NHWC copy); at run-time sizes they stay, and a blocked copy to NCHW that they
        # then transpose back reads 256 floats apart (segformer's twin: 2.2x its static build).
        return None
    return _kernel_call(source, n, c, hw, block, to_blocked, last, tuple(shape))


def _channels_padded(x: te.Tensor, block: int) -> tuple[te.Tensor | None, int]:
    """(the function input, its channels) when ``x`` is a zero pad of an NCHW input's channels
    alone, at their end, into whole blocks of ``block`` (AlterOpLayout's ``padded_blocks``:
    ShuffleNetV2's 58 channels after a split, into 64 for a blocked conv); else (None, 0).
    The kernel writes zeros in the lanes past the channels: the copy is the pad too (the
    generic loop read 16 channel planes per vector, 4-5x the copy's time)."""
    op = x.op
    if not (isinstance(op, te.ComputeOp) and op.name == "T_pad" and x.ndim == 4 and
            op.attrs.get("pad_value") == 0.0):
        return None, 0
    before, after = op.attrs["pad_before"], op.attrs["pad_after"]
    data = [t for t in op.input_tensors if t.ndim == 4]  # (and the value's 0-d constant)
    if len(data) != 1 or any(not _is_zero(v) for v in (*before, after[0], after[2], after[3])):
        return None, 0
    source = _memory_of(data[0])
    c, padded = dims(data[0].shape)[1], dims(x.shape)[1]
    if source is None or not isinstance(c, int) or padded != -(-c // block) * block:
        return None, 0
    return source, c


def _is_zero(v: object) -> bool:
    return getattr(v, "value", v) == 0


def channel_prefix(x: te.Tensor, starts: list, steps: list, shape: list) -> te.Tensor | None:
    """``x[:, :c]`` (``starts``, ``steps``, ``shape``: a strided_slice of ``x`` per axis) as
    one kernel call, when ``x`` is an NCHW[L]c -> NCHW copy of a function input (the kernel's,
    or the generic one a run-time size leaves to its readers) and the slice keeps the
    first c channels and everything else: the padded lanes of a last block are dropped by the
    copy itself (AlterOpLayout slices them off a conv whose channels it padded). The same
    for ``x[..., :c]`` of the kernel's copy to NHWC (``_last_prefix``). Else None."""
    if x.ndim != 4:
        return None
    if isinstance(x.op, te.ExternOp) and x.op.tag == "layout_nhwc":
        return _last_prefix(x, starts, steps, shape)
    if isinstance(x.op, te.ExternOp) and x.op.tag == "layout_nchwc":
        src = x.op.inputs[0]
    else:
        src = _generic_copy_back(x)  # (run-time sizes)
        if src is None:
            return None
    sizes, (n, c, h, w) = dims(src.shape), dims(shape)
    kept = [_same_size(a, sizes[i]) for a, i in ((n, 0), (h, 2), (w, 3))]
    if any(b != 0 for b in dims(starts)) or any(s != 1 for s in steps) or not all(kept) or \
            not (isinstance(c, int) and 0 < c <= sizes[1] * sizes[4]) or \
            not _blocks_counted(sizes[0], c, sizes[1], sizes[4]):
        return None
    return _kernel_call(src, sizes[0], c, sizes[2] * sizes[3], sizes[4], False, False,
                        (n, c, h, w))


def _blocks_counted(n: object, c: int, blocks: object, block: int) -> bool:
    """Whether the kernel, which counts a batch's blocks from the channels it copies
    (ceil(c / L)), finds each batch of a source of ``blocks`` blocks: one batch, or the
    channels end in the source's last block. (A slice of the first block of three, at a
    batch of two, read the second batch from the first one's second block.)"""
    return n == 1 or -(-c // block) == blocks


def _last_prefix(x: te.Tensor, starts: list, steps: list, shape: list) -> te.Tensor | None:
    """``x[..., :c]`` as one kernel call, when ``x`` is the kernel's copy of a blocked input
    to channels-last (static sizes) and the slice keeps the first c channels and everything
    else: the copy drops the other lanes itself (a padded detector head's conv, channels
    last). Else None."""
    src, out, want = x.op.inputs[0], dims(x.shape), dims(shape)
    sizes = dims(src.shape)
    if not all(isinstance(d, int) for d in (*sizes, *out, *want)) or len(sizes) != 5 or \
            any(b != 0 for b in dims(starts)) or any(s != 1 for s in steps) or \
            want[:-1] != out[:-1] or not 0 < want[-1] <= out[-1] or \
            not _blocks_counted(sizes[0], want[-1], sizes[1], sizes[4]):
        return None
    return _kernel_call(src, out[0], want[-1], math.prod(out[1:-1]), sizes[4], False, True,
                        tuple(shape))


def _generic_copy_back(x: te.Tensor) -> te.Tensor | None:
    """The function input (float32, NCHW[L]c) of which ``x`` is the generic copy to NCHW (the
    loop a run-time size leaves to its readers), or None."""
    op = x.op
    if not (isinstance(op, te.ComputeOp) and op.name == "T_layout_trans" and x.ndim == 4
            and len(op.input_tensors) == 1 and op.input_tensors[0].ndim == 5):
        return None
    attrs = getattr(op, "attrs", None) or {}
    pair = blocked_copy(str(attrs.get("src_layout", "")), str(attrs.get("dst_layout", "")))
    if pair is None or pair[1] or pair[2]:  # not NCHW[L]c -> NCHW
        return None
    src = _memory_of(op.input_tensors[0])
    return src if src is not None and src.dtype == "float32" else None


def copied_back_result(t: te.Tensor) -> te.Tensor | None:
    """A primitive function's result ``t`` that is the generic NCHW[L]c -> NCHW copy of an
    input, or a reshape of it (GroupNorm's ``(N, G, -1)`` view at a run-time height and
    width), as one kernel call; else None. The copy stays generic at run-time sizes so that
    a transpose reading it inlines it; a result has no reader in its function, and the
    generic loop, dividing by run-time sizes per element, ran 1.6 ms where the kernel takes
    0.08 ms (a (1, 64, 32, 32) map)."""
    x = t
    if isinstance(x.op, te.ComputeOp) and x.op.name == "T_reshape" and \
            len(x.op.input_tensors) == 1:
        x = x.op.input_tensors[0]
    src = _generic_copy_back(x)
    if src is None:
        return None
    n, c, h, w = dims(x.shape)
    if not isinstance(c, int):
        return None
    return _kernel_call(src, n, c, h * w, dims(src.shape)[4], False, False, tuple(t.shape))


def _same_size(a: object, b: object) -> bool:
    """Whether two sizes are the same: equal ints, or one run-time size (a ``?`` carried
    through a layout's shape as ``any_dim * 1``)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    from ..tir.simplify import simplify

    return simplify(a) is simplify(b)


def reshaped_copy(x: te.Tensor, shape: tuple) -> te.Tensor | None:
    """A reshape of ``x`` to ``shape`` as one kernel call, when ``x`` is the kernel's copy
    between NCHW and NCHW[L]c (static sizes): the copy writes its elements in the order the
    reshape keeps, so the copy itself takes the new shape, with no second pass over the
    result (vgg16's flatten: the last pool's NCHW16c to NCHW, then (1, 25088); a detector
    head's level copied channels-last, then (1, H * W * anchors, k)). Else None."""
    if not (isinstance(x.op, te.ExternOp) and x.op.tag in ("layout_nchwc", "layout_nhwc")):
        return None
    src = x.op.inputs[0]
    sizes, out = dims(src.shape), dims(x.shape)
    if not all(isinstance(d, int) for d in (*sizes, *out, *dims(shape))):
        return None
    if x.op.tag == "layout_nhwc":  # channels last: blocked -> (N, ..., C) or the reverse
        to_blocked = len(out) == len(sizes) + 1
        n, c = (sizes[0], sizes[-1]) if to_blocked else (out[0], out[-1])
        hw = math.prod(sizes[1:-1]) if to_blocked else math.prod(out[1:-1])
        return _kernel_call(src, n, c, hw, out[-1] if to_blocked else sizes[-1], to_blocked,
                            True, tuple(shape))
    if len(sizes) == 5 and len(out) == 4:  # NCHW[L]c -> NCHW (maybe its first channels)
        n, c, hw, block, to_blocked = out[0], out[1], out[2] * out[3], sizes[4], False
    elif len(sizes) == 4 and len(out) == 5:  # NCHW -> NCHW[L]c
        n, c, hw, block, to_blocked = sizes[0], sizes[1], sizes[2] * sizes[3], out[4], True
    else:
        return None
    return _kernel_call(src, n, c, hw, block, to_blocked, False, tuple(shape))


def _kernel_call(x: te.Tensor, n: object, c: int, hw: object, block: int, to_blocked: bool,
                 last: bool, shape: tuple) -> te.Tensor:
    """ember_layout_nchwc (``last``: ember_layout_nhwc) on ``x``; ``n, c, hw``: the sizes of
    the plain side (for NCHW, c not necessarily a multiple of ``block``; n and hw may be
    run-time expressions)."""
    if all(isinstance(d, int) for d in (n, hw)):
        items = n * -(-hw // TILE) if last else n * -(-c // block)
        threads: object = int(n * c * hw >= PARALLEL_ELEMENTS and items >= 2)
    else:  # run-time sizes (a ? batch, height or width): the same test, in the call
        items = n * tir.floordiv(hw + TILE - 1, TILE) if last else n * -(-c // block)
        threads = tir.cast(tir.all(n * c * hw >= PARALLEL_ELEMENTS, items >= 2), "int32")
    entry = "ember_layout_nhwc" if last else "ember_layout_nchwc"

    def body(ins: list, outs: list) -> object:
        return succeeds(tir.call_extern("int32", entry, ins[0].data, outs[0].data, n, c, hw,
                                        block, int(to_blocked), threads, header=HEADER),
                        f"{entry} failed (parallel launch)")

    # the tag tells channel_prefix a copy to NCHW from one to channels-last (both 4-D)
    return te.extern(tuple(shape), [x], body, name="T_layout_trans",
                     tag="layout_nhwc" if last else "layout_nchwc")
