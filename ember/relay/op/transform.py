"""Shape-changing operators: transpose, squeeze, expand_dims, broadcast_to(_like), tile, repeat,
reverse, layout_transform, shape_of.

The reshapes (reshape, reverse_reshape, reshape_like) are in ``reshaping.py``, the indexing ops
(concatenate, stack, split, take, strided_slice) in ``indexing.py``; both are re-exported here,
so ``relay.op.transform.take`` works as in Relay.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import topi
from ...ir.expr import Call
from ...ir.types import Dim, TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from . import indexing, reshaping
from ._compute_common import (
    as_int,
    broadcast_load,
)
from ._compute_common import (
    norm_axis as _te_norm_axis,
)
from ._layout import Layout, from_primal, to_primal, transform_shape
from ._dispatch import dyn_op, numbers, run_time
from ._reg import BROADCAST, INJECTIVE, OPAQUE, call, defop
from ._shape import (
    dim_mul,
    fail,
    fmt_dim,
    fmt_shape,
    known,
    may_equal,
    norm_axis,
    tensor_of,
)
from .attrs import (
    BroadcastToAttrs,
    ExpandDimsAttrs,
    LayoutTransformAttrs,
    RepeatAttrs,
    ReverseAttrs,
    ShapeOfAttrs,
    SqueezeAttrs,
    TileAttrs,
    TransposeAttrs,
)
from .indexing import *
from .reshaping import *

__all__ = [
    "broadcast_to",
    "broadcast_to_like",
    "expand_dims",
    "layout_transform",
    "repeat",
    "reverse",
    "shape_of",
    "squeeze",
    "tile",
    "transpose",
]
__all__ += indexing.__all__ + reshaping.__all__


# ---------------------------------------------------------------- transpose, squeeze, expand
def _perm(op: str, axes: Sequence[int] | None, ndim: int) -> list[int]:
    if axes is None:
        return list(range(ndim))[::-1]
    perm = [norm_axis(op, a, ndim) for a in axes]
    if sorted(perm) != list(range(ndim)):
        raise fail(op, f"axes {tuple(axes)} is not a permutation of the {ndim} axes")
    return perm


def _transpose_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.transpose(inputs[0], attrs.axes)]


defop("transpose",
      lambda args, attrs: tensor_of([args[0].shape[i] for i in _perm(
          "transpose", attrs.axes, args[0].ndim)], args[0].dtype),
      lambda x, attrs: np.transpose(x, _perm("transpose", attrs.axes, x.ndim)),
      INJECTIVE, attrs=TransposeAttrs, doc="Permute the axes.", compute=_transpose_compute)


def transpose(data: Any, axes: Sequence[int] | None = None) -> Call:
    """``data`` with its axes permuted (``axes=None`` reverses them)."""
    return call("transpose", data, attrs=TransposeAttrs(axes))


def _squeeze_axes(op: str, shape: Sequence[Dim], axis: Sequence[int] | None) -> list[int]:
    if axis is None:  # only dims known to be 1: a ? might not be
        return [i for i, d in enumerate(shape) if known(d) and d == 1]
    axes = [norm_axis(op, a, len(shape)) for a in axis]
    for a in axes:
        if not may_equal(shape[a], 1):
            raise fail(op, f"dimension {a} of {fmt_shape(shape)} has size {shape[a]}, "
                           "only size-1 dimensions can be squeezed")
    return axes


def _squeeze_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    if attrs.axis is None:
        drop = [i for i, d in enumerate(x.shape) if as_int(d) == 1]
    else:
        drop = [_te_norm_axis(a, x.ndim) for a in attrs.axis]
    return [topi.squeeze(x, drop)]


defop("squeeze",
      lambda args, attrs: tensor_of([d for i, d in enumerate(args[0].shape) if i not in
                                     _squeeze_axes("squeeze", args[0].shape, attrs.axis)],
                                    args[0].dtype),
      lambda x, attrs: np.squeeze(x, tuple(_squeeze_axes("squeeze", x.shape, attrs.axis))),
      INJECTIVE, attrs=SqueezeAttrs, doc="Drop size-1 axes.", compute=_squeeze_compute)


def squeeze(data: Any, axis: Sequence[int] | int | None = None) -> Call:
    """``data`` without the given size-1 axes (None: all size-1 axes); axes given as a
    tensor known at run time build ``dyn.squeeze``."""
    if run_time(axis):
        return dyn_op("squeeze")(data, axis)
    return call("squeeze", data, attrs=SqueezeAttrs(numbers(axis)))


def _expand_shape(shape: Sequence[Dim], attrs: ExpandDimsAttrs) -> list[Dim]:
    axis = norm_axis("expand_dims", attrs.axis, len(shape) + 1)
    return [*shape[:axis], *([1] * attrs.num_newaxis), *shape[axis:]]


def _expand_dims_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    axis = attrs.axis if attrs.axis >= 0 else attrs.axis + x.ndim + 1
    return [topi.expand_dims(x, axis, attrs.num_newaxis)]


defop("expand_dims",
      lambda args, attrs: tensor_of(_expand_shape(args[0].shape, attrs), args[0].dtype),
      lambda x, attrs: x.reshape(_expand_shape(x.shape, attrs)),
      BROADCAST, attrs=ExpandDimsAttrs, doc="Insert size-1 axes.", compute=_expand_dims_compute)


def expand_dims(data: Any, axis: int, num_newaxis: int = 1) -> Call:
    """``data`` with ``num_newaxis`` size-1 axes inserted at ``axis`` (in [-ndim-1, ndim]);
    an axis given as a tensor known at run time builds ``dyn.expand_dims``."""
    if run_time(axis):
        return dyn_op("expand_dims")(data, axis, num_newaxis)
    axis = numbers(axis)
    if isinstance(axis, list) and len(axis) == 1:  # a one-element constant
        axis = axis[0]
    return call("expand_dims", data, attrs=ExpandDimsAttrs(axis, num_newaxis))


# ---------------------------------------------------------------- broadcast_to, tile, repeat
def _check_broadcast_to(op: str, shape: Sequence[Dim], target: Sequence[Dim]) -> list[Dim]:
    if len(shape) > len(target):
        raise fail(op, f"cannot broadcast {fmt_shape(shape)} to {fmt_shape(target)}: "
                       "the target has fewer dimensions")
    for i in range(1, len(shape) + 1):
        d, t = shape[-i], target[-i]
        if not (known(d) and d == 1) and not may_equal(d, t):
            raise fail(op, f"cannot broadcast {fmt_shape(shape)} to {fmt_shape(target)}: "
                           f"dimension {-i} is {fmt_dim(d)} vs {fmt_dim(t)}")
    return list(target)


def _broadcast_to_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [_broadcast_to(inputs[0], [tir.const(d) for d in attrs.shape])]


defop("broadcast_to",
      lambda args, attrs: tensor_of(_check_broadcast_to("broadcast_to", args[0].shape,
                                                        attrs.shape), args[0].dtype),
      lambda x, attrs: np.broadcast_to(x, attrs.shape).copy(),
      BROADCAST, attrs=BroadcastToAttrs, doc="Broadcast to a given shape.", level=4,
      compute=_broadcast_to_compute)


def _broadcast_to_like_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [_broadcast_to(inputs[0], inputs[1].shape)]


defop("broadcast_to_like",
      lambda args, attrs: tensor_of(_check_broadcast_to("broadcast_to_like", args[0].shape,
                                                        args[1].shape), args[0].dtype),
      lambda x, like, attrs: np.broadcast_to(x, like.shape).copy(),
      BROADCAST, args=("data", "broadcast_type"), doc="Broadcast to another tensor's shape.",
      compute=_broadcast_to_like_compute)


def broadcast_to(data: Any, shape: Sequence[int] | int) -> Call:
    """``data`` broadcast (numpy rules) to ``shape``."""
    if run_time(shape):
        return dyn_op("broadcast_to")(data, shape)
    shape = numbers(shape)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return call("broadcast_to", data, attrs=BroadcastToAttrs(shape))


def broadcast_to_like(data: Any, broadcast_type: Any) -> Call:
    """``data`` broadcast to the shape of ``broadcast_type``."""
    return call("broadcast_to_like", data, broadcast_type)


def _tile_shape(shape: Sequence[Dim], reps: Sequence[int]) -> list[Dim]:
    n = max(len(shape), len(reps))
    shape = [1] * (n - len(shape)) + list(shape)
    reps = [1] * (n - len(reps)) + list(reps)
    return [dim_mul(d, r) for d, r in zip(shape, reps)]


def _tile_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.tile(inputs[0], attrs.reps)]


defop("tile", lambda args, attrs: tensor_of(_tile_shape(args[0].shape, attrs.reps), args[0].dtype),
      lambda x, attrs: np.tile(x, attrs.reps), BROADCAST, attrs=TileAttrs,
      doc="Repeat the whole tensor along each axis (numpy.tile).", compute=_tile_compute)


def tile(data: Any, reps: Sequence[int]) -> Call:
    """``data`` repeated ``reps[i]`` times along axis i (numpy.tile rules)."""
    if run_time(reps):
        return dyn_op("tile")(data, reps)
    return call("tile", data, attrs=TileAttrs(numbers(reps)))


def _repeat_rel(args: list[TensorType], attrs: RepeatAttrs) -> TensorType:
    shape = list(args[0].shape)
    axis = norm_axis("repeat", attrs.axis, len(shape))
    shape[axis] = dim_mul(shape[axis], attrs.repeats)
    return tensor_of(shape, args[0].dtype)


def _repeat_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.repeat(inputs[0], attrs.repeats, attrs.axis)]


defop("repeat", _repeat_rel, lambda x, attrs: np.repeat(x, attrs.repeats, attrs.axis),
      BROADCAST, attrs=RepeatAttrs, doc="Repeat each element along an axis.",
      compute=_repeat_compute)


def repeat(data: Any, repeats: int, axis: int) -> Call:
    """Each element of ``data`` repeated ``repeats`` times along ``axis``."""
    return call("repeat", data, attrs=RepeatAttrs(repeats, axis))


def _reverse_rel(args: list[TensorType], attrs: ReverseAttrs) -> TensorType:
    norm_axis("reverse", attrs.axis, args[0].ndim)
    return args[0]


def _reverse_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.reverse(inputs[0], attrs.axis)]


defop("reverse", _reverse_rel, lambda x, attrs: np.flip(x, attrs.axis).copy(), INJECTIVE,
      attrs=ReverseAttrs, doc="Reverse the order of elements along an axis.",
      compute=_reverse_compute)


def reverse(data: Any, axis: int) -> Call:
    """``data`` flipped along ``axis``."""
    return call("reverse", data, attrs=ReverseAttrs(axis))


# ---------------------------------------------------------------- layout_transform, shape_of
def _layout_rel(args: list[TensorType], attrs: LayoutTransformAttrs) -> TensorType:
    data, op = args[0], "layout_transform"
    src, dst = Layout.parse(attrs.src_layout), Layout.parse(attrs.dst_layout)
    if sorted(src.primal) != sorted(dst.primal):
        raise fail(op, f"{src.name} and {dst.name} do not have the same primal axes")
    if data.ndim != len(src.axes):
        raise fail(op, f"data of rank {data.ndim} {fmt_shape(data.shape)} does not match "
                       f"layout {src.name}")
    for letter, factor in src.axes:
        d = data.shape[src.index(letter)]
        if factor and not may_equal(d, factor):
            raise fail(op, f"sub-axis {letter} of {src.name} has size {fmt_dim(d)}, not {factor}")
    try:
        return tensor_of(transform_shape(src, dst, data.shape), data.dtype)
    except ValueError as err:
        raise fail(op, f"{fmt_shape(data.shape)} from {src.name} to {dst.name}: {err}") from None


def _relayout(src: Layout, dst: Layout, x: np.ndarray) -> np.ndarray:
    primal = to_primal(src, x)  # axes in src.primal order
    primal = primal.transpose([src.primal.index(a) for a in dst.primal])
    return np.ascontiguousarray(from_primal(dst, primal, dst.primal))


def _layout_transform_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.layout_transform(inputs[0], attrs.src_layout, attrs.dst_layout)]


defop("layout_transform", _layout_rel, lambda x, attrs: _relayout(
    Layout.parse(attrs.src_layout), Layout.parse(attrs.dst_layout), x),
    INJECTIVE, attrs=LayoutTransformAttrs, doc="Convert between data layouts, e.g. NCHW to NCHW8c.",
    compute=_layout_transform_compute)


def layout_transform(data: Any, src_layout: str, dst_layout: str) -> Call:
    """``data`` converted from ``src_layout`` to ``dst_layout`` (NCHW, NHWC, NCHW8c, ...)."""
    return call("layout_transform", data, attrs=LayoutTransformAttrs(src_layout, dst_layout))


def _shape_of_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The input's (possibly symbolic) dimensions as a 1-d tensor."""
    x, dtype = inputs[0], out_type.dtype  # type: ignore[attr-defined]

    def f(i: PrimExpr) -> PrimExpr:
        out: PrimExpr = tir.const(0, dtype)
        for k in range(x.ndim - 1, -1, -1):
            out = tir.Select_(i == k, tir.cast(x.shape[k], dtype), out)
        return out

    return [te.compute((tir.const(x.ndim),), f, name="T_shape_of", tag="injective")]


defop("shape_of", lambda args, attrs: tensor_of((args[0].ndim,), attrs.dtype),
      lambda x, attrs: np.array(x.shape, dtype=attrs.dtype), OPAQUE, attrs=ShapeOfAttrs,
      doc="The shape of a tensor as a 1-D tensor.", level=10, compute=_shape_of_compute)


def shape_of(data: Any, dtype: str = "int32") -> Call:
    """The shape of ``data`` as a 1-D tensor of ``dtype``."""
    return call("shape_of", data, attrs=ShapeOfAttrs(dtype))


# ---------------------------------------------------------------- te helpers of the compute rules
def _broadcast_to(x: te.Tensor, shape: Sequence[PrimExpr]) -> te.Tensor:
    shape = tuple(shape)
    return te.compute(shape, lambda *i: broadcast_load(x, i, shape), name="T_broadcast_to",
                      tag="broadcast")
