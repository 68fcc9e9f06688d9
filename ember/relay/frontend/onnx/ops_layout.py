"""Converters that move data around by index: ReverseSequence (a gather of computed
indices), CenterCropPad (slices and pads), Col2Im (a transposed convolution with a fixed
0/1 kernel), SpaceToDepth's CRD mode (reshape and transpose) and BitShift (a product or
floor quotient by a power of two). Static shapes; the sizes that fix an output shape must be
known when importing."""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import check_constant_size, norm_axes, norm_axis, product, scalar


def reverse_sequence(node: Node) -> RelayExpr:
    """Reverse the first ``sequence_lens[b]`` steps along ``time_axis`` for each batch b: a
    gather along time of ``len - 1 - t`` where ``t < len``, else ``t``."""
    x, shape = node.input(0, "input"), node.static_shape(0, "input")
    if len(shape) < 2:
        raise node.fail(f"input must have rank >= 2, got {list(shape)}")
    time = norm_axis(node, node.attr("time_axis", 0), 2, "time_axis")
    batch = norm_axis(node, node.attr("batch_axis", 1), 2, "batch_axis")
    if time == batch:
        raise node.fail("time_axis and batch_axis must differ (0 and 1)")
    lens = _op.cast(node.input(1, "sequence_lens"), "int64")
    steps = np.arange(shape[time], dtype="int64")
    t = const(steps.reshape((-1, 1) if time == 0 else (1, -1)))
    length = _op.expand_dims(lens, 1 if batch == 0 else 0)
    index = _op.where(_op.less(t, length),
                      _op.subtract(_op.subtract(length, scalar(1, "int64")), t), t)
    index = _op.reshape(index, (shape[0], shape[1], *[1] * (len(shape) - 2)))
    return _op.gather(x, time, _op.broadcast_to(index, shape))


def center_crop_pad(node: Node) -> RelayExpr:
    """Crop (the centre; the extra element goes at the end) or zero-pad (the extra element
    at the end) each of ``axes`` to ``shape``: strided_slice and nn.pad for a known shape,
    their dyn forms for one known only at run time."""
    x, shape = node.input(0, "input_data"), node.static_shape(0, "input_data")
    axes = norm_axes(node, node.attr("axes", list(range(len(shape)))), len(shape))
    if node.value(1) is None:
        return _center_crop_pad_run_time(node, x, shape, axes)
    target = node.ints(1, "shape")
    if len(target) != len(axes) or any(t < 0 for t in target):
        raise node.fail(f"shape {target} must give one size >= 0 per axis {axes}")
    pads = [[0, 0] for _ in shape]
    for axis, want in zip(axes, target):
        have = shape[axis]
        if want < have:
            start = (have - want) // 2
            x = _op.strided_slice(x, [start], [start + want], axes=[axis])
        elif want > have:
            before = (want - have) // 2
            pads[axis] = [before, want - have - before]
    if any(p != [0, 0] for p in pads):
        x = _op.nn.pad(x, pads, scalar(0, node.dtype(0)))
    return x


def _center_crop_pad_run_time(node: Node, x: RelayExpr, shape: tuple[int, ...],
                              axes: list[int]) -> RelayExpr:
    """The same with the target sizes as values: per axis, crop max(have - want, 0) (begin
    at half of it) and pad max(want - have, 0) (half before)."""
    if rt.length(node, 1, "shape") != len(axes):
        raise node.fail(f"shape must give one size per axis {axes}")
    i64, zero = "int64", scalar(0, "int64")
    want = rt.int64(node, 1, "shape")
    have = rt.vector([shape[a] for a in axes])
    crop = _op.maximum(_op.subtract(have, want), zero)
    begin = _op.floor_divide(crop, scalar(2, i64))
    x = _op.strided_slice(x, begin, _op.add(begin, _op.minimum(want, have)), axes=axes)
    grow = _op.maximum(_op.subtract(want, have), zero)
    before = _op.floor_divide(grow, scalar(2, i64))
    widths = [rt.on_axes(v, axes, len(shape), 0) for v in (before, _op.subtract(grow, before))]
    return _op.nn.pad(x, _op.stack(widths, 1), scalar(0, node.dtype(0)))


def col2im(node: Node) -> RelayExpr:
    """Col2Im (2-D images): the sum of the blocks back at their places, as conv2d_transpose
    of the (N, C * K, blocks_h, blocks_w) columns with a 0/1 kernel that puts block element k
    at its kernel offset (groups = C)."""
    x, shape, dtype = node.input(0, "input"), node.static_shape(0, "input"), node.dtype(0)
    image, block = node.ints(1, "image_shape"), node.ints(2, "block_shape")
    if len(image) != 2 or len(block) != 2 or len(shape) != 3:
        raise node.unsupported(f"input {list(shape)}, image_shape {image} and block_shape "
                               f"{block}: ember supports (N, C * kH * kW, L) into 2-D images")
    strides = node.attr("strides", [1, 1])
    dilations = node.attr("dilations", [1, 1])
    pads = node.attr("pads", [0, 0, 0, 0])
    for what, values, least in (("block_shape", block, 1), ("strides", strides, 1),
                                ("dilations", dilations, 1), ("pads", pads, 0)):
        if len(values) != (4 if what == "pads" else 2) or min(values) < least:
            raise node.fail(f"{what} {list(values)} must hold {4 if what == 'pads' else 2} "
                            f"values >= {least}")
    k = product(block)
    counts = [(image[a] + pads[a] + pads[a + 2] - dilations[a] * (block[a] - 1) - 1)
              // strides[a] + 1 for a in range(2)]
    if shape[1] % k or product(counts) != shape[2]:
        raise node.fail(f"input {list(shape)} must be (N, C * {k}, {product(counts)}) for "
                        f"image {image}, block {block}, strides {strides}, pads {pads}, "
                        f"dilations {dilations}")
    channels = shape[1] // k
    kernel = np.zeros((channels * k, 1, *block), dtype)
    for ch in range(channels):
        for j in range(k):
            kernel[ch * k + j, 0, j // block[1], j % block[1]] = 1.0
    out_pad = [image[a] - ((counts[a] - 1) * strides[a] - pads[a] - pads[a + 2]
                           + dilations[a] * (block[a] - 1) + 1) for a in range(2)]
    cols = _op.reshape(x, (shape[0], shape[1], *counts))
    return _op.nn.conv2d_transpose(cols, const(kernel), strides=tuple(strides),
                                   padding=(pads[0], pads[1], pads[2], pads[3]),
                                   output_padding=tuple(out_pad), dilation=tuple(dilations),
                                   groups=channels)


def space_to_depth_crd(node: Node, x: RelayExpr, block: int) -> RelayExpr:
    """SpaceToDepth in CRD order (version 28): channel c, then the offset in the block."""
    n, c, h, w = node.static_shape(0, "input")
    if h % block or w % block:
        raise node.fail(f"height {h} and width {w} must divide by blocksize {block}")
    x = _op.reshape(x, (n, c, h // block, block, w // block, block))
    x = _op.transpose(x, (0, 1, 3, 5, 2, 4))
    return _op.reshape(x, (n, c * block * block, h // block, w // block))


def bit_shift(node: Node) -> RelayExpr:
    """x << y as x * 2^y (in the unsigned type of x's width, so it wraps), x >> y as
    floor(x / 2^y) (an arithmetic shift for signed x). A shift below 0 or of the width or
    more gives 0 (left) or the sign fill (right), as ONNX defines."""
    dtype = node.dtype(0)
    if not dtype.startswith(("int", "uint")):
        raise node.fail(f"X must be an integer tensor, got {dtype}")
    direction = node.choice("direction", "LEFT", ("LEFT", "RIGHT"))
    x, y = node.input(0, "X"), node.input(1, "Y")
    bits = np.dtype(dtype).itemsize * 8
    zero = scalar(0, dtype)
    out_of_range = _op.greater_equal(y, scalar(bits, dtype))
    if dtype.startswith("int"):
        out_of_range = _op.logical_or(out_of_range, _op.less(y, zero))
    y = _op.clip(y, 0, bits - 1)
    if direction == "RIGHT":
        shifted = _op.floor_divide(x, _op.power(scalar(2, dtype), y))
        fill = _op.where(_op.less(x, zero), scalar(-1, dtype), zero) if dtype.startswith(
            "int") else zero
        return _op.where(out_of_range, fill, shifted)
    unsigned = dtype if dtype.startswith("uint") else "u" + dtype
    power = _op.power(scalar(2, unsigned), _op.cast(y, unsigned))
    out = _op.multiply(_op.cast(x, unsigned), power)
    out = out if unsigned == dtype else _op.cast(out, dtype)
    return _op.where(out_of_range, zero, out)


def eye_like(node: Node) -> RelayExpr:
    """A constant 2-D identity (shifted by ``k``) of the input's shape and ``dtype``."""
    from ._proto import dtype_of

    shape = node.static_shape(0, "input")
    if len(shape) != 2:
        raise node.fail(f"input must be 2-D, got shape {list(shape)}")
    dtype = dtype_of(node.attr("dtype"), f"{node.label}: dtype") if node.has_attr(
        "dtype") else node.dtype(0)
    check_constant_size(node, shape, "the identity")
    return const(np.eye(shape[0], shape[1], node.attr("k", 0), dtype=dtype))


def cum_prod(node: Node) -> RelayExpr:
    """CumProd with exclusive and reverse (the axis must be known)."""
    x, ndim = node.input(0), node.ndim(0)
    axis = norm_axis(node, node.ints(1, "axis")[0], ndim)
    exclusive = bool(node.attr("exclusive", 0))
    if node.attr("reverse", 0):
        return _op.reverse(_op.cumprod(_op.reverse(x, axis), axis, exclusive=exclusive), axis)
    return _op.cumprod(x, axis, exclusive=exclusive)


def max_unpool(node: Node) -> RelayExpr:
    """Zeros of the output shape with each X written at its index (MaxPool's flat index over
    the whole output): a scatter per (batch, channel) row. The scatter kernel reads every
    update for every output element, so this is for small tensors."""
    x, shape = node.input(0, "X"), node.static_shape(0, "X")
    if len(shape) < 3:
        raise node.fail(f"X must be (N, C, spatial...), got {list(shape)}")
    n, c, spatial = shape[0], shape[1], shape[2:]
    if node.has_input(2):
        out_shape = node.ints(2, "output_shape")
    else:
        kernel = node.attr("kernel_shape")
        strides = node.attr("strides", [1] * len(spatial))
        pads = node.attr("pads", [0] * (2 * len(spatial)))
        out_shape = [n, c] + [(size - 1) * strides[k] - pads[k] - pads[k + len(spatial)]
                              + kernel[k] for k, size in enumerate(spatial)]
    if len(out_shape) != len(shape) or list(out_shape[:2]) != [n, c]:
        raise node.fail(f"output_shape {out_shape} must be (N, C, spatial...) of X's N and C")
    rows, per_out, per_in = n * c, product(out_shape[2:]), product(spatial)
    base = const((np.arange(rows, dtype="int64") * per_out).reshape(rows, 1))
    index = _op.subtract(_op.reshape(_op.cast(node.input(1, "I"), "int64"), (rows, per_in)),
                         base)
    zeros = _op.zeros((rows, per_out), node.dtype(0))
    out = _op.scatter_elements(zeros, index, _op.reshape(x, (rows, per_in)), 1)
    return _op.reshape(out, out_shape)


def non_zero(node: Node) -> RelayExpr:
    """NonZero: the padded coordinates (``nonzero_padded``) cut to the count found at run
    time with dyn.strided_slice; the result's length is ``?`` (the VM runs it)."""
    x = node.input(0, "X")
    node.static_shape(0, "X")
    indices, count = _op.nonzero_padded(x)
    return _op.strided_slice(indices, rt.vector([0]), count, axes=[1])


def compress(node: Node) -> RelayExpr:
    """Compress: ``take`` along ``axis`` (the flattened input without one) of the indices
    where the 1-D condition holds, found as NonZero does (VM)."""
    x, shape = node.input(0, "input"), node.static_shape(0, "input")
    cond_shape = node.static_shape(1, "condition")
    if len(cond_shape) != 1:
        raise node.fail(f"condition must be 1-D, got shape {list(cond_shape)}")
    if node.has_attr("axis"):
        axis = norm_axis(node, node.attr("axis"), len(shape))
        length = shape[axis]
    else:
        x, axis, length = _op.reshape(x, (-1,)), 0, product(shape)
    if cond_shape[0] > length:
        raise node.fail(f"condition has {cond_shape[0]} values, more than the {length} along "
                        "the axis")
    indices, count = _op.nonzero_padded(node.input(1, "condition"))
    picked = _op.strided_slice(_op.squeeze(indices, [0]), rt.vector([0]), count, axes=[0])
    return _op.take(x, picked, axis=axis)
