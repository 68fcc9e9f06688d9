"""Shape-changing operators: reshape (and reverse/like forms), transpose, squeeze, expand_dims,
broadcast_to(_like), tile, repeat, reverse, layout_transform, shape_of.

The indexing ops (concatenate, stack, split, take, strided_slice) are in ``indexing.py`` and
re-exported here, so ``relay.op.transform.take`` works as in Relay.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import topi
from ...ir.expr import Call
from ...ir.types import Any as AnyDim
from ...ir.types import Dim, ShapeVar, TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from . import indexing
from ._compute_common import (
    as_int,
    broadcast_load,
    prod,
    reshape_to,
)
from ._compute_common import (
    norm_axis as _te_norm_axis,
)
from ._layout import Layout, from_primal, to_primal, transform_shape
from ._reg import BROADCAST, INJECTIVE, OPAQUE, call, defop
from ._shape import (
    dim_mul,
    dim_prod,
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
    ReshapeAttrs,
    ReshapeLikeAttrs,
    ReverseAttrs,
    ShapeOfAttrs,
    SqueezeAttrs,
    TileAttrs,
    TransposeAttrs,
)
from .indexing import *

__all__ = [
    "broadcast_to",
    "broadcast_to_like",
    "expand_dims",
    "layout_transform",
    "repeat",
    "reshape",
    "reshape_like",
    "reverse",
    "reverse_reshape",
    "shape_of",
    "squeeze",
    "tile",
    "transpose",
]
__all__ += indexing.__all__


# ---------------------------------------------------------------- reshape
def _split_dim(op: str, d: Dim, a: int, b: int) -> list[Dim]:
    """-4: split input dim ``d`` into (a, b), one of which may be -1."""
    if a == -1 and b == -1:
        raise fail(op, "-4 cannot be followed by two -1")
    if -1 in (a, b):
        other = b if a == -1 else a
        inferred: Dim = d // other if known(d) else AnyDim()  # type: ignore[operator]
        a, b = (inferred, b) if a == -1 else (a, inferred)  # type: ignore[assignment]
    if known(d, a, b) and a * b != d:
        raise fail(op, f"-4 splits a dimension of {d} into {a} x {b}")
    return [a, b]


def _cancel_symbols(shape: Sequence[Dim], rest: Sequence[Dim]) -> tuple[int, int] | None:
    """Static (input, output) element counts once identical ShapeVars on both sides cancel.

    ``(n, 3, 4)`` into ``(0, -1)`` keeps ``n`` and infers 12. None if anything stays unknown.
    """
    sym_in = [d for d in shape if not isinstance(d, int)]
    for d in (d for d in rest if not isinstance(d, int)):
        match = next((i for i, s in enumerate(sym_in) if s is d and isinstance(s, ShapeVar)), None)
        if match is None:
            return None
        sym_in.pop(match)
    if sym_in:
        return None
    return (dim_prod(d for d in shape if isinstance(d, int)),  # type: ignore[return-value]
            dim_prod(d for d in rest if isinstance(d, int)))


def infer_reshape(op: str, shape: Sequence[Dim], newshape: Sequence[int]) -> list[Dim]:
    """The output shape of reshape, applying TVM's special values 0, -1, -2, -3, -4."""
    out: list[Dim] = []
    src, i, infer_at = 0, 0, -1

    def need(n: int, what: str) -> None:
        if src + n > len(shape):
            raise fail(op, f"newshape {tuple(newshape)}: {what} has no input dimension left "
                           f"(input shape {fmt_shape(shape)})")

    while i < len(newshape):
        v = newshape[i]
        if v > 0:
            out.append(v)
        elif v == 0:
            need(1, "0 (copy a dimension)")
            out.append(shape[src])
        elif v == -1:
            if infer_at >= 0:
                raise fail(op, f"newshape {tuple(newshape)} has more than one -1")
            infer_at = len(out)
            out.append(1)
        elif v == -2:
            out.extend(shape[src:])
            src = len(shape)
        elif v == -3:
            need(2, "-3 (merge two dimensions)")
            out.append(dim_mul(shape[src], shape[src + 1]))
            src += 1
        elif v == -4:
            if i + 2 >= len(newshape):
                raise fail(op, f"newshape {tuple(newshape)}: -4 must be followed by two sizes")
            need(1, "-4 (split a dimension)")
            out.extend(_split_dim(op, shape[src], newshape[i + 1], newshape[i + 2]))
            i += 2
        src += 1 if v != -2 else 0
        i += 1
    if infer_at >= 0:
        out[infer_at] = _inferred_dim(op, shape, newshape, out[:infer_at] + out[infer_at + 1:])
    total, new_total = dim_prod(shape), dim_prod(out)
    if known(total, new_total) and total != new_total:
        raise fail(op, f"cannot reshape {fmt_shape(shape)} into {fmt_shape(out)}: "
                       f"{total} elements vs {new_total}")
    return out


def _inferred_dim(op: str, shape: Sequence[Dim], newshape: Sequence[int],
                  rest_dims: list[Dim]) -> Dim:
    """The size a -1 stands for: the input's element count over the other output dims."""
    total = dim_prod(shape)
    total_k, rest = _cancel_symbols(shape, rest_dims) or (total, dim_prod(rest_dims))
    if not known(total_k, rest):
        return AnyDim()
    if rest == 0 or total_k % rest:  # type: ignore[operator]
        raise fail(op, f"cannot reshape {fmt_shape(shape)} into {tuple(newshape)}: "
                       f"{fmt_dim(total)} elements do not divide by {fmt_dim(rest)}")
    return total_k // rest  # type: ignore[operator]


def _reshape_rel(args: list[TensorType], attrs: ReshapeAttrs) -> TensorType:
    return tensor_of(infer_reshape("reshape", args[0].shape, attrs.newshape), args[0].dtype)


def _reshape_ref(x: np.ndarray, attrs: ReshapeAttrs) -> np.ndarray:
    return x.reshape(infer_reshape("reshape", x.shape, attrs.newshape))


def _reshape_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [reshape_to(x, out_type, _reshape_dims(x.shape, attrs.newshape))]  # type: ignore


defop("reshape", _reshape_rel, _reshape_ref, INJECTIVE, attrs=ReshapeAttrs,
      doc="Same data, new shape (special values 0, -1, -2, -3, -4 as in Relay).",
      compute=_reshape_compute)


def reshape(data: Any, newshape: Sequence[int] | int) -> Call:
    """``data`` with a new shape. In ``newshape``: 0 copies the input dim, -1 infers one dim,
    -2 copies the remaining dims, -3 merges two input dims, -4 splits one into the next two."""
    return call("reshape", data, attrs=ReshapeAttrs(newshape))


def _reverse_infer(op: str, shape: Sequence[Dim], newshape: Sequence[int]) -> list[Dim]:
    return infer_reshape(op, list(shape)[::-1], list(newshape)[::-1])[::-1]


def _reverse_reshape_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    dims = _reshape_dims(list(x.shape)[::-1], list(attrs.newshape)[::-1])[::-1]
    return [reshape_to(x, out_type, dims)]  # type: ignore[arg-type]


defop("contrib_reverse_reshape",
      lambda args, attrs: tensor_of(_reverse_infer("reverse_reshape", args[0].shape,
                                                   attrs.newshape), args[0].dtype),
      lambda x, attrs: x.reshape(_reverse_infer("reverse_reshape", x.shape, attrs.newshape)),
      INJECTIVE, attrs=ReshapeAttrs, doc="reshape with special values applied right to left.",
      compute=_reverse_reshape_compute)


def reverse_reshape(data: Any, newshape: Sequence[int] | int) -> Call:
    """Like ``reshape``, but special values are matched from the right
    (``(10, 5, 4)`` with ``(-1, 0)`` gives ``(50, 4)``)."""
    return call("contrib_reverse_reshape", data, attrs=ReshapeAttrs(newshape))


def _like_shape(op: str, data: Sequence[Dim], like: Sequence[Dim],
                attrs: ReshapeLikeAttrs) -> list[Dim]:
    lhs_end = len(data) if attrs.lhs_end is None else attrs.lhs_end
    rhs_end = len(like) if attrs.rhs_end is None else attrs.rhs_end
    out = [*data[:attrs.lhs_begin], *like[attrs.rhs_begin:rhs_end], *data[lhs_end:]]
    total, new_total = dim_prod(data), dim_prod(out)
    if known(total, new_total) and total != new_total:
        raise fail(op, f"cannot reshape {fmt_shape(data)} like {fmt_shape(like)}: "
                       f"{total} elements vs {new_total}")
    return out


def _reshape_like_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, like = inputs
    lhs_end = x.ndim if attrs.lhs_end is None else attrs.lhs_end
    rhs_end = like.ndim if attrs.rhs_end is None else attrs.rhs_end
    dims = [*x.shape[:attrs.lhs_begin], *like.shape[attrs.rhs_begin:rhs_end], *x.shape[lhs_end:]]
    return [reshape_to(x, out_type, dims)]  # type: ignore[arg-type]


defop("reshape_like",
      lambda args, attrs: tensor_of(_like_shape("reshape_like", args[0].shape, args[1].shape,
                                                attrs), args[0].dtype),
      lambda x, like, attrs: x.reshape(_like_shape("reshape_like", x.shape, like.shape, attrs)),
      INJECTIVE, args=("data", "shape_like"), attrs=ReshapeLikeAttrs,
      doc="Reshape data to the shape of another tensor.", compute=_reshape_like_compute)


def reshape_like(data: Any, shape_like: Any, lhs_begin: int = 0, lhs_end: int | None = None,
                 rhs_begin: int = 0, rhs_end: int | None = None) -> Call:
    """``data`` reshaped so dims [lhs_begin, lhs_end) become shape_like's [rhs_begin, rhs_end)."""
    attrs = ReshapeLikeAttrs(lhs_begin, lhs_end, rhs_begin, rhs_end)
    return call("reshape_like", data, shape_like, attrs=attrs)


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
    """``data`` without the given size-1 axes (None: all size-1 axes)."""
    return call("squeeze", data, attrs=SqueezeAttrs(axis))


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
    """``data`` with ``num_newaxis`` size-1 axes inserted at ``axis`` (in [-ndim-1, ndim])."""
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
    return call("tile", data, attrs=TileAttrs(reps))


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
def _reshape_dims(shape: Sequence[PrimExpr], newshape: Sequence[int]) -> list[PrimExpr]:
    """Relay's reshape special values (0, -1, -2, -3, -4) over te dimensions."""
    out: list[PrimExpr] = []
    src, i, infer_at = 0, 0, -1
    while i < len(newshape):
        v = newshape[i]
        if v > 0:
            out.append(tir.const(v))
        elif v == 0:
            out.append(shape[src])
        elif v == -1:
            infer_at = len(out)
            out.append(tir.const(1))
        elif v == -2:
            out.extend(shape[src:])
            src = len(shape)
        elif v == -3:
            out.append(shape[src] * shape[src + 1])
            src += 1
        elif v == -4:
            a, b = newshape[i + 1], newshape[i + 2]
            d = shape[src]
            out += [tir.floordiv(d, b) if a == -1 else tir.const(a),
                    tir.floordiv(d, a) if b == -1 else tir.const(b)]
            i += 2
        src += 1 if v != -2 else 0
        i += 1
    if infer_at >= 0:
        rest = out[:infer_at] + out[infer_at + 1:]
        out[infer_at] = tir.floordiv(prod(shape), prod(rest))
    return out


def _broadcast_to(x: te.Tensor, shape: Sequence[PrimExpr]) -> te.Tensor:
    shape = tuple(shape)
    return te.compute(shape, lambda *i: broadcast_load(x, i, shape), name="T_broadcast_to",
                      tag="broadcast")
