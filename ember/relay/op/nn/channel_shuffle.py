"""nn.contrib_channel_shuffle_nchwc: a channel shuffle of two blocked maps into a blocked map.

``nn.contrib_channel_shuffle_nchwc(a, b, channels=(ca, cb), groups=G, begin=b0, end=e0,
lanes=Lo)`` takes the first ``ca`` channels of ``a`` and the first ``cb`` of ``b`` (both
NCHW[L]c, the same N, H, W and L; their last blocks may be padded), joins them (C = ca + cb),
shuffles them as ShuffleNetV2's Reshape (N, G, C / G, H, W), Transpose (0, 2, 1, 3, 4),
Reshape (N, C, H, W) does, and keeps channels [b0, e0) in NCHW[Lo]c (Lo 0: L), the lanes
past e0 - b0 zero: one
pass where the exported graph went to NCHW and back (``FoldChannelShuffle`` writes it). It
is a permutation: exact. float32; the batch may be a run-time size. The C kernel is
``ember/kernels/channel_shuffle.h``.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....topi.nn import channel_shuffle as kernel
from .._attrs_base import OpAttrs, attrs_class
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape, known, may_equal, tensor_of, unify_dim

__all__ = ["contrib_channel_shuffle_nchwc"]
OP = "nn.contrib_channel_shuffle_nchwc"
MAX_LANES = 16  # EMBER_SHUFFLE_MAX_LANES


@attrs_class("ChannelShuffleAttrs")
class ChannelShuffleAttrs(OpAttrs):
    """nn.contrib_channel_shuffle_nchwc: the real channels of both inputs, the shuffle's
    groups, the range [begin, end) of shuffled channels kept, and the output's block (0: the
    inputs')."""

    channels: tuple[int, int] = (1, 1)
    groups: int = 1
    begin: int = 0
    end: int = 1
    lanes: int = 0
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        self._ints("channels", length=(2,))
        self._positive("channels")
        for name in ("groups", "begin", "end", "lanes"):
            self._int(name)
        self._positive("groups")
        if not 0 <= self.lanes <= MAX_LANES:
            raise self._invalid("lanes", f"in [0, {MAX_LANES}] (0: the inputs' block)")
        total = sum(self.channels)
        if total % self.groups:
            raise self._invalid("groups", f"a divisor of the {total} channels")
        if not 0 <= self.begin < self.end <= total:
            raise self._invalid("end", f"in ({self.begin}, {total}] with begin >= 0")


def _rel(args: list[TensorType], attrs: ChannelShuffleAttrs) -> TensorType:
    a, b = args
    for name, x, c in (("a", a, attrs.channels[0]), ("b", b, attrs.channels[1])):
        if x.dtype != "float32" or x.ndim != 5 or not known(*x.shape[1:]):
            raise fail(OP, f"{name} must be a float32 NCHW[L]c map of static channels, "
                           f"height and width, got {x.dtype} {fmt_shape(x.shape)}")
        if x.shape[1] != -(-c // x.shape[4]):
            raise fail(OP, f"{name} {fmt_shape(x.shape)} does not hold {c} channels in "
                           f"blocks of {x.shape[4]}")
    if tuple(a.shape[2:]) != tuple(b.shape[2:]) or not may_equal(a.shape[0], b.shape[0]):
        raise fail(OP, f"a {fmt_shape(a.shape)} and b {fmt_shape(b.shape)} differ in batch, "
                       "height, width or block")
    if a.shape[4] > MAX_LANES:
        raise fail(OP, f"blocks of {a.shape[4]} lanes: at most {MAX_LANES}")
    n, _, h, w, block = a.shape
    n = unify_dim(n, b.shape[0])
    lanes = attrs.lanes or block
    return tensor_of((n, -(-(attrs.end - attrs.begin) // lanes), h, w, lanes), "float32")


def _ref(a: np.ndarray, b: np.ndarray, attrs: ChannelShuffleAttrs) -> np.ndarray:
    return kernel.reference(a, b, attrs.channels, attrs.groups, attrs.begin, attrs.end,
                            attrs.lanes or a.shape[4])


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    a = inputs[0]
    return [kernel.channel_shuffle_nchwc(a, inputs[1], tuple(attrs.channels), attrs.groups,
                                         attrs.begin, attrs.end,
                                         attrs.lanes or int(a.shape[4]))]


defop(OP, _rel, _ref, OPAQUE, args=("a", "b"), attrs=ChannelShuffleAttrs,
      doc="Channels [begin, end) of a channel shuffle of two NCHW[L]c maps, in NCHW[L]c.",
      compute=_compute)


def contrib_channel_shuffle_nchwc(a: Any, b: Any, channels: tuple[int, int], groups: int,
                                  begin: int, end: int, lanes: int = 0) -> Call:
    """See the module docstring."""
    return call(OP, a, b, attrs=ChannelShuffleAttrs(tuple(channels), groups, begin, end,
                                                    lanes))
