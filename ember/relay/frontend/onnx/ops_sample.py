"""Sampling at computed coordinates: GridSample (and AffineGrid, which makes its grids),
decomposed into elementwise coordinate arithmetic and ``gather`` of the taps.

GridSample follows ONNX's reference: each grid value in [-1, 1] is mapped to a pixel
coordinate (``align_corners``: -1 and 1 are the centres of the corner pixels, else their
outer edges); ``nearest`` rounds half to even; a coordinate outside the image is clamped
(``border``) or reflected (``reflection``) first; then each tap (1 nearest, 2 linear, 4
cubic per axis, Keys' a = -0.75) reads the pixel at its index (0 outside for ``zeros``,
clamped or reflected otherwise). 2-D and 3-D images; static shapes.
"""
from __future__ import annotations

import itertools

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import check_constant_size, product, scalar
from .ops_math import round_half_even_expr

MODES = ("linear", "nearest", "cubic", "bilinear", "bicubic")  # the last two: version 16
PADDING = ("zeros", "border", "reflection")
CUBIC_A = -0.75
I32 = "int32"


def _reflect(x: RelayExpr, lo: float, hi: float, dtype: str) -> RelayExpr:
    """``x`` reflected at ``lo`` and ``hi`` until inside (ONNX's _gs_reflect)."""
    span = hi - lo
    if span <= 0:
        return _op.full_like(x, scalar(lo, dtype))

    def fold(d: RelayExpr, near: float, far: float) -> RelayExpr:  # d >= 0 past ``near``
        turns = _op.floor(_op.divide(d, scalar(span, dtype)))
        r = _op.subtract(d, _op.multiply(turns, scalar(span, dtype)))
        even = _op.equal(_op.floor_mod(turns, scalar(2.0, dtype)), scalar(0.0, dtype))
        sign = 1.0 if near < far else -1.0
        inward = _op.add(scalar(near, dtype), _op.multiply(r, scalar(sign, dtype)))
        outward = _op.subtract(scalar(far, dtype), _op.multiply(r, scalar(sign, dtype)))
        return _op.where(even, inward, outward)

    below = fold(_op.subtract(scalar(lo, dtype), x), lo, hi)
    above = fold(_op.subtract(x, scalar(hi, dtype)), hi, lo)
    return _op.where(_op.less(x, scalar(lo, dtype)), below,
                     _op.where(_op.greater(x, scalar(hi, dtype)), above, x))


def _cubic(t: RelayExpr, dtype: str) -> list[RelayExpr]:
    """Keys' cubic weights of the taps at -1, 0, 1, 2 for a fraction ``t`` in [0, 1)."""
    a = CUBIC_A

    def far(d: RelayExpr) -> RelayExpr:  # 1 <= d < 2
        return _op.subtract(_op.multiply(_op.add(_op.multiply(
            _op.subtract(_op.multiply(d, scalar(a, dtype)), scalar(5 * a, dtype)), d),
            scalar(8 * a, dtype)), d), scalar(4 * a, dtype))

    def near(d: RelayExpr) -> RelayExpr:  # 0 <= d < 1
        inner = _op.subtract(_op.multiply(d, scalar(a + 2, dtype)), scalar(a + 3, dtype))
        return _op.add(_op.multiply(_op.multiply(inner, d), d), scalar(1.0, dtype))

    one = scalar(1.0, dtype)
    return [far(_op.add(t, one)), near(t), near(_op.subtract(one, t)),
            far(_op.subtract(scalar(2.0, dtype), t))]


def _taps(node: Node, x: RelayExpr, mode: str, dtype: str) -> list[tuple[RelayExpr, RelayExpr]]:
    """(integer index, weight or None) of each tap along one axis at coordinate ``x``."""
    if mode == "nearest":
        return [(_op.cast(x, I32), None)]
    base = _op.floor(x)
    frac = _op.subtract(x, base)
    base = _op.cast(base, I32)
    if mode == "linear":
        weights = [_op.subtract(scalar(1.0, dtype), frac), frac]
        offsets = [0, 1]
    else:
        weights, offsets = _cubic(frac, dtype), [-1, 0, 1, 2]
    return [(_op.add(base, scalar(o, I32)), w) for o, w in zip(offsets, weights)]


def _index(i: RelayExpr, size: int, padding: str, bounds: tuple[float, float],
           dtype: str) -> tuple[RelayExpr, RelayExpr | None]:
    """A tap's index made safe to read, and (for ``zeros``) whether it is inside."""
    last = scalar(size - 1, I32)
    if padding == "zeros":
        inside = _op.logical_and(_op.greater_equal(i, scalar(0, I32)), _op.less_equal(i, last))
        return _op.clip(i, 0, size - 1), inside
    if padding == "reflection":
        i = _op.cast(_reflect(_op.cast(i, dtype), *bounds, dtype), I32)
    return _op.clip(i, 0, size - 1), None


def grid_sample(node: Node) -> RelayExpr:
    x, shape, dtype = node.input(0, "X"), node.static_shape(0, "X"), node.dtype(0)
    grid_shape = node.static_shape(1, "grid")
    rank = len(shape) - 2
    if rank not in (2, 3) or len(grid_shape) != rank + 2 or grid_shape[-1] != rank or \
            grid_shape[0] != shape[0]:
        raise node.fail(f"X {list(shape)} must be (N, C, H, W) or (N, C, D, H, W) and grid "
                        f"(N, ..., {rank}) for it, got grid {list(grid_shape)}")
    raw = node.choice("mode", "linear" if node.version >= 20 else "bilinear", MODES)
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(raw, raw)
    padding = node.choice("padding_mode", "zeros", PADDING)
    align = bool(node.attr("align_corners", 0))
    sizes = shape[2:]
    n, c, out_pixels = shape[0], shape[1], product(grid_shape[1:-1])
    grid = node.input(1, "grid")
    per_axis = []
    for axis, size in enumerate(sizes):
        g = _op.take(grid, const(np.array(rank - 1 - axis, "int64")), axis=rank + 1)
        if align:
            coord = _op.multiply(_op.add(g, scalar(1.0, dtype)), scalar((size - 1) / 2, dtype))
        else:
            coord = _op.divide(_op.subtract(_op.multiply(_op.add(g, scalar(1.0, dtype)),
                                                         scalar(size, dtype)),
                                            scalar(1.0, dtype)), scalar(2.0, dtype))
        if mode == "nearest":
            coord = round_half_even_expr(coord, dtype)
        bounds = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if padding == "border":  # only coordinates outside the bounds are clamped
            outside = _op.logical_or(_op.less(coord, scalar(bounds[0], dtype)),
                                     _op.greater(coord, scalar(bounds[1], dtype)))
            coord = _op.where(outside, _op.clip(coord, 0.0, size - 1.0), coord)
        elif padding == "reflection":
            coord = _reflect(coord, *bounds, dtype)
        per_axis.append([(*_index(i, size, padding, bounds, dtype), w)
                         for i, w in _taps(node, coord, mode, dtype)])
    flat = _op.reshape(x, (n, c, product(sizes)))
    strides = [product(sizes[a + 1:]) for a in range(rank)]
    total = None
    for combo in itertools.product(*per_axis):
        value = _gather(flat, combo, strides, (n, c, out_pixels), dtype)
        total = value if total is None else _op.add(total, value)
    return _op.reshape(total, (n, c, *grid_shape[1:-1]))


def _gather(flat: RelayExpr, combo: tuple, strides: list[int], dims: tuple[int, int, int],
            dtype: str) -> RelayExpr:
    """The pixels at one combination of taps, weighted and masked: (N, C, pixels)."""
    n, c, pixels = dims
    index, weight = None, None
    for (i, inside, w), stride in zip(combo, strides):
        term = _op.multiply(i, scalar(stride, I32)) if stride != 1 else i
        index = term if index is None else _op.add(index, term)
        for factor in (w, None if inside is None else _op.cast(inside, dtype)):
            if factor is not None:
                weight = factor if weight is None else _op.multiply(weight, factor)
    index = _op.broadcast_to(_op.reshape(index, (n, 1, pixels)), (n, c, pixels))
    value = _op.gather(flat, 2, index)
    return value if weight is None else _op.multiply(value, _op.reshape(weight, (n, 1, pixels)))


def affine_grid(node: Node) -> RelayExpr:
    """The sampling grid of affine ``theta`` (N, 2, 3) or (N, 3, 4) over ``size`` (known):
    base coordinates (x, y[, z], 1) of every output pixel times theta^T."""
    theta, dtype = node.input(0, "theta"), node.dtype(0)
    if node.value(1) is None:
        return _affine_grid_run_time(node, theta, dtype)
    size = node.ints(1, "size")
    rank = len(size) - 2
    tshape = node.static_shape(0, "theta")
    if rank not in (2, 3) or tuple(tshape[1:]) != (rank, rank + 1) or tshape[0] != size[0]:
        raise node.fail(f"theta {list(tshape)} and size {size} must be (N, 2, 3) with "
                        f"(N, C, H, W) or (N, 3, 4) with (N, C, D, H, W)")
    align = bool(node.attr("align_corners", 0))
    axes = []
    for s in size[2:]:
        if align:
            axes.append(np.linspace(-1.0, 1.0, s))  # a single point sits at -1
        else:
            axes.append((2.0 * np.arange(s) + 1.0) / s - 1.0)
    mesh = np.meshgrid(*axes, indexing="ij")  # data order (D,) H, W
    coords = [m.reshape(-1) for m in reversed(mesh)]  # x, y[, z]
    base = np.stack([*coords, np.ones_like(coords[0])], -1).astype(dtype)  # (P, rank + 1)
    pixels = base.shape[0]
    base_b = _op.broadcast_to(const(base[None]), (size[0], pixels, rank + 1))
    out = _op.nn.batch_matmul(base_b, theta)  # (N, P, rank)
    return _op.reshape(out, (size[0], *size[2:], rank))


def _affine_grid_run_time(node: Node, theta: RelayExpr, dtype: str) -> RelayExpr:
    """AffineGrid with a size known only at run time: each axis's coordinates from arange,
    broadcast against each other (x varies along the last axis), and theta applied as a
    broadcast product summed over the homogeneous coordinate: (N, [D,] H, W, rank)."""
    tshape = node.static_shape(0, "theta")
    rank = rt.length(node, 1, "size") - 2
    if rank not in (2, 3) or tuple(tshape[1:]) != (rank, rank + 1):
        raise node.fail(f"theta {list(tshape)} and a size of {rank + 2} values must be "
                        "(N, 2, 3) with (N, C, H, W) or (N, 3, 4) with (N, C, D, H, W)")
    align = bool(node.attr("align_corners", 0))
    size = rt.int64(node, 1, "size")
    one, two = scalar(1.0, dtype), scalar(2.0, dtype)
    coords = []  # per spatial axis, in data order, shaped to broadcast over the others
    for k in range(rank):
        count = rt.scalar(_op.strided_slice(size, [k + 2], [k + 3]))
        i = _op.cast(_op.arange(scalar(0, "int64"), count, scalar(1, "int64"), dtype="int64"),
                     dtype)
        n = _op.cast(count, dtype)
        if align:  # linspace(-1, 1, n); a single point sits at -1
            step = _op.divide(two, _op.maximum(_op.subtract(n, one), one))
            c = _op.subtract(_op.multiply(i, step), one)
        else:
            c = _op.subtract(_op.divide(_op.add(_op.multiply(i, two), one), n), one)
        shape = [1] * rank
        shape[k] = -1
        coords.append(_op.reshape(c, shape))
    total = None
    homogeneous = [*reversed(coords), None]  # x, y[, z], 1
    for j, c in enumerate(homogeneous):  # out[..., r] = sum_j theta[:, r, j] * base_j
        t = _op.strided_slice(theta, [j], [j + 1], axes=[2])  # (N, rank, 1)
        t = _op.reshape(t, (tshape[0], *[1] * rank, rank))
        term = t if c is None else _op.multiply(_op.expand_dims(_op.expand_dims(c, 0), -1), t)
        total = term if total is None else _op.add(total, term)
    return total


def _roi_axis(node: Node, start: RelayExpr, size: RelayExpr, pooled: int, ratio: int,
              limit: int, dtype: str) -> tuple[list[tuple[RelayExpr, RelayExpr]], RelayExpr]:
    """Along one axis, for every ROI (rows) and sample (pooled * ratio columns): the two taps
    (index, weight) of ONNX's reference, and whether the sample is inside (-1 .. limit)."""
    steps = (np.arange(pooled)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).reshape(-1)
    bin_size = _op.divide(size, scalar(float(pooled), dtype))
    pos = _op.add(_op.expand_dims(start, 1),
                  _op.multiply(_op.expand_dims(bin_size, 1), const(steps.astype(dtype))))
    inside = _op.logical_and(_op.greater_equal(pos, scalar(-1.0, dtype)),
                             _op.less_equal(pos, scalar(float(limit), dtype)))
    pos = _op.maximum(pos, scalar(0.0, dtype))
    low = _op.cast(pos, I32)  # truncation of a non-negative value: the floor
    top = _op.greater_equal(low, scalar(limit - 1, I32))
    low = _op.where(top, scalar(limit - 1, I32), low)
    high = _op.where(top, low, _op.add(low, scalar(1, I32)))
    frac = _op.where(top, scalar(0.0, dtype), _op.subtract(pos, _op.cast(low, dtype)))
    return [(low, _op.subtract(scalar(1.0, dtype), frac)), (high, frac)], inside


def roi_align(node: Node) -> RelayExpr:
    """RoiAlign with a fixed ``sampling_ratio``: per ROI and bin, ratio x ratio bilinear
    samples (ONNX's reference's taps and clamping), averaged or maxed (max of the weighted
    taps, as the reference does)."""
    x, shape, dtype = node.input(0, "X"), node.static_shape(0, "X"), node.dtype(0)
    rois_shape = node.static_shape(1, "rois")
    if len(shape) != 4 or len(rois_shape) != 2 or rois_shape[1] != 4:
        raise node.fail(f"X must be (N, C, H, W) and rois (R, 4), got {list(shape)} and "
                        f"{list(rois_shape)}")
    ratio = node.attr("sampling_ratio", 0)
    if ratio <= 0:
        raise node.unsupported("sampling_ratio=0 (as many samples as each ROI's size asks, "
                               "known only at run time); give a positive sampling_ratio")
    mode = node.choice("mode", "avg", ("avg", "max"))
    half = node.choice("coordinate_transformation_mode", "half_pixel",
                       ("half_pixel", "output_half_pixel")) == "half_pixel"
    ph, pw = node.attr("output_height", 1), node.attr("output_width", 1)
    if min(ph, pw) < 1:
        raise node.fail(f"output_height ({ph}) and output_width ({pw}) must be positive")
    check_constant_size(node, (max(ph, pw), ratio), "the sample offsets (output size x "
                        "sampling_ratio)")
    _, c, height, width = shape
    r = rois_shape[0]
    rois = _op.multiply(node.input(1, "rois"), scalar(node.attr("spatial_scale", 1.0), dtype))
    if half:
        rois = _op.subtract(rois, scalar(0.5, dtype))
    corner = [_op.squeeze(_op.strided_slice(rois, [k], [k + 1], axes=[1]), [1])
              for k in range(4)]  # x1, y1, x2, y2
    extent = [_op.subtract(corner[2], corner[0]), _op.subtract(corner[3], corner[1])]
    if not half:
        extent = [_op.maximum(e, scalar(1.0, dtype)) for e in extent]
    ys, y_in = _roi_axis(node, corner[1], extent[1], ph, ratio, height, dtype)
    xs, x_in = _roi_axis(node, corner[0], extent[0], pw, ratio, width, dtype)
    rows, cols = ph * ratio, pw * ratio
    inside = _op.cast(_op.logical_and(_op.expand_dims(y_in, 2), _op.expand_dims(x_in, 1)),
                      dtype)  # (R, rows, cols)
    data = _op.take(_op.reshape(x, (shape[0], c, height * width)),
                    node.input(2, "batch_indices"), axis=0)  # (R, C, H*W)
    taps = []
    for (yi, yw), (xi, xw) in itertools.product(ys, xs):
        index = _op.add(_op.multiply(_op.expand_dims(yi, 2), scalar(width, I32)),
                        _op.expand_dims(xi, 1))
        index = _op.broadcast_to(_op.reshape(index, (r, 1, rows * cols)), (r, c, rows * cols))
        weight = _op.multiply(_op.multiply(_op.expand_dims(yw, 2), _op.expand_dims(xw, 1)),
                              inside)
        taps.append(_op.multiply(_op.gather(data, 2, index),
                                 _op.reshape(weight, (r, 1, rows * cols))))
    if mode == "avg":
        value = taps[0]
        for t in taps[1:]:
            value = _op.add(value, t)
        grid = _op.reshape(value, (r, c, ph, ratio, pw, ratio))
        return _op.mean(grid, axis=[3, 5])
    value = taps[0]
    for t in taps[1:]:
        value = _op.maximum(value, t)
    return _op.max(_op.reshape(value, (r, c, ph, ratio, pw, ratio)), axis=[3, 5])


def _roi_pool_bins(node: Node, start: RelayExpr, end: RelayExpr, pooled: int, limit: int,
                   dtype: str) -> tuple[RelayExpr, RelayExpr]:
    """Along one axis, per ROI (rows) and bin (columns): the first and past-the-end pixel
    (Caffe's, which onnxruntime follows: floor/ceil of the bin edges, clipped to the image)."""
    size = _op.maximum(_op.add(_op.subtract(end, start), scalar(1.0, dtype)), scalar(1.0, dtype))
    bin_size = _op.expand_dims(_op.divide(size, scalar(float(pooled), dtype)), 1)
    edges = const(np.arange(pooled + 1, dtype=dtype).reshape(1, -1))
    at = _op.multiply(bin_size, edges)  # (R, pooled + 1)
    offset = _op.expand_dims(start, 1)

    def clip(v: RelayExpr) -> RelayExpr:
        return _op.cast(_op.clip(_op.add(v, offset), 0.0, float(limit)), I32)
    lo = clip(_op.floor(_op.strided_slice(at, [0], [pooled], axes=[1])))
    hi = clip(_op.ceil(_op.strided_slice(at, [1], [pooled + 1], axes=[1])))
    return lo, hi


def _in_bins(lo: RelayExpr, hi: RelayExpr, limit: int) -> RelayExpr:
    """(R, bins, limit): whether each pixel lies in each ROI's bin."""
    pixels = const(np.arange(limit, dtype=I32).reshape(1, 1, -1))
    return _op.logical_and(_op.greater_equal(pixels, _op.expand_dims(lo, 2)),
                           _op.less(pixels, _op.expand_dims(hi, 2)))


def max_roi_pool(node: Node) -> RelayExpr:
    """MaxRoiPool: per ROI (batch index, x1, y1, x2, y2, scaled and rounded) and bin, the max
    of its pixels (0 for an empty bin); masked maxima along W, then along H."""
    x, shape, dtype = node.input(0, "X"), node.static_shape(0, "X"), node.dtype(0)
    rois_shape = node.static_shape(1, "rois")
    if len(shape) != 4 or len(rois_shape) != 2 or rois_shape[1] != 5:
        raise node.fail(f"X must be (N, C, H, W) and rois (R, 5), got {list(shape)} and "
                        f"{list(rois_shape)}")
    pooled = [int(v) for v in node.attr("pooled_shape")]
    if len(pooled) != 2 or min(pooled) < 1:
        raise node.fail(f"pooled_shape must be two positive sizes, got {list(pooled)}")
    ph, pw = pooled
    check_constant_size(node, (max(ph, pw) + 1,), f"pooled_shape {pooled}")
    _, _, height, width = shape
    rois = node.input(1, "rois")
    column = [_op.squeeze(_op.strided_slice(rois, [k], [k + 1], axes=[1]), [1])
              for k in range(5)]  # batch index, x1, y1, x2, y2
    scale = scalar(node.attr("spatial_scale", 1.0), dtype)
    corner = [_op.round(_op.multiply(c, scale)) for c in column[1:]]
    h_lo, h_hi = _roi_pool_bins(node, corner[1], corner[3], ph, height, dtype)
    w_lo, w_hi = _roi_pool_bins(node, corner[0], corner[2], pw, width, dtype)
    data = _op.take(x, _op.cast(column[0], I32), axis=0)  # (R, C, H, W)
    lowest = scalar(float("-inf"), dtype)
    in_w = _op.expand_dims(_in_bins(w_lo, w_hi, width), 1, 2)  # (R, 1, 1, pw, W)
    along_w = _op.max(_op.where(in_w, _op.expand_dims(data, 3), lowest), axis=[4])
    in_h = _op.expand_dims(_in_bins(h_lo, h_hi, height), 1)  # (R, 1, ph, H)
    along_h = _op.max(_op.where(_op.expand_dims(in_h, 4), _op.expand_dims(along_w, 2),
                                lowest), axis=[3])  # (R, C, ph, pw)
    empty = _op.logical_or(_op.expand_dims(_op.less_equal(h_hi, h_lo), 2),
                           _op.expand_dims(_op.less_equal(w_hi, w_lo), 1))  # (R, ph, pw)
    return _op.where(_op.expand_dims(empty, 1), scalar(0.0, dtype), along_h)
