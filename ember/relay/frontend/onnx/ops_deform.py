"""ONNX DeformConv (2-D): bilinear samples at the kernel taps moved by the offsets, then one
GEMM per group, as ONNX's reference defines it.

Tap (i, j) of output pixel (y, x) reads the input at ``(y * stride - pad + i * dilation +
dy, x * stride - pad + j * dilation + dx)``, where (dy, dx) come from ``offset`` (laid out
(N, offset_group, kH, kW, 2, oH, oW)); the four neighbours are gathered (0 outside the image)
and weighted, times ``mask`` when given. The samples, (N, C, kH * kW, oH * oW), then meet the
weights in ``nn.batch_matmul`` per group, plus the bias. Static shapes."""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import scalar

I32 = "int32"


def _attr_pair(node: Node, name: str, default: int, size: int = 2) -> list[int]:
    values = [int(v) for v in node.attr(name, [default] * size)]
    if len(values) != size:
        raise node.fail(f"{name} must have {size} values for a 2-D DeformConv, got {values}")
    return values


def _positions(node: Node, offset: RelayExpr, axis: int, kernel: int, out: int, stride: int,
               pad: int, dilation: int, dtype: str) -> RelayExpr:
    """(N, G, kH, kW, oH, oW) sample coordinates along ``axis`` (0: rows, 1: columns)."""
    taps = np.arange(kernel) * dilation
    base = np.arange(out) * stride - pad
    shape = [1, 1, 1, 1, 1, 1]
    shape[2 + axis], shape[4 + axis] = kernel, out
    grid = (taps.reshape(-1, 1) + base.reshape(1, -1))  # (kernel, out)
    grid = np.expand_dims(grid, (1, 3) if axis == 0 else (0, 2)).reshape(shape)
    delta = _op.squeeze(_op.strided_slice(offset, [axis], [axis + 1], axes=[4]), [4])
    return _op.add(delta, node.const(grid, dtype))


def _sample(data: RelayExpr, ys: RelayExpr, xs: RelayExpr, height: int, width: int,
            dtype: str, out_shape: tuple[int, ...]) -> RelayExpr:
    """Bilinear samples of ``data`` (N, G, Cg, H*W) at (N, G, T) coordinates: ``out_shape``
    (N, G, Cg, T)."""
    y0, x0 = _op.floor(ys), _op.floor(xs)
    fy, fx = _op.subtract(ys, y0), _op.subtract(xs, x0)
    one = scalar(1.0, dtype)
    total = None
    for dy, wy in ((0.0, _op.subtract(one, fy)), (1.0, fy)):
        for dx, wx in ((0.0, _op.subtract(one, fx)), (1.0, fx)):
            y, x = _op.add(y0, scalar(dy, dtype)), _op.add(x0, scalar(dx, dtype))
            inside = _op.logical_and(
                _op.logical_and(_op.greater_equal(y, scalar(0.0, dtype)),
                                _op.less(y, scalar(float(height), dtype))),
                _op.logical_and(_op.greater_equal(x, scalar(0.0, dtype)),
                                _op.less(x, scalar(float(width), dtype))))
            yi = _op.cast(_op.clip(y, 0.0, float(height - 1)), I32)
            xi = _op.cast(_op.clip(x, 0.0, float(width - 1)), I32)
            index = _op.add(_op.multiply(yi, scalar(width, I32)), xi)  # (N, G, T)
            index = _op.broadcast_to(_op.expand_dims(index, 2), out_shape)
            weight = _op.where(inside, _op.multiply(wy, wx), scalar(0.0, dtype))
            term = _op.multiply(_op.gather(data, 3, index), _op.expand_dims(weight, 2))
            total = term if total is None else _op.add(total, term)
    assert total is not None, "four taps were summed"
    return total


def deform_conv(node: Node) -> RelayExpr:
    x, shape, dtype = node.input(0, "X"), node.static_shape(0, "X"), node.dtype(0)
    w_shape = node.static_shape(1, "W")
    if len(shape) != 4 or len(w_shape) != 4:
        raise node.unsupported(f"only 2-D DeformConv (X and W of rank 4) is supported, got X "
                               f"{list(shape)} and W {list(w_shape)}")
    n, c, height, width = shape
    oc, cpg, kh, kw = w_shape
    group, offset_group = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    if group < 1 or c != cpg * group or oc % group:
        raise node.fail(f"X has {c} channels and W {list(w_shape)}: with group={group} W must "
                        f"have C / group channels and a multiple of group filters")
    if offset_group < 1 or c % offset_group:
        raise node.fail(f"offset_group={offset_group} must divide the {c} input channels")
    if node.has_attr("kernel_shape") and _attr_pair(node, "kernel_shape", 1) != [kh, kw]:
        raise node.fail(f"kernel_shape {node.attr('kernel_shape')} does not match W's "
                        f"{[kh, kw]}")
    strides, dilations = _attr_pair(node, "strides", 1), _attr_pair(node, "dilations", 1)
    pads = _attr_pair(node, "pads", 0, 4)
    oh = (height + pads[0] + pads[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (width + pads[1] + pads[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    k, g = kh * kw, offset_group
    want = (n, g * 2 * k, oh, ow)
    if node.static_shape(2, "offset") != want:
        raise node.fail(f"offset must have shape {list(want)}, got "
                        f"{list(node.static_shape(2, 'offset'))}")
    offset = _op.reshape(node.input(2, "offset"), (n, g, kh, kw, 2, oh, ow))
    ys = _positions(node, offset, 0, kh, oh, strides[0], pads[0], dilations[0], dtype)
    xs = _positions(node, offset, 1, kw, ow, strides[1], pads[1], dilations[1], dtype)
    taps = k * oh * ow
    data = _op.reshape(x, (n, g, c // g, height * width))
    sampled = _sample(data, _op.reshape(ys, (n, g, taps)), _op.reshape(xs, (n, g, taps)),
                      height, width, dtype, (n, g, c // g, taps))
    if node.has_input(4):
        if node.static_shape(4, "mask") != (n, g * k, oh, ow):
            raise node.fail(f"mask must have shape {[n, g * k, oh, ow]}, got "
                            f"{list(node.static_shape(4, 'mask'))}")
        sampled = _op.multiply(sampled, _op.reshape(node.input(4, "mask"), (n, g, 1, taps)))
    return _gemm(node, sampled, (n, c, oc, group, k, oh, ow))


def _gemm(node: Node, sampled: RelayExpr, sizes: tuple[int, ...]) -> RelayExpr:
    """The samples (N, C, K, P) against W (oC, C / group, K), per group, plus the bias."""
    n, c, oc, group, k, oh, ow = sizes
    p = oh * ow
    cols = _op.reshape(sampled, (n, group, (c // group) * k, p))
    cols = _op.reshape(_op.transpose(cols, [1, 0, 3, 2]), (group, n * p, (c // group) * k))
    weights = _op.reshape(node.input(1, "W"), (group, oc // group, (c // group) * k))
    out = _op.nn.batch_matmul(weights, cols)  # (group, oC / group, N * P)
    out = _op.transpose(_op.reshape(out, (group, oc // group, n, p)), [2, 0, 1, 3])
    out = _op.reshape(out, (n, oc, oh, ow))
    if node.has_input(3):
        out = _op.add(out, _op.reshape(node.input(3, "B"), (1, oc, 1, 1)))
    return out
