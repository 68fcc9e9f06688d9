"""FoldTokenLayouts: a blocked map seen as a transformer's tokens, and back, in one copy.

Vision transformers (SegFormer, PVT, Swin, MobileViT) move between a (N, C, H, W) map and
(N, H * W, C) tokens with ``transpose(reshape(x, (N, C, H * W)), (0, 2, 1))`` and the
reverse. After AlterOpLayout, the map side is blocked (NCHW[L]c, a conv's output or input),
so each crossing is ``layout_transform`` to or from NCHW next to that transpose: two passes
over the tensor, the transpose reading one float per cache line (in SegFormer's Mix-FFN the
GELU fused into it ran 10x slower than onnxruntime's, gathering instead of streaming). Yet
between NCHW[L]c and tokens a position's channel block is L contiguous floats on both sides:

- ``transpose(reshape(layout_transform(x, "NCHW[L]c", "NCHW"), (N, C, H * W)), (0, 2, 1))``
  becomes ``layout_transform(reshape(x, (N, C / L, H * W, L)), "NCW[L]c", "NWC")``;
- ``layout_transform(reshape(transpose(t, (0, 2, 1)), (N, C, H, W)), "NCHW", "NCHW[L]c")``
  becomes ``layout_transform(reshape(t, (N, H, W, C)), "NHWC", "NCHW[L]c")``;

which ``topi.layout_nchwc`` lowers to one blocked move (``ember_layout_nhwc``) reading the
reshaped function input in place. Static shapes only; the channels a multiple of L. Runs
after AlterOpLayout (opt_level 3), which inserts those transforms.

Detector heads (EfficientDet, RetinaNet, SSD) view each level's conv channels last,
``transpose(conv, (0, 2, 3, 1))``, before reshaping it to (N, H * W * anchors, k) and
concatenating the levels. The conv is blocked, its channels padded to whole blocks when
they do not split (810 = 9 anchors x 90 classes: 816 in NCHW16c), so the transpose reads
the transform back to NCHW, one float per cache line (with a slice of the real channels
between them):

- ``transpose(strided_slice?(layout_transform(x, "NCHW[L]c", "NCHW"), :c), (0, 2, 3, 1))``
  becomes ``strided_slice?(layout_transform(x, "NCHW[L]c", "NHWC"), :c on the last axis)``,

one blocked move too, which drops the padded lanes itself (``layout_nchwc.channel_prefix``)
and takes the reshape's shape (``reshaped_copy``); FuseOps then leaves the concatenation of
such copies to the memory planner, which has each level written in place (``_fuse_graph``,
point 7).

YOLOv5's head splits the channels instead (255 = 3 anchors x 85 outputs) and moves the
outputs last: ``transpose(reshape(conv, (N, A, K, H, W)), (0, 1, 3, 4, 2))``, then its
decode reads that (N, A, H, W, K) view. Through NCHW each output row of K gathers one float
per H * W (a (1, 3, 40, 40, 85) level: 0.5 ms of a 10 ms model). Channels last first, the
rows are contiguous K-float runs:

- ``transpose(reshape(strided_slice?(layout_transform(x, "NCHW[L]c", "NCHW"), :c),
  (N, A, K, H, W)), (0, 1, 3, 4, 2))`` becomes ``transpose(reshape(strided_slice?(
  layout_transform(x, "NCHW[L]c", "NHWC"), :c on the last axis), (N, H, W, A, K)),
  (0, 3, 1, 2, 4))``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ...ir.base import merge_spans
from ...ir.expr import Call, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ._helpers import op_call
from ._pattern_rewrite import Rule, rewrite_module

__all__ = ["RULES", "FoldTokenLayouts"]

_BLOCKED = re.compile(r"^NCHW(\d+)c$")


def _call_of(e: RelayExpr, name: str) -> Any:
    """``e`` if it is a call of op ``name`` (typed loosely: rules read its attrs)."""
    return e if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name else None


def _shape(e: RelayExpr) -> tuple[int, ...] | None:
    """The static shape of ``e``'s type, or None."""
    ty = e.checked_type_
    if isinstance(ty, TensorType) and ty.dtype == "float32" and all(
            isinstance(d, int) for d in ty.shape):
        return tuple(ty.shape)
    return None


def _swaps_last_two(call: Any) -> bool:
    """A transpose of a 3-D value with axes (0, 2, 1)."""
    axes = call.attrs.axes
    return axes is not None and [int(a) % 3 for a in axes] == [0, 2, 1]


def _spanned(call: Call, *parts: Call) -> Call:
    """``call`` (new) with the spans of the calls it stands for (ONNX node names)."""
    span = merge_spans(*(p.span for p in parts))
    return call if span is None else replace(call, span=span)


def blocked_to_tokens(call: Call) -> RelayExpr | None:
    """transpose(reshape(layout_transform(x, NCHW[L]c -> NCHW), (N, C, HW)), (0, 2, 1))."""
    flat = _call_of(call.args[0], "reshape")
    back = _call_of(flat.args[0], "layout_transform") if flat is not None else None
    if back is None or back.attrs.dst_layout != "NCHW" or not _swaps_last_two(call):
        return None
    m = _BLOCKED.match(back.attrs.src_layout)
    x = back.args[0]
    blocked, tokens = _shape(x), _shape(call)
    if m is None or blocked is None or tokens is None or len(blocked) != 5:
        return None
    n, cb, h, w, lanes = blocked
    if tokens != (n, h * w, cb * lanes) or int(m.group(1)) != lanes:
        return None
    rows = op_call("reshape", x, newshape=(n, cb, h * w, lanes))
    return _spanned(op_call("layout_transform", rows, src_layout=f"NCW{lanes}c",
                            dst_layout="NWC"), call, flat, back)


def tokens_to_blocked(call: Call) -> RelayExpr | None:
    """layout_transform(reshape(transpose(t, (0, 2, 1)), (N, C, H, W)), NCHW -> NCHW[L]c)."""
    m = _BLOCKED.match(call.attrs.dst_layout)
    image = _call_of(call.args[0], "reshape")
    swap = _call_of(image.args[0], "transpose") if image is not None else None
    if m is None or call.attrs.src_layout != "NCHW" or swap is None or not _swaps_last_two(swap):
        return None
    t, nchw, lanes = swap.args[0], _shape(image), int(m.group(1))
    tokens = _shape(t)
    if tokens is None or nchw is None or len(nchw) != 4:
        return None
    n, c, h, w = nchw
    if tokens != (n, h * w, c) or c % lanes:
        return None
    image_nhwc = op_call("reshape", t, newshape=(n, h, w, c))
    return _spanned(op_call("layout_transform", image_nhwc, src_layout="NHWC",
                            dst_layout=call.attrs.dst_layout), call, image, swap)


def _channel_prefix(call: Any) -> int | None:
    """The channel count of a ``strided_slice`` that keeps the first channels (axis 1) of a
    4-D value and all the rest (AlterOpLayout's drop of a padded conv's extra lanes)."""
    attrs = call.attrs
    shape, full = _shape(call), _shape(call.args[0])
    if shape is None or full is None or len(shape) != 4 or attrs.slice_mode != "end" or \
            any(s != 1 for s in attrs.strides or ()):
        return None
    axes = list(attrs.axes) if attrs.axes is not None else list(range(len(attrs.begin)))
    begins = dict(zip(axes, attrs.begin))
    if any(b != 0 for b in begins.values()) or \
            any(shape[a] != full[a] for a in range(4) if a != 1):
        return None
    return shape[1]


def blocked_to_channels_last(call: Call) -> RelayExpr | None:
    """transpose(layout_transform(x, NCHW[L]c -> NCHW), (0, 2, 3, 1)), maybe with a slice of
    the first channels between them: a detector head's conv seen channels last."""
    axes = call.attrs.axes
    if axes is None or [int(a) % 4 for a in axes] != [0, 2, 3, 1]:
        return None
    prefix, inner = _call_of(call.args[0], "strided_slice"), call.args[0]
    channels = _channel_prefix(prefix) if prefix is not None else None
    if channels is not None:
        inner = prefix.args[0]
    back = _call_of(inner, "layout_transform")
    if back is None or back.attrs.dst_layout != "NCHW" or (prefix is not None and
                                                          channels is None):
        return None
    m, blocked = _BLOCKED.match(back.attrs.src_layout), _shape(back.args[0])
    if m is None or blocked is None or len(blocked) != 5 or int(m.group(1)) != blocked[4]:
        return None
    out = op_call("layout_transform", back.args[0], src_layout=back.attrs.src_layout,
                  dst_layout="NHWC")
    if channels is not None and channels != blocked[1] * blocked[4]:
        out = op_call("strided_slice", out, begin=[0], end=[channels], axes=[3])
    parts = (call, back) if prefix is None else (call, prefix, back)
    return _spanned(out, *parts)


def blocked_to_split_channels_last(call: Call) -> RelayExpr | None:
    """transpose(reshape(strided_slice?(layout_transform(x, NCHW[L]c -> NCHW), :c),
    (N, A, K, H, W)), (0, 1, 3, 4, 2)): a head's channels split in A groups of K, K last."""
    axes = call.attrs.axes
    split = _call_of(call.args[0], "reshape")
    if axes is None or split is None or [int(a) % 5 for a in axes] != [0, 1, 3, 4, 2]:
        return None
    nhwc = blocked_to_channels_last(op_call("transpose", split.args[0], axes=(0, 2, 3, 1)))
    groups, image = _shape(split), _shape(split.args[0])
    if nhwc is None or groups is None or image is None or len(image) != 4:
        return None
    n, c, h, w = image
    if groups[0] != n or groups[1] * groups[2] != c or groups[3:] != (h, w):
        return None
    rows = op_call("reshape", nhwc, newshape=(n, h, w, groups[1], groups[2]))
    inner = split.args[0]
    parts = (call, split, inner) if _call_of(inner, "layout_transform") is not None else (
        call, split, inner, inner.args[0])  # the slice and the transform under it
    return _spanned(op_call("transpose", rows, axes=(0, 3, 1, 2, 4)), *parts)


RULES: list[Rule] = [("transpose", blocked_to_tokens), ("layout_transform", tokens_to_blocked),
                     ("transpose", blocked_to_channels_last),
                     ("transpose", blocked_to_split_channels_last)]


@dataclass(frozen=True)
class FoldTokenLayouts(ModulePass):
    """Apply the rewrites of ``RULES`` until none fires (see the module docstring)."""

    name: ClassVar[str] = "FoldTokenLayouts"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return rewrite_module(mod, RULES)


register_pass("FoldTokenLayouts", FoldTokenLayouts)
