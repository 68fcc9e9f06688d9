"""Joining and indexing operators: concatenate, stack, split, take, strided_slice."""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import topi
from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.types import Any as AnyDim
from ...ir.types import Dim, TensorType, TupleType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ...topi.layout_nchwc import channel_prefix
from ._compute_common import (
    norm_axis as _te_norm_axis,
)
from ._compute_common import (
    out_dims,
    prod,
    require_equal,
    tensor_types,
)
from ._dispatch import dyn_op, run_time
from ._reg import INJECTIVE, as_tuple_expr, call, defop
from ._shape import dim_add, fail, fmt_shape, known, may_equal, norm_axis, tensor_of, unify_dim
from ._tuple import TupleWrapper
from .attrs import ConcatenateAttrs, SplitAttrs, StackAttrs, StridedSliceAttrs, TakeAttrs

__all__ = ["concatenate", "split", "stack", "strided_slice", "take"]


# ---------------------------------------------------------------- concatenate, stack
def _common_fields(op: str, tup: TupleType, skip_axis: int | None) -> tuple[list[Dim], str]:
    """Check the tensors of ``tup`` agree (dtype, rank, dims but ``skip_axis``); unify dims."""
    fields: list[TensorType] = list(tup.fields)  # type: ignore[arg-type]
    if not fields:
        raise fail(op, "needs at least one tensor, got an empty tuple")
    first = fields[0]
    shape = list(first.shape)
    for k, ty in enumerate(fields[1:], 1):
        if ty.dtype != first.dtype:
            raise fail(op, f"tensor 0 is {first.dtype} but tensor {k} is {ty.dtype}")
        if ty.ndim != first.ndim:
            raise fail(op, f"tensor 0 has rank {first.ndim} {fmt_shape(first.shape)} but "
                           f"tensor {k} has rank {ty.ndim} {fmt_shape(ty.shape)}")
        for i, d in enumerate(ty.shape):
            if i == skip_axis:
                continue
            if not may_equal(shape[i], d):
                raise fail(op, f"tensor 0 has shape {fmt_shape(first.shape)} but tensor {k} "
                               f"has {fmt_shape(ty.shape)}: dimension {i} differs")
            shape[i] = unify_dim(shape[i], d)
    return shape, first.dtype


def _concat_rel(args: list[TupleType], attrs: ConcatenateAttrs) -> TensorType:
    tup = args[0]
    ndim = tup.fields[0].ndim if tup.fields else 0  # type: ignore[attr-defined]
    if tup.fields and ndim == 0:
        raise fail("concatenate", "cannot concatenate scalars (rank 0)")
    axis = norm_axis("concatenate", attrs.axis, ndim) if tup.fields else 0
    shape, dtype = _common_fields("concatenate", tup, axis)
    total: Dim = 0
    for ty in tup.fields:
        total = dim_add(total, ty.shape[axis])  # type: ignore[attr-defined]
    shape[axis] = total
    return tensor_of(shape, dtype)


def _concatenate_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    _require_same_dims(inputs, _te_norm_axis(attrs.axis, inputs[0].ndim))
    return [topi.concatenate(inputs, attrs.axis)]


defop("concatenate", _concat_rel, lambda xs, attrs: np.concatenate(xs, attrs.axis), INJECTIVE,
      attrs=ConcatenateAttrs, tuple_input=True, doc="Join tensors along an existing axis.",
      compute=_concatenate_compute)


def concatenate(data: Any, axis: int) -> Call:
    """The tensors of ``data`` (a list or a tuple expression) joined along ``axis``."""
    return call("concatenate", as_tuple_expr(data), attrs=ConcatenateAttrs(axis))


def _stack_rel(args: list[TupleType], attrs: StackAttrs) -> TensorType:
    tup = args[0]
    shape, dtype = _common_fields("stack", tup, None)
    axis = norm_axis("stack", attrs.axis, len(shape) + 1)
    shape.insert(axis, len(tup.fields))
    return tensor_of(shape, dtype)


def _stack_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    _require_same_dims(inputs, None)
    return [topi.stack(inputs, attrs.axis)]


defop("stack", _stack_rel, lambda xs, attrs: np.stack(xs, attrs.axis), INJECTIVE,
      attrs=StackAttrs, tuple_input=True, doc="Join same-shaped tensors along a new axis.",
      compute=_stack_compute)


def stack(data: Any, axis: int) -> Call:
    """The tensors of ``data`` stacked along a new axis at ``axis``."""
    return call("stack", as_tuple_expr(data), attrs=StackAttrs(axis))


# ---------------------------------------------------------------- split
def _split_sizes(op: str, d: Dim, spec: int | tuple[int, ...]) -> list[Dim]:
    if isinstance(spec, int):
        if known(d) and d % spec:  # type: ignore[operator]
            raise fail(op, f"cannot split a dimension of size {d} into {spec} equal sections")
        return [d // spec if known(d) else AnyDim()] * spec  # type: ignore[operator]
    bounds = [0, *spec]
    if not known(d):
        return [max(0, b - a) for a, b in itertools.pairwise(bounds)] + [AnyDim()]
    bounds = [min(b, d) for b in bounds] + [d]  # type: ignore[type-var]
    return [max(0, b - a) for a, b in itertools.pairwise(bounds)]


def _split_rel(args: list[TensorType], attrs: SplitAttrs) -> TupleType:
    data = args[0]
    axis = norm_axis("split", attrs.axis, data.ndim)
    sizes = _split_sizes("split", data.shape[axis], attrs.indices_or_sections)
    shapes = [[*data.shape[:axis], s, *data.shape[axis + 1:]] for s in sizes]
    return TupleType(tuple(tensor_of(s, data.dtype) for s in shapes))


def _split_ref(x: np.ndarray, attrs: SplitAttrs) -> tuple[np.ndarray, ...]:
    spec = attrs.indices_or_sections
    return tuple(np.split(x, spec if isinstance(spec, int) else list(spec), attrs.axis))


def _split_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Equal sections or pieces between the (clamped) split indices."""
    x = inputs[0]
    axis = _te_norm_axis(attrs.axis, x.ndim)
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


defop("split", _split_rel, _split_ref, INJECTIVE, attrs=SplitAttrs,
      doc="Split into equal sections or at given indices (a tuple result).", compute=_split_compute)


def split(data: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> TupleWrapper:
    """``data`` split along ``axis`` into N equal sections, or at the given indices.

    Returns a TupleWrapper: ``split(x, 2)[0]`` is the first part.
    """
    spec = indices_or_sections
    spec = tuple(spec) if isinstance(spec, (list, tuple)) else spec
    size = spec if isinstance(spec, int) else len(spec) + 1
    return TupleWrapper(call("split", data, attrs=SplitAttrs(spec, axis)), size)


# ---------------------------------------------------------------- take
def _take_rel(args: list[TensorType], attrs: TakeAttrs) -> TensorType:
    data, indices = args
    if not indices.dtype.startswith(("int", "uint")):
        raise fail("take", f"indices must be an integer tensor, got {indices.dtype}")
    if attrs.axis is None:
        return tensor_of(indices.shape, data.dtype)
    axis = norm_axis("take", attrs.axis, data.ndim)
    bd = attrs.batch_dims + (indices.ndim if attrs.batch_dims < 0 else 0)
    if not 0 <= bd <= min(axis, indices.ndim):
        limit = min(axis, indices.ndim)
        raise fail("take", f"batch_dims {attrs.batch_dims} must be in [0, {limit}]"
                           f" for axis {axis} and indices of rank {indices.ndim}")
    for i in range(bd):
        if not may_equal(data.shape[i], indices.shape[i]):
            raise fail("take", f"batch dimension {i} differs: data {fmt_shape(data.shape)}, "
                               f"indices {fmt_shape(indices.shape)}")
    shape = [*data.shape[:axis], *indices.shape[bd:], *data.shape[axis + 1:]]
    return tensor_of(shape, data.dtype)


def _fix_indices(idx: np.ndarray, n: int, mode: str) -> np.ndarray:
    if mode == "clip":
        return np.clip(idx, 0, n - 1)
    if mode == "wrap":
        return np.mod(idx, n)
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise IndexError(f"take: index {idx[bad].flat[0]} out of range for an axis of size {n} "
                         "(mode 'fast' does not check indices; use 'clip' or 'wrap')")
    return idx


def _take_ref(data: np.ndarray, idx: np.ndarray, attrs: TakeAttrs) -> np.ndarray:
    if attrs.axis is None:
        data, axis = data.reshape(-1), 0
    else:
        axis = attrs.axis % data.ndim
    idx = _fix_indices(idx.astype(np.int64), data.shape[axis], attrs.mode)
    bd = attrs.batch_dims + (idx.ndim if attrs.batch_dims < 0 else 0)
    if bd == 0:
        return np.take(data, idx, axis=axis)
    lead = data.shape[:bd]
    d = data.reshape((-1, *data.shape[bd:]))
    i = idx.reshape((-1, *idx.shape[bd:]))
    parts = [np.take(d[k], i[k], axis=axis - bd) for k in range(d.shape[0])]
    out_tail = [*data.shape[bd:axis], *idx.shape[bd:], *data.shape[axis + 1:]]
    return np.array(parts, dtype=data.dtype).reshape((*lead, *out_tail))


def _take_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Gather along ``axis`` (flattened data when None), with batch_dims and clip/wrap/fast."""
    data, indices = inputs
    if attrs.axis is None:
        data = topi.reshape(data, [prod(data.shape)])
    axis = 0 if attrs.axis is None else _te_norm_axis(attrs.axis, data.ndim)
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


defop("take", _take_rel, _take_ref, INJECTIVE, args=("data", "indices"), attrs=TakeAttrs,
      doc="Gather elements along an axis (or of the flattened data).", compute=_take_compute)


def take(data: Any, indices: Any, axis: int | None = None, batch_dims: int = 0,
         mode: str = "clip") -> Call:
    """Elements of ``data`` at ``indices`` along ``axis`` (None: of the flattened data).

    mode: "clip" clamps indices into range, "wrap" takes them modulo the size, "fast" assumes
    they are in range.
    """
    return call("take", data, indices, attrs=TakeAttrs(axis, batch_dims, mode))


# ---------------------------------------------------------------- strided_slice
def _slice_axis(d: int, b: int, e: int | None, s: int, size_mode: bool) -> tuple[int, int, int]:
    """Canonical (begin, end, stride) on an axis of size ``d``; end -1 means 'before 0'."""
    if size_mode:
        b = b + d if b < 0 else b
        e, s = (d if e is None or e < 0 else b + e), 1
    else:
        b = b + d if b < 0 else b
        e = (d if s > 0 else -1) if e is None else (e + d if e < 0 else e)
    lo, hi = (0, d) if s > 0 else (-1, d - 1)
    return min(max(b, lo), hi), min(max(e, lo), hi), s


def _slice_plan(op: str, ndim: int, attrs: StridedSliceAttrs) -> dict[int, tuple[int, Any, int]]:
    """Axis -> (begin, end or None, stride) for every sliced axis."""
    axes = attrs.axes if attrs.axes is not None else tuple(range(len(attrs.begin)))
    if len(axes) > ndim:
        raise fail(op, f"begin has {len(axes)} entries but data has rank {ndim}")
    plan = {}
    for k, a in enumerate(axes):
        end = attrs.end[k] if k < len(attrs.end) else None
        stride = attrs.strides[k] if k < len(attrs.strides) else (
            attrs.strides[0] if len(attrs.strides) == 1 else 1)
        plan[norm_axis(op, a, ndim)] = (attrs.begin[k], end, stride)
    return plan


def _slice_rel(args: list[TensorType], attrs: StridedSliceAttrs) -> TensorType:
    data = args[0]
    shape = list(data.shape)
    for axis, (b, e, s) in _slice_plan("strided_slice", data.ndim, attrs).items():
        d = shape[axis]
        if not known(d):
            shape[axis] = AnyDim()
            continue
        b, e, s = _slice_axis(d, b, e, s, attrs.slice_mode == "size")  # type: ignore[arg-type]
        shape[axis] = max(0, math.ceil((e - b) / s))
    return tensor_of(shape, data.dtype)


def _slice_ref(x: np.ndarray, attrs: StridedSliceAttrs) -> np.ndarray:
    for axis, (b, e, s) in _slice_plan("strided_slice", x.ndim, attrs).items():
        b, e, s = _slice_axis(x.shape[axis], b, e, s, attrs.slice_mode == "size")
        x = np.take(x, np.arange(b, e, s), axis=axis)  # explicit: end -1 is not "last"
    return x.copy()


def _strided_slice_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    starts: list[PrimExpr] = [tir.const(0)] * x.ndim
    steps = [1] * x.ndim
    dims = list(x.shape)
    for axis, (b, e, s) in _slice_plan("strided_slice", x.ndim, attrs).items():
        starts[axis], dims[axis], steps[axis] = _slice_axis_compute(x.shape[axis], b, e, s,
                                                            attrs.slice_mode == "size")
    shape = out_dims(out_type, dims)  # type: ignore[arg-type]
    copy = channel_prefix(x, starts, steps, shape)
    if copy is not None:  # the first channels of a blocked copy back to NCHW: one kernel call
        return [copy]
    return [te.compute(shape, lambda *i: x(*[b + j * s for b, j, s in zip(starts, i, steps)]),
                       name="T_strided_slice", tag="injective")]


defop("strided_slice", _slice_rel, _slice_ref, INJECTIVE, attrs=StridedSliceAttrs,
      doc="Slice with begin/end/strides per axis.", level=4, compute=_strided_slice_compute)


def _static_ints(name: str, v: Any) -> Any:
    if isinstance(v, Constant):  # (an expression went to dyn.strided_slice)
        return v.data.numpy().reshape(-1).tolist()
    return v


def strided_slice(data: Any, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None, axes: Sequence[int] | None = None,
                  slice_mode: str = "end") -> Call:
    """``data[begin:end:strides]`` per axis (``axes`` names the axes begin/end refer to).

    Negative begin/end count from the end; out-of-range values are clamped. slice_mode "size"
    reads ``end`` as a size (-1: to the end) and ignores strides.
    """
    if run_time(begin, end, strides):  # bounds known at run time: dyn.strided_slice
        return _dyn_slice(data, begin, end, strides, axes, slice_mode)
    attrs = StridedSliceAttrs(_static_ints("begin", begin), _static_ints("end", end),
                              (1,) if strides is None else _static_ints("strides", strides),
                              axes, slice_mode)
    return call("strided_slice", data, attrs=attrs)


def _dyn_slice(data: Any, begin: Any, end: Any, strides: Any, axes: Any, slice_mode: str
               ) -> Call:
    def tensor(v: Any) -> RelayExpr:
        return v if isinstance(v, RelayExpr) else const(np.asarray(v, "int64").reshape(-1))
    return dyn_op("strided_slice")(data, tensor(begin), tensor(end),
                                   tensor(1 if strides is None else strides), axes, slice_mode)


# ---------------------------------------------------------------- te helpers of the compute rules
def _require_same_dims(inputs: list[te.Tensor], skip: int | None) -> None:
    for i, t in enumerate(inputs[1:], 1):
        for k, (a, b) in enumerate(zip(inputs[0].shape, t.shape)):
            if k != skip:
                require_equal(a, b, f"input {i} must have the size of input 0 in dimension {k}")


def _window(x: te.Tensor, axis: int, start: PrimExpr, size: PrimExpr, name: str) -> te.Tensor:
    shape = tuple(size if k == axis else d for k, d in enumerate(x.shape))
    return te.compute(shape, lambda *i: x(*(i[:axis] + (i[axis] + start,) + i[axis + 1:])),
                      name=name, tag="injective")


def _slice_axis_compute(d: PrimExpr, b: int, e: int | None, s: int, size_mode: bool
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
