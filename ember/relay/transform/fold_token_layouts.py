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


RULES: list[Rule] = [("transpose", blocked_to_tokens), ("layout_transform", tokens_to_blocked)]


@dataclass(frozen=True)
class FoldTokenLayouts(ModulePass):
    """Apply the rewrites of ``RULES`` until none fires (see the module docstring)."""

    name: ClassVar[str] = "FoldTokenLayouts"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return rewrite_module(mod, RULES)


register_pass("FoldTokenLayouts", FoldTokenLayouts)
