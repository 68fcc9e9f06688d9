"""Converters of the data-movement operators: Flatten, Transpose, Concat, Split, Slice,
Squeeze, Unsqueeze, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, OneHot.

Axes and sizes that became inputs in later opsets (Split's split and Squeeze/Unsqueeze's
axes at 13, Pad's axes at 18) are read from the attribute or the input, whichever the node's
opset defines.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import RelayExpr
from ....ir.types import ShapeVar
from ... import op as _op
from ._node import Node
from ._symbolic import SymShape
from ._util import flatten_to_2d, norm_axes, norm_axis, scalar, static

INT32_MAX = 2 ** 31 - 1


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
    starts = node.ints(1, "starts")
    ends_sym = node.sym(2)
    if ends_sym is None:
        node.const_value(2, "ends")
    n = len(starts)
    axes = node.ints(3, "axes") if node.has_input(3) else list(range(n))
    steps = node.ints(4, "steps") if node.has_input(4) else [1] * n
    if not len(axes) == len(steps) == n == len(ends_sym.elems):  # type: ignore[union-attr]
        raise node.fail("starts, ends, axes and steps must have the same length")
    axes = norm_axes(node, axes, ty.ndim)
    if 0 in steps:
        raise node.fail("steps must not be 0")
    ends = [_end(node, e, ty.shape[a], s) for e, a, s in zip(ends_sym.elems, axes, steps)]
    begin = [_start(b, ty.shape[a], s) for b, a, s in zip(starts, axes, steps)]
    _slice_sym(node, starts, ends, axes, steps)
    return _op.strided_slice(x, begin, ends, steps, axes=axes)


def _start(b: int, dim: Any, step: int) -> int:
    """ONNX clamps a start into [0, dim] ([0, dim - 1] going backwards); Relay would let a
    backwards start fall to -1 ("before the first element"), so static sizes clamp here."""
    if isinstance(dim, int):
        b = b + dim if b < 0 else b
        return min(max(b, 0), dim if step > 0 else max(dim - 1, 0))
    return max(min(b, INT32_MAX), -INT32_MAX - 1)


def _end(node: Node, e: Any, dim: Any, step: int) -> int:
    """An end index that Relay's int32 kernels can hold (a run-time size equal to the axis's
    own size means 'to the end')."""
    if isinstance(e, ShapeVar):
        if e is dim and step > 0:
            return INT32_MAX
        raise node.unsupported(f"ends holds the run-time size {e.name}, which is not the "
                               "size of the sliced axis; give static shapes with shape=...")
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


def squeeze(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
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
    pads = node.ints(1, "pads")
    axes = norm_axes(node, node.ints(3, "axes"), ty.ndim) if node.has_input(3) else list(
        range(ty.ndim))
    if len(pads) != 2 * len(axes):
        raise node.fail(f"pads has {len(pads)} values; expected {2 * len(axes)} (a begin and "
                        "an end per axis)")
    width = [[0, 0] for _ in range(ty.ndim)]
    for k, a in enumerate(axes):
        width[a] = [pads[k], pads[k + len(axes)]]
    value = node.optional(2)
    if value is None:
        value = scalar(0, ty.dtype)
    elif node.ndim(2) != 0:
        value = _op.reshape(value, [])
    crop = [(min(b, 0), min(e, 0)) for b, e in width]
    out = _op.nn.pad(x, [(max(b, 0), max(e, 0)) for b, e in width], value, pad_mode=mode)
    if any(b or e for b, e in crop):
        out = _crop(node, out, crop)
    return out


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
    node.choice("mode", "DCR", ("DCR",))  # version 28 adds CRD, which Relay's op lacks
    return _op.nn.space_to_depth(node.input(0), node.attr("blocksize"))


def trilu(node: Node) -> RelayExpr:
    """Trilu: keep the upper (or lower) triangle of the last two axes, from diagonal k."""
    x, ty = node.input(0), node.type(0)
    k = node.ints(1, "k")[0] if node.has_input(1) else 0
    rows, cols = ty.shape[-2:]
    if not static((rows, cols)):
        raise node.unsupported("dynamic matrix sizes")
    keep = np.triu(np.ones((rows, cols), bool), k) if node.attr("upper", 1) else np.tril(
        np.ones((rows, cols), bool), k)
    return _op.where(node.const(keep, "bool"), x, _op.zeros_like(x))


def one_hot(node: Node) -> RelayExpr:
    indices, ity = node.input(0), node.type(0)
    depth = int(np.asarray(node.const_value(1, "depth")).reshape(-1)[0])
    values = node.input(2, "values")
    vdtype = node.dtype(2)
    off = _op.take(values, node.const(0, "int32"), axis=0)
    on = _op.take(values, node.const(1, "int32"), axis=0)
    axis = node.attr("axis", -1)
    if not -ity.ndim - 1 <= axis <= ity.ndim:
        raise node.fail(f"axis {axis} is out of range for indices of rank {ity.ndim}")
    axis = axis % (ity.ndim + 1)
    zero = scalar(0, ity.dtype)
    idx = _op.where(_op.less(indices, zero), _op.add(indices, scalar(depth, ity.dtype)),
                    indices)
    return _op.one_hot(idx, on, off, depth, axis if axis != ity.ndim else -1, vdtype)
