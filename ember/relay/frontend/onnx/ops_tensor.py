"""Converters of the data-movement operators: Flatten, Transpose, Concat, Split, Slice,
Squeeze, Unsqueeze, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, OneHot.

Axes and sizes that became inputs in later opsets (Split's split and Squeeze/Unsqueeze's
axes at 13, Pad's axes at 18) are read from the attribute or the input, whichever the node's
opset defines. Slice bounds, Tile repetitions, Pad widths, Split sizes, Trilu's k and
OneHot's depth known only at run time go to the dynamic ops (``dyn.strided_slice``,
``dyn.tile``, ``dyn.nn.pad``, ``dyn.one_hot``; ``_runtime_values.py``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import RelayExpr
from ....ir.types import ShapeVar
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._symbolic import SymShape
from ._util import flatten_to_2d, norm_axes, norm_axis, scalar, static

INT32_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1


def flatten(node: Node) -> RelayExpr:
    ty = node.type(0)
    axis = node.attr("axis", 1)
    if not -ty.ndim <= axis <= ty.ndim:
        raise node.fail(f"axis {axis} is out of range for an input of rank {ty.ndim}")
    return flatten_to_2d(node.input(0), ty, axis + ty.ndim if axis < 0 else axis)


def transpose(node: Node) -> RelayExpr:
    ndim = node.ndim(0)
    perm = node.attr("perm", None)
    if perm is None:
        perm = list(range(ndim))[::-1]
    if sorted(norm_axes(node, perm, ndim, "perm")) != list(range(ndim)):
        raise node.invalid_attr("perm", perm, f"a permutation of {ndim} axes")
    return _op.transpose(node.input(0), perm)


def concat(node: Node) -> RelayExpr:
    xs = node.inputs()
    if not xs:
        raise node.fail("needs at least one input")
    ndim = node.ndim(0)
    axis = norm_axis(node, node.attr("axis", 1) if node.version < 4 else node.attr("axis"), ndim)
    syms = [node.sym(i) for i in range(node.num_inputs) if node.has_input(i)]
    if ndim == 1 and all(s is not None and not s.scalar for s in syms):
        node.set_sym(SymShape(tuple(e for s in syms for e in s.elems)))  # type: ignore
    if len(xs) == 1:
        return xs[0]
    return _op.concatenate(xs, axis)


# ---------------------------------------------------------------- Split
def split(node: Node) -> list[RelayExpr]:
    x, ty = node.input(0), node.type(0)
    axis = norm_axis(node, node.attr("axis", 0), ty.ndim)
    n = node.num_outputs
    if _sizes_input(node) and node.value(1) is None:  # sizes known only at run time
        return _split_run_time(node, x, axis, n)
    sizes = _split_sizes(node, ty.shape[axis])
    if sizes is None:  # equal parts
        parts = _op.split(x, n, axis)
        return [parts[i] for i in range(n)]
    if len(sizes) != n:
        raise node.fail(f"split has {len(sizes)} sizes but the node has {n} outputs")
    dim = ty.shape[axis]
    if isinstance(dim, int) and sum(sizes) != dim:
        raise node.fail(f"split sizes {sizes} do not add up to the axis size {dim}")
    if n == 1:
        return [x]
    parts = _op.split(x, np.cumsum(sizes)[:-1].tolist(), axis)
    return [parts[i] for i in range(n)]


def _sizes_input(node: Node) -> bool:
    """Whether the split sizes are input 1 (Split-1, and from opset 13)."""
    return node.has_input(1) and (node.version < 2 or node.opset >= 13)


def _split_run_time(node: Node, x: RelayExpr, axis: int, n: int) -> list[RelayExpr]:
    """Parts of run-time sizes: part k is [sum of sizes < k, sum of sizes <= k) on the axis.
    The last part ends at the size of a reshape of the axis to the sizes' total, so sizes
    that do not add up to the axis fail there, naming the node."""
    sizes = rt.int64(node, 1, "split")
    if rt.length(node, 1, "split") != n:
        raise node.fail(f"split has {node.type(1).shape[0]} sizes but the node has {n} outputs")
    ends = _op.cumsum(sizes, axis=0)
    begins = _op.subtract(ends, sizes)
    ndim = node.ndim(0)
    others = [a for a in range(ndim) if a != axis]
    line = _op.strided_slice(x, [0] * len(others), [1] * len(others), axes=others)
    total = _op.take(ends, rt.vector([n - 1]), axis=0)
    last_end = _op.shape_of(_op.dyn.reshape(line, total, where=node.label), rt.I64)
    one = rt.vector([1])
    parts = []
    for k in range(n):
        pick = rt.vector([k])
        end = last_end if k == n - 1 else _op.take(ends, pick, axis=0)
        parts.append(_op.dyn.strided_slice(x, _op.take(begins, pick, axis=0), end, one,
                                           axes=[axis], where=node.label))
    return parts


def _split_sizes(node: Node, dim: Any) -> list[int] | None:
    """Explicit sizes (attribute before 13, input after; Split-1 takes either), num_outputs
    sizes (18), or None for equal parts."""
    if node.version < 2 and node.has_input(1):
        return node.ints(1, "split")
    if node.opset < 13 and node.has_attr("split"):
        return [int(v) for v in node.attr("split")]
    if node.opset >= 13 and node.has_input(1):
        return node.ints(1, "split")
    parts = node.attr("num_outputs", None) if node.opset >= 18 else None
    if parts is None or not isinstance(dim, int) or dim % parts == 0:
        return None
    chunk = -(-dim // parts)
    return [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])


# ---------------------------------------------------------------- Slice
def slice_(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
    node.input(2, "ends")
    if len({str(node.type(i).shape) for i in range(1, 5) if node.has_input(i)}) > 1:
        raise node.fail("starts, ends, axes and steps must have the same length")
    out = _slice_known(node, x, ty)
    return _slice_run_time(node, x, ty.ndim) if out is None else out


def _slice_known(node: Node, x: RelayExpr, ty: Any) -> RelayExpr | None:
    """strided_slice for bounds known at import (ends may be the axis's own run-time size);
    None when they are only known at run time."""
    values = [node.value(i) for i in (1, 3, 4)]
    ends_sym = node.sym(2)
    if values[0] is None or ends_sym is None or any(
            node.has_input(i) and v is None for i, v in zip((3, 4), values[1:])):
        return None
    starts = node.ints(1, "starts")
    n = len(starts)
    axes = node.ints(3, "axes") if node.has_input(3) else list(range(n))
    steps = node.ints(4, "steps") if node.has_input(4) else [1] * n
    axes = norm_axes(node, axes, ty.ndim)
    if 0 in steps:
        raise node.fail("steps must not be 0")
    if any(not isinstance(e, int) and (e is not ty.shape[a] or s < 0)
           for e, a, s in zip(ends_sym.elems, axes, steps)):
        return None  # an end that is another run-time size
    if any(s < 0 and b < 0 and not isinstance(ty.shape[a], int)
           for b, a, s in zip(starts, axes, steps)):
        return None  # ONNX's clamp of a backwards start needs the run-time size
    ends = [_end(e, ty.shape[a]) for e, a in zip(ends_sym.elems, axes)]
    begin = [_start(b, ty.shape[a], s) for b, a, s in zip(starts, axes, steps)]
    _slice_sym(node, starts, ends, axes, steps)
    return _op.strided_slice(x, begin, ends, steps, axes=axes)


def _slice_run_time(node: Node, x: RelayExpr, ndim: int) -> RelayExpr:
    """dyn.strided_slice of run-time bounds; run-time axes scatter the bounds into one per
    axis (the others: the whole axis)."""
    n = rt.length(node, 1, "starts")
    begin, end = rt.int64(node, 1, "starts"), rt.int64(node, 2, "ends")
    steps = rt.int64(node, 4, "steps") if node.has_input(4) else rt.vector([1] * n)
    axes: Any = list(range(n))
    if node.has_input(3):
        known = node.value(3)
        axes = (norm_axes(node, [int(a) for a in known.reshape(-1)], ndim) if known is not None
                else rt.nonnegative_axes(rt.int64(node, 3, "axes"), ndim))
    if isinstance(axes, RelayExpr):
        begin, end = rt.on_axes(begin, axes, ndim, 0), rt.on_axes(end, axes, ndim, INT64_MAX)
        steps, axes = rt.on_axes(steps, axes, ndim, 1), list(range(ndim))
    known_steps = node.value(4) if node.has_input(4) else np.ones(n)
    if known_steps is None or (known_steps < 0).any():
        # ONNX clamps a backwards start into [0, dim - 1], Relay into [-1, dim - 1]
        floor = _op.negative(rt.dims_at(x, axes))
        begin = _op.where(_op.less(steps, rt.vector([0])), _op.maximum(begin, floor), begin)
    return _op.dyn.strided_slice(x, begin, end, steps, axes=axes, where=node.label)


def _start(b: int, dim: Any, step: int) -> int:
    """ONNX clamps a start into [0, dim] ([0, dim - 1] going backwards); Relay would let a
    backwards start fall to -1 ("before the first element"), so static sizes clamp here."""
    if isinstance(dim, int):
        b = b + dim if b < 0 else b
        return min(max(b, 0), dim if step > 0 else max(dim - 1, 0))
    return max(min(b, INT32_MAX), -INT32_MAX - 1)


def _end(e: Any, dim: Any) -> int:
    """An end index that Relay's int32 kernels can hold (a run-time size equal to the axis's
    own size, sliced forwards, means 'to the end')."""
    if isinstance(e, ShapeVar):
        return INT32_MAX
    return max(min(int(e), INT32_MAX), -INT32_MAX - 1)


def _slice_sym(node: Node, starts: list[int], ends: list[int], axes: list[int],
               steps: list[int]) -> None:
    sym = node.sym(0)
    if sym is not None and not sym.scalar and axes == [0]:
        node.set_sym(SymShape(sym.elems[slice(starts[0], ends[0], steps[0])]))


# ---------------------------------------------------------------- Squeeze, Unsqueeze
def _axes(node: Node) -> list[int] | None:
    if node.opset < 13:
        return node.attr("axes", None)
    return node.ints(1, "axes") if node.has_input(1) else None


def _run_time_axes(node: Node) -> bool:
    return node.opset >= 13 and node.has_input(1) and node.value(1) is None


def squeeze(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
    if _run_time_axes(node):  # axes known only at run time
        axes = rt.nonnegative_axes(rt.int64(node, 1, "axes"), ty.ndim)
        return rt.without_axes(node, x, rt.axes_mask(axes, ty.ndim), ty.ndim,
                               rt.length(node, 1, "axes"))
    axes = _axes(node)
    if axes is not None:
        axes = norm_axes(node, axes, ty.ndim)
        for a in axes:
            if isinstance(ty.shape[a], int) and ty.shape[a] != 1:
                raise node.fail(f"axis {a} has size {ty.shape[a]}; only size-1 axes squeeze")
    sym = node.sym(0)
    if sym is not None and not sym.scalar and len(sym.elems) == 1:
        node.set_sym(SymShape(sym.elems, scalar=True))
    return _op.squeeze(x, axes)


def unsqueeze(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
    if _run_time_axes(node):  # axes known only at run time
        n = rt.length(node, 1, "axes")
        axes = rt.nonnegative_axes(rt.int64(node, 1, "axes"), ty.ndim + n)
        return rt.with_axes(node, x, axes, ty.ndim, n)
    axes = _axes(node)
    if axes is None:
        raise node.fail("axes is required")
    out_rank = ty.ndim + len(axes)
    for a in sorted(norm_axes(node, axes, out_rank)):
        x = _op.expand_dims(x, a)
    sym = node.sym(0)
    if sym is not None and sym.scalar:
        node.set_sym(SymShape(sym.elems))
    return x


# ---------------------------------------------------------------- Tile, Pad
def tile(node: Node) -> RelayExpr:
    if node.value(1) is None:  # repetitions known only at run time
        if rt.length(node, 1, "repeats") != node.ndim(0):
            raise node.fail(f"repeats has {node.type(1).shape[0]} values for an input of rank "
                            f"{node.ndim(0)}")
        return _op.dyn.tile(node.input(0), rt.int64(node, 1, "repeats"), where=node.label)
    reps = node.ints(1, "repeats")
    if len(reps) != node.ndim(0):
        raise node.fail(f"repeats has {len(reps)} values for an input of rank {node.ndim(0)}")
    if any(r < 0 for r in reps):
        raise node.fail(f"repeats {reps} must be non-negative")
    return _op.tile(node.input(0), reps)


def pad(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
    mode = node.choice("mode", "constant", ("constant", "reflect", "edge", "wrap"))
    if mode == "wrap":
        raise node.unsupported_attr("mode", mode, "'constant', 'reflect', 'edge'")
    if node.value(1) is None or (node.has_input(3) and node.value(3) is None):
        return _pad_run_time(node, x, ty.ndim, mode)
    pads = node.ints(1, "pads")
    axes = norm_axes(node, node.ints(3, "axes"), ty.ndim) if node.has_input(3) else list(
        range(ty.ndim))
    if len(pads) != 2 * len(axes):
        raise node.fail(f"pads has {len(pads)} values; expected {2 * len(axes)} (a begin and "
                        "an end per axis)")
    width = [[0, 0] for _ in range(ty.ndim)]
    for k, a in enumerate(axes):
        width[a] = [pads[k], pads[k + len(axes)]]
    value = _pad_value(node, ty.dtype)
    crop = [(min(b, 0), min(e, 0)) for b, e in width]
    out = _op.nn.pad(x, [(max(b, 0), max(e, 0)) for b, e in width], value, pad_mode=mode)
    if any(b or e for b, e in crop):
        out = _crop(node, out, crop)
    return out


def _pad_value(node: Node, dtype: str) -> RelayExpr:
    value = node.optional(2)
    if value is None:
        return scalar(0, dtype)
    return _op.reshape(value, []) if node.ndim(2) != 0 else value


def _pad_run_time(node: Node, x: RelayExpr, ndim: int, mode: str) -> RelayExpr:
    """dyn.nn.pad of run-time widths: ONNX's (begins..., ends...) as (begin, end) rows, one
    per axis (axes not named: 0)."""
    pads = rt.int64(node, 1, "pads")
    n = rt.length(node, 1, "pads") // 2
    axes: Any = list(range(ndim))
    if node.has_input(3):
        known = node.value(3)
        axes = (norm_axes(node, [int(a) for a in known.reshape(-1)], ndim) if known is not None
                else rt.nonnegative_axes(rt.int64(node, 3, "axes"), ndim))
    named = rt.length(node, 3, "axes") if node.has_input(3) else ndim
    if 2 * n != node.type(1).shape[0] or n != named:
        raise node.fail(f"pads has {node.type(1).shape[0]} values; expected {2 * named} (a "
                        "begin and an end per axis)")
    begins = rt.on_axes(_op.strided_slice(pads, [0], [n]), axes, ndim, 0)
    ends = rt.on_axes(_op.strided_slice(pads, [n], [2 * n]), axes, ndim, 0)
    widths = _op.stack([begins, ends], 1)
    return _op.dyn.nn.pad(x, widths, _pad_value(node, node.dtype(0)), mode, where=node.label)


def _crop(node: Node, x: RelayExpr, crop: list[tuple[int, int]]) -> RelayExpr:
    """Negative pads remove elements."""
    begin = [-b for b, _ in crop]
    end = [e if e < 0 else INT32_MAX for _, e in crop]
    return _op.strided_slice(x, begin, end)


# ---------------------------------------------------------------- rearranging
def depth_to_space(node: Node) -> RelayExpr:
    mode = node.choice("mode", "DCR", ("DCR", "CRD"))
    return _op.nn.depth_to_space(node.input(0), node.attr("blocksize"), mode=mode)


def space_to_depth(node: Node) -> RelayExpr:
    if node.choice("mode", "DCR", ("DCR", "CRD")) == "CRD":  # version 28; not in Relay's op
        from .ops_layout import space_to_depth_crd

        return space_to_depth_crd(node, node.input(0), node.attr("blocksize"))
    return _op.nn.space_to_depth(node.input(0), node.attr("blocksize"))


def trilu(node: Node) -> RelayExpr:
    """Trilu: keep the upper (or lower) triangle of the last two axes, from diagonal k."""
    x, ty = node.input(0), node.type(0)
    if ty.ndim < 2:
        raise node.fail(f"input must have rank >= 2, got {ty.ndim}")
    rows, cols = ty.shape[-2:]
    if (node.has_input(1) and node.value(1) is None) or not static((rows, cols)):
        return _trilu_run_time(node, x, ty.ndim)
    k = node.ints(1, "k")[0] if node.has_input(1) else 0
    keep = np.triu(np.ones((rows, cols), bool), k) if node.attr("upper", 1) else np.tril(
        np.ones((rows, cols), bool), k)
    return _op.where(node.const(keep, "bool"), x, _op.zeros_like(x))


def _trilu_run_time(node: Node, x: RelayExpr, ndim: int) -> RelayExpr:
    """The triangle from index grids (row and column numbers counted with cumsum over the
    matrix's own run-time sizes) and a run-time k: keep where col - row >= k (upper) or
    <= k (lower)."""
    k = rt.scalar(rt.int64(node, 1, "k")) if node.has_input(1) else scalar(0, rt.I64)
    ones = _op.ones_like(_op.cast(x, rt.I64))
    col = _op.strided_slice(ones, [0], [1], axes=[ndim - 2])  # (..., 1, cols)
    row = _op.strided_slice(ones, [0], [1], axes=[ndim - 1])  # (..., rows, 1)
    diag = _op.subtract(_op.cumsum(col, axis=ndim - 1), _op.cumsum(row, axis=ndim - 2))
    keep = _op.greater_equal(diag, k) if node.attr("upper", 1) else _op.less_equal(diag, k)
    return _op.where(keep, x, _op.zeros_like(x))


def one_hot(node: Node) -> RelayExpr:
    indices, ity = node.input(0), node.type(0)
    values = node.input(2, "values")
    off = _op.take(values, node.const(0, "int32"), axis=0)
    on = _op.take(values, node.const(1, "int32"), axis=0)
    axis = _one_hot_axis(node, ity.ndim)
    if node.value(1) is None:  # a depth known only at run time
        return _one_hot_run_time(node, indices, on, off, axis)
    depth = int(np.asarray(node.const_value(1, "depth")).reshape(-1)[0])
    zero = scalar(0, ity.dtype)
    idx = _op.where(_op.less(indices, zero), _op.add(indices, scalar(depth, ity.dtype)),
                    indices)
    return _op.one_hot(idx, on, off, depth, axis, node.dtype(2))


def _one_hot_axis(node: Node, ndim: int) -> int:
    """The new axis (-1: last), FrontendError when out of range."""
    axis = node.attr("axis", -1)
    if not -ndim - 1 <= axis <= ndim:
        raise node.fail(f"axis {axis} is out of range for indices of rank {ndim}")
    axis = axis % (ndim + 1)
    return axis if axis != ndim else -1


def _one_hot_run_time(node: Node, indices: RelayExpr, on: RelayExpr, off: RelayExpr,
                      axis: int) -> RelayExpr:
    """dyn.one_hot of a run-time depth (cast to int64, as onnxruntime reads a float one);
    negative indices count from depth."""
    if node.type(1).shape not in ((), (1,)):
        raise node.fail(f"depth must hold one value, got shape {node.type(1).shape}")
    depth = _op.cast(rt.scalar(node.input(1, "depth")), rt.I64)
    idx = _op.cast(indices, rt.I64)
    idx = _op.where(_op.less(idx, scalar(0, rt.I64)), _op.add(idx, depth), idx)
    return _op.dyn.one_hot(idx, on, off, depth, axis, node.dtype(2), where=node.label)
