"""The Resize cases ``image.resize2d`` lacks, resampled axis by axis (the last first, as
ONNX's reference nests them) with gathers and weights; sizes known only at run time give
``?`` axes (the VM).

- ``coordinate_transformation_mode="tf_crop_and_resize"``: the region ``roi`` (start and
  end per resized axis, in fractions of the input) resampled to the output size, positions
  outside the input taking ``extrapolation_value``; output coordinates from ``arange`` of
  the output size, the taps of each coordinate gathered with ``take`` and weighted
  (nearest: one tap with ``nearest_mode``; linear: two).
- ``antialias=1`` (linear and cubic): when shrinking, the filter is stretched by 1 / scale
  (ONNX's reference's coefficients, normalised, edge-padded or, with ``exclude_outside``,
  cut at the edges). Its width depends on the scale, which may be known only at run time,
  so each output point weighs every input point of the axis (and the padding a stretched
  filter can reach): an (output, input) weight matrix per axis, O(output x input) work.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import scalar

F32, I64 = "float32", "int64"


def _per_axis(node: Node, value: Any, k: int, count: int) -> RelayExpr:
    """Element ``k`` of a length-``count`` vector (known or not) as a 0-d float32."""
    if isinstance(value, RelayExpr):
        return _op.cast(rt.scalar(_op.strided_slice(value, [k], [k + 1])), F32)
    return scalar(float(np.asarray(value).reshape(-1)[k]), F32)


def _round(x: RelayExpr, mode: str) -> RelayExpr:
    """nearest_mode applied to non-negative coordinates."""
    half = scalar(0.5, F32)
    if mode == "floor":
        return _op.floor(x)
    if mode == "ceil":
        return _op.ceil(x)
    if mode == "round_prefer_ceil":
        return _op.floor(_op.add(x, half))
    return _op.ceil(_op.subtract(x, half))  # round_prefer_floor


def _resample(node: Node, x: RelayExpr, axis: int, size: int, out_f: RelayExpr | float,
              roi: tuple[RelayExpr, RelayExpr], mode: str, rank: int) -> RelayExpr:
    """``x`` resampled along ``axis`` (input ``size``) to floor(``out_f``) points (a number
    when known at import: a static axis; else an expression: a ``?`` axis)."""
    start, end = roi
    last = scalar(float(size - 1), F32)
    y, _, out_f = _points(out_f)
    one = scalar(1.0, F32)
    span = _op.multiply(_op.subtract(end, start), last)
    stepped = _op.divide(_op.multiply(y, span), _op.maximum(_op.subtract(out_f, one), one))
    single = _op.add(_op.multiply(y, scalar(0.0, F32)), _op.divide(span, scalar(2.0, F32)))
    pos = _op.add(_op.where(_op.greater(out_f, one), stepped, single),
                  _op.multiply(start, last))
    outside = _op.logical_or(_op.less(pos, scalar(0.0, F32)), _op.greater(pos, last))
    shape = [1] * rank
    shape[axis] = -1

    def along(v: RelayExpr) -> RelayExpr:  # a per-point vector broadcast along ``axis``
        return _op.reshape(v, shape)

    def tap(index: RelayExpr) -> RelayExpr:
        return _op.take(x, _op.cast(_op.clip(index, 0.0, size - 1.0), I64), axis=axis)

    if mode == "nearest":
        value = tap(_round(pos, node.attr("nearest_mode", "round_prefer_floor")))
    else:
        low = _op.floor(pos)
        frac = along(_op.subtract(pos, low))
        value = _op.add(_op.multiply(tap(low), _op.subtract(one, frac)),
                        _op.multiply(tap(_op.add(low, one)), frac))
    fill = scalar(node.attr("extrapolation_value", 0.0), node.dtype(0))
    return _op.where(along(outside), fill, value)


def _unchanged(roi: Any, sizes: Any, k: int, count: int, size: int) -> bool:
    """Whether axis ``k`` is known to keep its whole range at its size (left as it is)."""
    if isinstance(roi, RelayExpr) or sizes is None or isinstance(sizes, RelayExpr):
        return False
    return (float(roi[k]), float(roi[k + count])) == (0.0, 1.0) and _same_size(sizes[k], size)


def _same_size(a: Any, b: Any) -> bool:
    """Whether two sizes (ints or the same symbolic size) are equal."""
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        return int(a) == int(b)
    return a is b or a == b


def crop_and_resize(node: Node, axes: list[int], sizes: Any, scales: Any) -> RelayExpr:
    """The tf_crop_and_resize Resize (see the module docstring)."""
    mode = node.choice("mode", "nearest", ("nearest", "linear", "cubic"))
    if mode == "cubic":
        raise node.unsupported("tf_crop_and_resize with mode cubic (nearest and linear are "
                               "supported)")
    shape = node.shape(0)
    if node.dtype(0) != F32:
        raise node.unsupported(f"tf_crop_and_resize of {node.dtype(0)} data (float32 only)")
    rank, count = len(shape), len(axes)
    if not node.has_input(1) or node.type(1).shape != (2 * count,):
        raise node.fail(f"roi must hold {2 * count} values (starts, then ends, of the "
                        f"resized axes {axes})")
    roi = node.input(1, "roi") if node.value(1) is None else node.value(1).reshape(-1)
    x = node.input(0, "X")
    sym = node.sym(3) if isinstance(sizes, RelayExpr) else None
    if sym is not None and len(sym.elems) == count:  # sizes from Shape: known where static
        sizes = sizes if sym.is_static else list(sym.elems)
    for k in sorted(range(count), key=lambda k: -axes[k]):  # the last axis first
        axis, size = axes[k], shape[axes[k]]
        if _unchanged(roi, sizes, k, count, size):
            continue
        if not isinstance(size, int):
            raise node.unsupported(f"tf_crop_and_resize of axis {axis}, whose size is known "
                                   "only at run time (give it with from_onnx(shape=...))")
        given = sizes if sizes is not None else scales
        if isinstance(given, list) and not isinstance(given[k], int):
            raise node.unsupported(f"tf_crop_and_resize of axis {axis} to a size known only "
                                   "at run time")
        if isinstance(given, list):
            out_f = float(given[k])
        elif isinstance(given, RelayExpr):
            out_f = _per_axis(node, given, k, count)
            out_f = out_f if sizes is not None else _op.multiply(out_f, scalar(size, F32))
        else:
            out_f = float(given[k]) * (1.0 if sizes is not None else size)
        bounds = (_per_axis(node, roi, k, 2 * count), _per_axis(node, roi, k + count, 2 * count))
        x = _resample(node, x, axis, size, out_f, bounds, mode, rank)
    return x


# ---------------------------------------------------------------- antialias
_ANTIALIAS_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                     "half_pixel_symmetric", "tf_half_pixel_for_nn")


def _source(coord: str, y: RelayExpr, scale: RelayExpr, size: int, out_f: RelayExpr,
            out_len: RelayExpr) -> RelayExpr:
    """The input coordinate of output points ``y`` (ONNX's coordinate transforms)."""
    half, one = scalar(0.5, F32), scalar(1.0, F32)
    centred = _op.subtract(_op.divide(_op.add(y, half), scale), half)
    if coord == "half_pixel":
        return centred
    if coord == "pytorch_half_pixel":
        return _op.where(_op.greater(out_f, one), centred, _op.full_like(y, scalar(-0.5, F32)))
    if coord == "asymmetric":
        return _op.divide(y, scale)
    if coord == "tf_half_pixel_for_nn":
        return _op.divide(_op.add(y, half), scale)
    if coord == "align_corners":
        steps = _op.maximum(_op.subtract(_op.cast(out_len, F32), one), one)
        return _op.divide(_op.multiply(y, scalar(float(size - 1), F32)), steps)
    adjustment = _op.divide(_op.cast(out_len, F32), out_f)  # half_pixel_symmetric
    offset = _op.multiply(scalar(size / 2.0, F32), _op.subtract(one, adjustment))
    return _op.add(offset, centred)


def _filter(d: RelayExpr, cubic: bool, alpha: float) -> RelayExpr:
    """The stretched filter at distances ``d`` (already multiplied by the scale)."""
    a = _op.abs(d)
    one, zero = scalar(1.0, F32), scalar(0.0, F32)
    if not cubic:
        return _op.clip(_op.subtract(one, a), 0.0, 1.0)
    a2 = _op.multiply(a, a)
    a3 = _op.multiply(a2, a)
    near = _op.add(_op.subtract(_op.multiply(scalar(alpha + 2, F32), a3),
                                _op.multiply(scalar(alpha + 3, F32), a2)), one)
    far = _op.add(_op.subtract(_op.multiply(scalar(alpha, F32), a3),
                               _op.multiply(scalar(5 * alpha, F32), a2)),
                  _op.subtract(_op.multiply(scalar(8 * alpha, F32), a), scalar(4 * alpha, F32)))
    return _op.where(_op.less_equal(a, one), near,
                     _op.where(_op.less(a, scalar(2.0, F32)), far, zero))


def _points(out_f: RelayExpr | float) -> tuple[RelayExpr, RelayExpr, RelayExpr]:
    """(output positions 0 .. floor(out_f) - 1, their count, out_f) as float32 expressions:
    constants when ``out_f`` is a number (a static axis)."""
    if isinstance(out_f, RelayExpr):
        count = _op.cast(_op.floor(out_f), I64)
        y = _op.cast(_op.arange(scalar(0, I64), count, scalar(1, I64), dtype=I64), F32)
        return y, count, out_f
    n = int(np.floor(out_f))
    return const(np.arange(n, dtype=F32)), scalar(n, I64), scalar(out_f, F32)


def _antialias_axis(node: Node, x: RelayExpr, axis: int, size: int, scale: RelayExpr,
                    out_f: RelayExpr | float, rank: int, cubic: bool, coord: str) -> RelayExpr:
    """``x`` resampled along ``axis`` through the (output, input) weight matrix."""
    y, out_len, out_f = _points(out_f)
    src = _source(coord, y, scale, size, out_f, out_len)
    reach = 2 * size + 2  # a filter stretched by 1 / scale reaches at most this far out
    points = np.arange(-reach, size + reach, dtype=F32)
    stretch = _op.minimum(scale, scalar(1.0, F32))
    d = _op.multiply(_op.subtract(const(points[None, :]), _op.expand_dims(src, 1)), stretch)
    w = _filter(d, cubic, node.attr("cubic_coeff_a", -0.75))
    if node.attr("exclude_outside", 0):
        w = _op.multiply(w, const(((points >= 0) & (points < size)).astype(F32)[None, :]))
    w = _op.divide(w, _op.sum(w, axis=[1], keepdims=True))
    # edge padding: the weights of points before 0 and after size - 1 go to the edges
    mid = _op.strided_slice(w, [reach], [reach + size], axes=[1])
    before = _op.sum(_op.strided_slice(w, [0], [reach], axes=[1]), axis=[1], keepdims=True)
    after = _op.sum(_op.strided_slice(w, [reach + size], [size + 2 * reach], axes=[1]),
                    axis=[1], keepdims=True)
    first, last = np.zeros((1, size), F32), np.zeros((1, size), F32)
    first[0, 0], last[0, -1] = 1.0, 1.0
    weights = _op.add(mid, _op.add(_op.multiply(before, const(first)),
                                   _op.multiply(after, const(last))))  # (out, in)
    perm = [a for a in range(rank) if a != axis] + [axis]
    moved = _op.expand_dims(_op.transpose(x, perm), rank - 1)  # (..., 1, in)
    out = _op.sum(_op.multiply(moved, weights), axis=[rank])  # (..., out)
    return _op.transpose(out, [int(a) for a in np.argsort(perm)])


def antialias_resize(node: Node, axes: list[int], sizes: Any, scales: Any,
                     coord: str) -> RelayExpr:
    """Resize with antialias=1 (see the module docstring)."""
    mode = node.choice("mode", "nearest", ("nearest", "linear", "cubic"))
    if mode == "nearest":
        raise node.unsupported("antialias with mode nearest (ONNX defines it for linear and "
                               "cubic)")
    if coord not in _ANTIALIAS_COORDS:
        raise node.unsupported_attr("coordinate_transformation_mode", coord,
                                    ", ".join(_ANTIALIAS_COORDS))
    if node.dtype(0) != F32:
        raise node.unsupported(f"antialias of {node.dtype(0)} data (float32 only)")
    shape = node.static_shape(0, "X")
    x, count = node.input(0, "X"), len(axes)
    for k in sorted(range(count), key=lambda k: -axes[k]):
        axis, size = axes[k], shape[axes[k]]
        given = sizes if sizes is not None else scales
        if not isinstance(given, RelayExpr):  # known: a static axis, or one left as it is
            v = float(given[k])
            out_f, factor = (v, v / size) if sizes is not None else (v * size, v)
            if factor == 1.0 and coord != "tf_half_pixel_for_nn":
                continue
            scale = scalar(factor, F32)
        elif sizes is not None:
            out_f = _per_axis(node, given, k, count)
            scale = _op.divide(out_f, scalar(float(size), F32))
        else:
            scale = _per_axis(node, given, k, count)
            out_f = _op.multiply(scale, scalar(float(size), F32))
        x = _antialias_axis(node, x, axis, size, scale, out_f, len(shape), mode == "cubic",
                            coord)
    return x
