"""FoldChannelShuffle: ShuffleNetV2's channel shuffles in the blocked layout, one pass each.

torchvision's ShuffleNetV2 ends each unit with ``Concat`` of its two branches, ``Reshape (N,
2, C / 2, H, W)``, ``Transpose (0, 2, 1, 3, 4)``, ``Reshape (N, C, H, W)``, and starts the
next with ``Split`` into halves: the first half passes on, the second feeds a 1x1 conv.
After AlterOpLayout the branches are blocked convs (NCHW[L]c; 58 channels padded to 64 in
NCHW16c), so each shuffle went to NCHW and back: both branches copied to NCHW (their padded
lanes sliced off), the shuffle and split in NCHW, and the half a conv reads padded and
copied back (two passes over the unit's output, and the pass back a kernel of its own).
``nn.contrib_channel_shuffle_nchwc`` computes any channel range of such a shuffle from the
two blocked branches straight into NCHW[L]c, so:

- ``shuffle_to_blocked``: ``reshape(transpose(reshape(concatenate(view(a), view(b)), (N, G,
  C / G, H, W)), (0, 2, 1, 3, 4)), (N, C, H, W))`` becomes ``view(shuffle(a, b, 0, C))``,
  where ``view(x)`` is AlterOpLayout's way back from a blocked ``x`` of c real channels,
  ``strided_slice?(layout_transform(x, "NCHW[L]c", "NCHW"), :c)``;
- ``split_blocked_shuffle``: ``split(view(shuffle(a, b, b0, e0)), axis=1)`` becomes the
  tuple of ``view(shuffle(a, b, b0 + i, b0 + j))`` for its pieces [i, j) (a ``TupleGetItem``
  of it is folded to the piece);
- ``blocked_shuffle_to_blocked``: ``layout_transform(nn.pad?(view(s)), "NCHW", "NCHW[L]c")``
  with ``s`` a shuffle becomes ``s`` (whose lanes past its channels are zeros, as the zero
  pad of channels to whole blocks leaves them), or its twin written in blocks of L when the
  conv reading it is blocked otherwise.

The half a unit passes on is a ``view`` of a shuffle, and so a branch of the next shuffle:
the rules chain unit to unit, each by looking one call down. What still reads NCHW (a
non-conv consumer) reads the view, the blocked copy back: a pass more than the fused NCHW
shuffle took for that reader (none in ShuffleNetV2, whose every reader is a conv). Two inputs to the
concatenation (ShuffleNetV2's); float32, static channels and image, the batch static or a
run-time size (``ember.compile`` with no shapes). Runs after AlterOpLayout (opt_level 3),
which inserts the transforms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import Call, Constant, RelayExpr, Tuple, TupleGetItem
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ._helpers import op_call
from ._pattern_rewrite import PatternRewriter, Rule, rewrite_module
from .fold_token_layouts import _BLOCKED, _call_of, _spanned

__all__ = ["RULES", "FoldChannelShuffle"]

SHUFFLE = "nn.contrib_channel_shuffle_nchwc"


def _shape(e: RelayExpr) -> tuple[Any, ...] | None:
    """The shape of ``e``'s float32 type, None for its batch when that is a run-time size
    (the rest static), or None."""
    ty = e.checked_type_
    if not isinstance(ty, TensorType) or ty.dtype != "float32" or not ty.shape or \
            not all(isinstance(d, int) for d in ty.shape[1:]):
        return None
    return tuple(d if isinstance(d, int) else None for d in ty.shape)


def _prefix_of(call: Any) -> int | None:
    """c for ``strided_slice(x, begin=[0], end=[c], axes=[1])`` (unit strides), else None."""
    a = call.attrs
    if a.slice_mode != "end" or list(a.begin) != [0] or len(a.end) != 1 or \
            list(a.axes or ()) != [1] or any(s != 1 for s in a.strides or ()):
        return None
    return int(a.end[0])


def _blocked_channels(x: RelayExpr, lanes: int) -> int | None:
    """The channels a blocked ``x`` holds: a shuffle's range, or its blocks x lanes."""
    s = _call_of(x, SHUFFLE)
    if s is not None:
        return s.attrs.end - s.attrs.begin
    shape = _shape(x)
    return shape[1] * lanes if shape is not None and len(shape) == 5 else None


def _view(v: RelayExpr) -> tuple[RelayExpr, int, int] | None:
    """(x, c, L) when ``v`` is ``strided_slice?(layout_transform(x, NCHW[L]c -> NCHW), :c)``:
    the first c channels of a blocked x, seen as NCHW."""
    back, c = v, None
    cut = _call_of(v, "strided_slice")
    if cut is not None:
        back, c = cut.args[0], _prefix_of(cut)
        if c is None:
            return None
    back = _call_of(back, "layout_transform")
    m = _BLOCKED.match(back.attrs.src_layout) if back is not None else None
    if m is None or back.attrs.dst_layout != "NCHW":
        return None
    x, lanes = back.args[0], int(m.group(1))
    held = _blocked_channels(x, lanes)
    if held is None:
        return None
    c = held if c is None else c
    if not 0 < c <= held or held - c >= lanes:  # a slice of the padded lanes alone
        return None
    return x, c, lanes


def _view_of(x: Call, lanes: int) -> Call:
    """``view(x)`` for a shuffle ``x``: its real channels as NCHW."""
    back = op_call("layout_transform", x, src_layout=f"NCHW{lanes}c", dst_layout="NCHW")
    c = x.attrs.end - x.attrs.begin
    return back if c % lanes == 0 else op_call("strided_slice", back, begin=[0], end=[c],
                                                axes=[1])


def _shuffled(view: RelayExpr, begin: int, end: int) -> tuple[Call, int] | None:
    """(a shuffle of channels [begin, end) of the shuffle ``view`` shows, its lanes)."""
    seen = _view(view)
    s = _call_of(seen[0], SHUFFLE) if seen is not None else None
    if s is None:
        return None
    a = s.attrs
    return op_call(SHUFFLE, *s.args, channels=a.channels, groups=a.groups,
                   begin=a.begin + begin, end=a.begin + end), seen[2]


def shuffle_to_blocked(call: Call) -> RelayExpr | None:
    """reshape(transpose(reshape(concatenate(view(a), view(b)), (N, G, C/G, H, W)),
    (0, 2, 1, 3, 4)), (N, C, H, W))."""
    swap = _call_of(call.args[0], "transpose")
    groups = _call_of(swap.args[0], "reshape") if swap is not None else None
    cat = _call_of(groups.args[0], "concatenate") if groups is not None else None
    if cat is None or not isinstance(cat.args[0], Tuple) or len(cat.args[0].fields) != 2:
        return None
    image, split, joined = _shape(call), _shape(groups), _shape(cat)
    axes = swap.attrs.axes
    if image is None or split is None or joined is None or len(image) != 4 or \
            image != joined or len(split) != 5 or axes is None or \
            [int(d) % 5 for d in axes] != [0, 2, 1, 3, 4] or int(cat.attrs.axis) % 4 != 1:
        return None
    n, c, h, w = image
    g = split[1]
    if split != (n, g, c // g, h, w) or c % g:
        return None
    views = [_view(v) for v in cat.args[0].fields]
    if any(v is None for v in views) or views[0][2] != views[1][2]:  # type: ignore[index]
        return None
    (a, ca, lanes), (b, cb, _) = views  # type: ignore[misc]
    for x, cx in ((a, ca), (b, cb)):
        shape = _shape(x)  # a shuffle of the same blocking has the branches' sizes
        if shape is not None and shape != (n, -(-cx // lanes), h, w, lanes):
            return None
    s = op_call(SHUFFLE, a, b, channels=(ca, cb), groups=g, begin=0, end=c)
    return _view_of(_spanned(s, call, swap, groups, cat), lanes)


def split_blocked_shuffle(call: Call) -> RelayExpr | None:
    """split(view(shuffle), axis=1) into its pieces, each a view of its own shuffle."""
    a = call.attrs
    seen = _view(call.args[0])
    if seen is None or _call_of(seen[0], SHUFFLE) is None or int(a.axis) % 4 != 1:
        return None
    c = seen[1]
    if isinstance(a.indices_or_sections, int):
        if c % a.indices_or_sections:
            return None
        step = c // a.indices_or_sections
        cuts = [step * k for k in range(1, a.indices_or_sections)]
    else:
        cuts = [int(i) for i in a.indices_or_sections]
    bounds = [0, *cuts, c]
    if any(not 0 <= lo < hi <= c for lo, hi in zip(bounds, bounds[1:])):
        return None
    pieces = []
    for lo, hi in zip(bounds, bounds[1:]):
        piece, lanes = _shuffled(call.args[0], lo, hi)  # type: ignore[misc]
        pieces.append(_view_of(_spanned(piece, call), lanes))
    return Tuple(tuple(pieces))


def blocked_shuffle_to_blocked(call: Call) -> RelayExpr | None:
    """layout_transform(nn.pad?(view(s)), NCHW -> NCHW[L]c), s a shuffle in NCHW[L]c."""
    m = _BLOCKED.match(call.attrs.dst_layout)
    if m is None or call.attrs.src_layout != "NCHW":
        return None
    lanes, inner = int(m.group(1)), call.args[0]
    pad = _call_of(inner, "nn.pad")
    if pad is not None:  # zeros after the channels alone, up to whole blocks
        widths = [tuple(int(v) for v in p) for p in pad.attrs.pad_width]
        value = pad.args[1] if len(pad.args) > 1 else None
        if pad.attrs.pad_mode != "constant" or len(widths) != 4 or \
                any(p != (0, 0) for i, p in enumerate(widths) if i != 1) or \
                widths[1][0] != 0 or not isinstance(value, Constant) or \
                float(value.data.numpy()) != 0.0:
            return None
        inner = pad.args[0]
    seen = _view(inner)
    s = _call_of(seen[0], SHUFFLE) if seen is not None else None
    if s is None:
        return None
    c = seen[1]  # type: ignore[index]
    padded = c + (widths[1][1] if pad is not None else 0)
    if -(-padded // lanes) != -(-c // lanes):
        return None
    if seen[2] == lanes:  # type: ignore[index]
        return s
    a = s.attrs  # the conv reads another blocking (464 channels in 16s, its 232 in 8s)
    return op_call(SHUFFLE, *s.args, channels=a.channels, groups=a.groups, begin=a.begin,
                   end=a.end, lanes=lanes)


RULES: list[Rule] = [("reshape", shuffle_to_blocked), ("split", split_blocked_shuffle),
                     ("layout_transform", blocked_shuffle_to_blocked)]


class _ShuffleRewriter(PatternRewriter):
    """The rules, and a field of a tuple the split rule built taken from it."""

    def visit_tuple_getitem(self, orig: TupleGetItem) -> RelayExpr:
        out = super().visit_tuple_getitem(orig)
        if isinstance(out, TupleGetItem) and isinstance(out.tuple_value, Tuple):
            return out.tuple_value.fields[out.index]
        return out


@dataclass(frozen=True)
class FoldChannelShuffle(ModulePass):
    """Apply the rewrites of ``RULES`` until none fires (see the module docstring)."""

    name: ClassVar[str] = "FoldChannelShuffle"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return rewrite_module(mod, RULES, _ShuffleRewriter)


register_pass("FoldChannelShuffle", FoldChannelShuffle)
