"""Resize with ``coordinate_transformation_mode="tf_crop_and_resize"``: the region ``roi``
(start and end per resized axis, in fractions of the input) resampled to the output size,
positions outside the input taking ``extrapolation_value``.

``image.resize2d`` has no region, so this runs axis by axis (the last first, as ONNX's
reference nests them): output coordinates from ``arange`` of the output size (known or
computed at run time), the taps of each coordinate gathered with ``take`` and weighted
(nearest: one tap with ``nearest_mode``; linear: two), then ``where`` puts the
extrapolation value outside. Sizes known only at run time give ``?`` axes (the VM).
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
    if isinstance(out_f, RelayExpr):
        count = _op.cast(_op.floor(out_f), I64)
        y = _op.cast(_op.arange(scalar(0, I64), count, scalar(1, I64), dtype=I64), F32)
    else:
        y, out_f = const(np.arange(int(np.floor(out_f)), dtype=F32)), scalar(out_f, F32)
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
    return (float(roi[k]), float(roi[k + count])) == (0.0, 1.0) and int(sizes[k]) == size


def crop_and_resize(node: Node, axes: list[int], sizes: Any, scales: Any) -> RelayExpr:
    """The tf_crop_and_resize Resize (see the module docstring)."""
    mode = node.choice("mode", "nearest", ("nearest", "linear", "cubic"))
    if mode == "cubic":
        raise node.unsupported("tf_crop_and_resize with mode cubic (nearest and linear are "
                               "supported)")
    shape = node.static_shape(0, "X")
    if node.dtype(0) != F32:
        raise node.unsupported(f"tf_crop_and_resize of {node.dtype(0)} data (float32 only)")
    rank, count = len(shape), len(axes)
    if not node.has_input(1) or node.type(1).shape != (2 * count,):
        raise node.fail(f"roi must hold {2 * count} values (starts, then ends, of the "
                        f"resized axes {axes})")
    roi = node.input(1, "roi") if node.value(1) is None else node.value(1).reshape(-1)
    x = node.input(0, "X")
    for k in sorted(range(count), key=lambda k: -axes[k]):  # the last axis first
        axis, size = axes[k], shape[axes[k]]
        if _unchanged(roi, sizes, k, count, size):
            continue
        given = sizes if sizes is not None else scales
        if isinstance(given, RelayExpr):
            out_f = _per_axis(node, given, k, count)
            out_f = out_f if sizes is not None else _op.multiply(out_f, scalar(size, F32))
        else:
            out_f = float(given[k]) * (1.0 if sizes is not None else size)
        bounds = (_per_axis(node, roi, k, 2 * count), _per_axis(node, roi, k + count, 2 * count))
        x = _resample(node, x, axis, size, out_f, bounds, mode, rank)
    return x
