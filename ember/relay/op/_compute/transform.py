"""Compute rules of the data-movement ops (transform.py, indexing.py): reshapes, transpose,
squeeze/expand_dims, broadcast_to, tile, repeat, reverse, layout_transform, shape_of,
concatenate, stack, split, take, strided_slice.

Output shapes come from the call's type where it is static; a ``?`` dimension is rebuilt as an
expression of the input's (symbolic) dimensions, so the same kernel serves every size.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .... import topi
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ..indexing import _slice_plan
from ._common import (
    as_int,
    broadcast_load,
    norm_axis,
    out_dims,
    prod,
    register_compute,
    require,
    require_equal,
    tensor_types,
)


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


def _reshape(x: te.Tensor, out_type: TensorType, dims: Sequence[PrimExpr]) -> te.Tensor:
    shape = list(out_dims(out_type, dims))
    if any(as_int(d) is None for d in (*x.shape, *shape)):
        require(prod(x.shape).equal(prod(shape)),
                "the new shape must hold as many elements as the input")
    return topi.reshape(x, shape)


@register_compute("reshape")
def reshape(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [_reshape(x, out_type, _reshape_dims(x.shape, attrs.newshape))]  # type: ignore


@register_compute("contrib_reverse_reshape")
def reverse_reshape(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    dims = _reshape_dims(list(x.shape)[::-1], list(attrs.newshape)[::-1])[::-1]
    return [_reshape(x, out_type, dims)]  # type: ignore[arg-type]


@register_compute("reshape_like")
def reshape_like(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, like = inputs
    lhs_end = x.ndim if attrs.lhs_end is None else attrs.lhs_end
    rhs_end = like.ndim if attrs.rhs_end is None else attrs.rhs_end
    dims = [*x.shape[:attrs.lhs_begin], *like.shape[attrs.rhs_begin:rhs_end], *x.shape[lhs_end:]]
    return [_reshape(x, out_type, dims)]  # type: ignore[arg-type]


@register_compute("nn.batch_flatten")
def batch_flatten(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [_reshape(x, out_type, [x.shape[0], prod(x.shape[1:])])]  # type: ignore[arg-type]


@register_compute("transpose")
def transpose(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.transpose(inputs[0], attrs.axes)]


@register_compute("squeeze")
def squeeze(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    if attrs.axis is None:
        drop = [i for i, d in enumerate(x.shape) if as_int(d) == 1]
    else:
        drop = [norm_axis(a, x.ndim) for a in attrs.axis]
    return [topi.squeeze(x, drop)]


@register_compute("expand_dims")
def expand_dims(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    axis = attrs.axis if attrs.axis >= 0 else attrs.axis + x.ndim + 1
    return [topi.expand_dims(x, axis, attrs.num_newaxis)]


def _broadcast_to(x: te.Tensor, shape: Sequence[PrimExpr]) -> te.Tensor:
    shape = tuple(shape)
    return te.compute(shape, lambda *i: broadcast_load(x, i, shape), name="T_broadcast_to",
                      tag="broadcast")


@register_compute("broadcast_to")
def broadcast_to(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [_broadcast_to(inputs[0], [tir.const(d) for d in attrs.shape])]


@register_compute("broadcast_to_like")
def broadcast_to_like(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [_broadcast_to(inputs[0], inputs[1].shape)]


@register_compute("tile")
def tile(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.tile(inputs[0], attrs.reps)]


@register_compute("repeat")
def repeat(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.repeat(inputs[0], attrs.repeats, attrs.axis)]


@register_compute("reverse")
def reverse(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.reverse(inputs[0], attrs.axis)]


@register_compute("layout_transform")
def layout_transform(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [topi.layout_transform(inputs[0], attrs.src_layout, attrs.dst_layout)]


@register_compute("shape_of")
def shape_of(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """The input's (possibly symbolic) dimensions as a 1-d tensor."""
    x, dtype = inputs[0], out_type.dtype  # type: ignore[attr-defined]

    def f(i: PrimExpr) -> PrimExpr:
        out: PrimExpr = tir.const(0, dtype)
        for k in range(x.ndim - 1, -1, -1):
            out = tir.Select_(i == k, tir.cast(x.shape[k], dtype), out)
        return out

    return [te.compute((tir.const(x.ndim),), f, name="T_shape_of", tag="injective")]


# ---------------------------------------------------------------- joining and indexing
@register_compute("concatenate")
def concatenate(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    _require_same_dims(inputs, norm_axis(attrs.axis, inputs[0].ndim))
    return [topi.concatenate(inputs, attrs.axis)]


def _require_same_dims(inputs: list[te.Tensor], skip: int | None) -> None:
    for i, t in enumerate(inputs[1:], 1):
        for k, (a, b) in enumerate(zip(inputs[0].shape, t.shape)):
            if k != skip:
                require_equal(a, b, f"input {i} must have the size of input 0 in dimension {k}")


@register_compute("stack")
def stack(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    _require_same_dims(inputs, None)
    return [topi.stack(inputs, attrs.axis)]


def _window(x: te.Tensor, axis: int, start: PrimExpr, size: PrimExpr, name: str) -> te.Tensor:
    shape = tuple(size if k == axis else d for k, d in enumerate(x.shape))
    return te.compute(shape, lambda *i: x(*(i[:axis] + (i[axis] + start,) + i[axis + 1:])),
                      name=name, tag="injective")


@register_compute("split")
def split(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Equal sections or pieces between the (clamped) split indices."""
    x = inputs[0]
    axis = norm_axis(attrs.axis, x.ndim)
    d = x.shape[axis]
    spec = attrs.indices_or_sections
    if isinstance(spec, int):
        step = tir.floordiv(d, spec)
        bounds = [step * k for k in range(spec)] + [d]
    else:
        bounds = [tir.const(0)] + [tir.min(tir.const(b), d) for b in spec] + [d]
    outs = []
    for k, ty in enumerate(tensor_types(out_type)):
        lo, hi = bounds[k], bounds[k + 1]
        size = tir.const(ty.shape[axis]) if isinstance(ty.shape[axis], int) else (
            tir.max(hi - lo, tir.const(0)))
        outs.append(_window(x, axis, lo, size, f"T_split{k}"))
    return outs


@register_compute("take")
def take(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Gather along ``axis`` (flattened data when None), with batch_dims and clip/wrap/fast."""
    data, indices = inputs
    if attrs.axis is None:
        data = topi.reshape(data, [prod(data.shape)])
    axis = 0 if attrs.axis is None else norm_axis(attrs.axis, data.ndim)
    bd = attrs.batch_dims + (indices.ndim if attrs.batch_dims < 0 else 0)
    n = data.shape[axis]
    k = indices.ndim - bd
    shape = tuple(data.shape[:axis]) + tuple(indices.shape[bd:]) + tuple(data.shape[axis + 1:])

    def f(*idx: PrimExpr) -> PrimExpr:
        j = tir.cast(indices(*(idx[:bd] + idx[axis:axis + k])), "int32")
        if attrs.mode == "wrap":
            j = tir.floormod(j, n)
        elif attrs.mode == "clip":
            j = tir.min(tir.max(j, tir.const(0)), n - 1)
        else:  # fast: indices are in range, negative ones count from the end (np.take)
            j = tir.Select_(j < 0, j + n, j)
        return data(*(idx[:axis] + (j,) + idx[axis + k:]))

    return [te.compute(shape, f, name="T_take", tag="injective")]


def _slice_axis(d: PrimExpr, b: int, e: int | None, s: int, size_mode: bool
                ) -> tuple[PrimExpr, PrimExpr, int]:
    """(begin, extent, stride) on an axis of te size ``d`` (Relay's clamping rules)."""
    if size_mode:
        begin = d + b if b < 0 else tir.const(b)
        end = d if e is None or e < 0 else begin + e
        s = 1
    else:
        begin = d + b if b < 0 else tir.const(b)
        end = (d if s > 0 else tir.const(-1)) if e is None else (d + e if e < 0 else tir.const(e))
    lo, hi = (tir.const(0), d) if s > 0 else (tir.const(-1), d - 1)
    begin = tir.min(tir.max(begin, lo), hi)
    end = tir.min(tir.max(end, lo), hi)
    extent = (end - begin + (s - 1)) // s if s > 0 else (begin - end + (-s - 1)) // (-s)
    return begin, tir.max(extent, tir.const(0)), s


@register_compute("strided_slice")
def strided_slice(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    starts: list[PrimExpr] = [tir.const(0)] * x.ndim
    steps = [1] * x.ndim
    dims = list(x.shape)
    for axis, (b, e, s) in _slice_plan("strided_slice", x.ndim, attrs).items():
        starts[axis], dims[axis], steps[axis] = _slice_axis(x.shape[axis], b, e, s,
                                                            attrs.slice_mode == "size")
    shape = out_dims(out_type, dims)  # type: ignore[arg-type]
    return [te.compute(shape, lambda *i: x(*[b + j * s for b, j, s in zip(starts, i, steps)]),
                       name="T_strided_slice", tag="injective")]
