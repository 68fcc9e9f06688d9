"""Converters of convolution and pooling: Conv, ConvTranspose, MaxPool, AveragePool,
GlobalAveragePool, GlobalMaxPool.

Relay has the 2-D forms; a 1-D operator runs as the 2-D one on a height-1 image
(``expand_dims`` before, ``squeeze`` after; the weight's expand folds into the constant).
``auto_pad`` SAME_UPPER/SAME_LOWER/VALID is turned into explicit pads from the input size.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import scalar

_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _spatial_rank(node: Node, x_ndim: int) -> int:
    n = x_ndim - 2
    if n not in (1, 2):
        raise node.unsupported(f"{n}-D spatial input (rank {x_ndim}) is not supported; ember "
                               "imports 1-D and 2-D convolution and pooling")
    return n


def _ints(node: Node, name: str, n: int, default: int) -> list[int]:
    value = node.attr(name, None)
    if value is None:
        return [default] * n
    if len(value) != n:
        raise node.invalid_attr(name, value, f"{n} values (one per spatial axis)")
    return [int(v) for v in value]


def window_pads(node: Node, in_sizes: Sequence[Any], kernel: Sequence[int],
                strides: Sequence[int], dilations: Sequence[int]) -> list[int]:
    """ONNX pads (begins then ends) for ``auto_pad`` and ``pads``."""
    n = len(kernel)
    auto = node.choice("auto_pad", "NOTSET", _AUTO_PAD)
    if auto == "VALID":
        return [0] * (2 * n)
    if auto == "NOTSET":
        pads = _ints(node, "pads", 2 * n, 0)
        if any(p < 0 for p in pads):
            raise node.invalid_attr("pads", pads, "non-negative")
        return pads
    begins, ends = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        if isinstance(size, int):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        elif s == 1:  # the output keeps the size: the pads do not depend on it
            total = (k - 1) * d
        else:
            raise node.unsupported(f"auto_pad={auto} with stride {s} over a spatial size "
                                   "known only at run time (give it with from_onnx(shape=...))")
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return begins + ends


def pad_same_run_time(node: Node, x: RelayExpr, kernel: Sequence[int], strides: Sequence[int],
                      dilations: Sequence[int], value: float) -> RelayExpr | None:
    """``x`` padded by ``value`` as ``auto_pad`` SAME_UPPER/SAME_LOWER asks, with widths
    computed at run time (tf2onnx's strided convolutions of inputs of any height and width:
    the pads depend on the size modulo the stride); None when the pads are known at import
    (``window_pads``)."""
    auto = node.choice("auto_pad", "NOTSET", _AUTO_PAD)
    sizes = node.type_of(x).shape[2:]
    if not auto.startswith("SAME") or all(isinstance(size, int) or s == 1
                                          for size, s in zip(sizes, strides)):
        return None
    i64 = "int64"
    n = rt.dims_at(x, list(range(2, 2 + len(sizes))))
    s, k, d = (rt.vector(v) for v in (strides, kernel, dilations))
    one, zero = scalar(1, i64), scalar(0, i64)
    out = _op.floor_divide(_op.add(n, _op.subtract(s, one)), s)
    reach = _op.add(_op.multiply(_op.subtract(k, one), d), one)
    total = _op.maximum(_op.subtract(_op.add(_op.multiply(_op.subtract(out, one), s), reach), n),
                        zero)
    small = _op.floor_divide(total, scalar(2, i64))
    big = _op.subtract(total, small)
    begins, ends = (small, big) if auto == "SAME_UPPER" else (big, small)
    batch_channel = rt.vector([0, 0])
    widths = _op.stack([_op.concatenate([batch_channel, begins], 0),
                        _op.concatenate([batch_channel, ends], 0)], 1)
    padded = _op.nn.pad(x, widths, scalar(value, node.type_of(x).dtype))
    channels = node.type_of(x).shape[1]
    if isinstance(channels, int):  # dyn.nn.pad's type has every size '?': keep the channels
        padded = _op.reshape(padded, [0, channels] + [0] * len(sizes))  # (for blocked convs)
    return padded


def _to_2d(x: RelayExpr, n: int) -> RelayExpr:
    return _op.expand_dims(x, 2) if n == 1 else x


def _from_2d(x: RelayExpr, n: int) -> RelayExpr:
    return _op.squeeze(x, [2]) if n == 1 else x


def _pads_2d(pads: list[int], n: int) -> tuple[int, int, int, int]:
    if n == 1:
        return (0, pads[0], 0, pads[1])
    return (pads[0], pads[1], pads[2], pads[3])


def _pair(values: Sequence[int], n: int, fill: int) -> tuple[int, int]:
    return (fill, values[0]) if n == 1 else (values[0], values[1])


# ---------------------------------------------------------------- Conv, ConvTranspose
def conv(node: Node) -> RelayExpr:
    bias = node.input(2) if node.has_input(2) else None
    x, w = node.input(0, "X"), node.input(1, "W")
    n = _spatial_rank(node, node.ndim(0))
    kernel = _ints(node, "kernel_shape", n, 0) if node.has_attr("kernel_shape") else list(
        node.shape(1)[2:])
    padded = pad_same_run_time(node, x, kernel, _ints(node, "strides", n, 1),
                               _ints(node, "dilations", n, 1), 0.0)
    if padded is not None:
        return conv_expr(node, padded, w, bias, padded=True)
    return conv_expr(node, x, w, bias)


def conv_expr(node: Node, x: RelayExpr, w: RelayExpr, bias: RelayExpr | None,
              padded: bool = False) -> RelayExpr:
    """The convolution of ``x`` by ``w`` (+ ``bias``) with the node's attributes (Conv's, and
    those of ConvInteger and QLinearConv, which take other inputs); ``padded``: ``x`` has
    its ``auto_pad`` padding already."""
    xt, wt = node.type_of(x), node.type_of(w)
    n = _spatial_rank(node, xt.ndim)
    if wt.ndim != xt.ndim:
        raise node.fail(f"W has rank {wt.ndim} but X has rank {xt.ndim}")
    kernel = _ints(node, "kernel_shape", n, 0) if node.has_attr("kernel_shape") else list(
        wt.shape[2:])
    strides, dilations = _ints(node, "strides", n, 1), _ints(node, "dilations", n, 1)
    pads = [0] * (2 * n) if padded else window_pads(node, xt.shape[2:], kernel, strides,
                                                    dilations)
    out = _op.nn.conv2d(_to_2d(x, n), _to_2d(w, n), strides=_pair(strides, n, 1),
                        padding=_pads_2d(pads, n), dilation=_pair(dilations, n, 1),
                        groups=node.attr("group", 1))
    if bias is not None:
        out = _op.nn.bias_add(out, bias, axis=1)
    return _from_2d(out, n)


def conv_transpose(node: Node) -> RelayExpr:
    x, w = node.input(0, "X"), node.input(1, "W")
    xt, wt = node.type(0), node.type(1)
    n = _spatial_rank(node, xt.ndim)
    kernel = _ints(node, "kernel_shape", n, 0) if node.has_attr("kernel_shape") else list(
        wt.shape[2:])
    strides, dilations = _ints(node, "strides", n, 1), _ints(node, "dilations", n, 1)
    out_pad = _ints(node, "output_padding", n, 0)
    pads = _transpose_pads(node, xt.shape[2:], kernel, strides, dilations, out_pad)
    out = _op.nn.conv2d_transpose(
        _to_2d(x, n), _to_2d(w, n), strides=_pair(strides, n, 1), padding=_pads_2d(pads, n),
        output_padding=_pair(out_pad, n, 0), dilation=_pair(dilations, n, 1),
        groups=node.attr("group", 1))
    if node.has_input(2):
        out = _op.nn.bias_add(out, node.input(2), axis=1)
    return _from_2d(out, n)


def _transpose_pads(node: Node, in_sizes: Sequence[Any], kernel: list[int], strides: list[int],
                    dilations: list[int], out_pad: list[int]) -> list[int]:
    """Pads of a ConvTranspose; from ``output_shape`` or SAME auto_pad when given."""
    auto = node.choice("auto_pad", "NOTSET", _AUTO_PAD)
    n = len(kernel)
    target = node.attr("output_shape", None)
    if target is None and auto in ("NOTSET", "VALID"):
        return [0] * (2 * n) if auto == "VALID" else window_pads(node, in_sizes, kernel,
                                                                 strides, dilations)
    if target is not None:
        target = list(target)[-n:]
    begins, ends = [], []
    for k in range(n):
        size = in_sizes[k]
        extent = (kernel[k] - 1) * dilations[k] + 1
        if isinstance(size, int):
            full = strides[k] * (size - 1) + out_pad[k] + extent
            want = target[k] if target is not None else size * strides[k]
            total = full - want
        elif target is None:  # SAME: size * stride out, whatever the size
            total = out_pad[k] + extent - strides[k]
        else:
            raise node.unsupported("output_shape needs static spatial sizes")
        if total < 0:
            raise node.unsupported(f"output_shape {target} is larger than the full output "
                                   f"({full} on spatial axis {k})")
        small, big = total // 2, total - total // 2
        upper = auto == "SAME_UPPER"
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends


# ---------------------------------------------------------------- pooling
def max_pool(node: Node) -> RelayExpr:
    if node.wants_output(1):  # storage_order only orders the Indices
        raise node.unsupported("output 1 (Indices) is not supported (unpooling networks: "
                               "export without the indices where the model allows)")
    return _pool(node, _op.nn.max_pool2d, {}, lowest=True)


def average_pool(node: Node) -> RelayExpr:
    include = bool(node.attr("count_include_pad", 0))
    return _pool(node, _op.nn.avg_pool2d, {"count_include_pad": include})


def lp_pool(node: Node) -> RelayExpr:
    """(sum over each window of |x|^p)^(1/p): an average pool of |x|^p (pads counted) times
    the window size."""
    x, dtype = node.input(0, "X"), node.dtype(0)
    p = node.attr("p", 2)
    xp = _op.multiply(x, x) if p == 2 else _op.power(_op.abs(x), scalar(p, dtype))
    pooled = _pool(node, _op.nn.avg_pool2d, {"count_include_pad": True}, xp)
    total = _op.multiply(pooled, scalar(float(np.prod(node.attr("kernel_shape"))), dtype))
    return _op.sqrt(total) if p == 2 else _op.power(total, scalar(1.0 / p, dtype))


def global_lp_pool(node: Node) -> RelayExpr:
    x, dtype, ndim = node.input(0), node.dtype(0), node.ndim(0)
    if ndim < 3:
        raise node.fail(f"X must have rank >= 3 (N, C, spatial...), got rank {ndim}")
    p = node.attr("p", 2)
    total = _op.sum(_op.power(_op.abs(x), scalar(p, dtype)), axis=list(range(2, ndim)),
                    keepdims=True)
    return _op.power(total, scalar(1.0 / p, dtype))


def _pool(node: Node, fn: Any, extra: dict[str, Any], x: RelayExpr | None = None,
          lowest: bool = False) -> RelayExpr:
    """Pool input 0 (or ``x``, computed from it) with the node's window attributes. SAME
    pads known only at run time are written into ``x``: the lowest value for a max pool,
    zeros for an average pool (which then divides by the pooled padded ones when its pads
    are left out of the count)."""
    x, xt = (node.input(0, "X") if x is None else x), node.type(0)
    n = _spatial_rank(node, xt.ndim)
    kernel = node.attr("kernel_shape")
    if len(kernel) != n:
        raise node.invalid_attr("kernel_shape", kernel, f"{n} values (one per spatial axis)")
    strides, dilations = _ints(node, "strides", n, 1), _ints(node, "dilations", n, 1)
    fill = 0.0
    if lowest:  # the type's lowest value: a pad a max never picks over a real element
        info = np.finfo if xt.dtype.startswith("float") else np.iinfo
        fill = float(info(xt.dtype).min)
    padded = pad_same_run_time(node, x, kernel, strides, dilations, fill)
    if padded is not None:
        return _pool_padded(node, fn, extra, x, padded, kernel, strides, dilations, fill)
    pads = window_pads(node, xt.shape[2:], kernel, strides, dilations)
    ceil_mode = bool(node.attr("ceil_mode", 0))
    out = fn(_to_2d(x, n), pool_size=_pair(kernel, n, 1), strides=_pair(strides, n, 1),
             dilation=_pair(dilations, n, 1), padding=_pads_2d(pads, n), ceil_mode=ceil_mode,
             **extra)
    if ceil_mode:
        out = _drop_padding_windows(out, x, xt.shape[2:], kernel, strides, dilations, pads, n)
    return _from_2d(out, n)


def _pool_padded(node: Node, fn: Any, extra: dict[str, Any], x: RelayExpr, padded: RelayExpr,
                 kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                 fill: float) -> RelayExpr:
    """The pool of ``padded`` (x with its SAME pads, computed at run time) without pads."""
    n = len(kernel)
    if node.attr("ceil_mode", 0):
        raise node.unsupported("ceil_mode with auto_pad SAME over a spatial size known only "
                               "at run time")
    exclude = "count_include_pad" in extra and not extra["count_include_pad"]
    attrs = dict(pool_size=_pair(kernel, n, 1), strides=_pair(strides, n, 1),
                 dilation=_pair(dilations, n, 1), padding=(0, 0, 0, 0),
                 **({**extra, "count_include_pad": True} if "count_include_pad" in extra
                    else extra))
    out = fn(_to_2d(padded, n), **attrs)
    if exclude:  # the mean over the window's elements inside x only
        inside = pad_same_run_time(node, _op.ones_like(x), kernel, strides, dilations, 0.0)
        out = _op.divide(out, fn(_to_2d(inside, n), **attrs))
    return _from_2d(out, n)


def _drop_padding_windows(out: RelayExpr, x: RelayExpr, sizes: Sequence[Any],
                          kernel: Sequence[int], strides: Sequence[int],
                          dilations: Sequence[int], pads: list[int], n: int) -> RelayExpr:
    """With ceil_mode, a last window that would start in the end padding is not computed
    (ONNX since opset 19 and onnxruntime always): slice it off Relay's ceil-mode output."""
    # a window can start in the end padding only where pad_end + stride > extent: the ceil
    # adds at most stride - 1 to the span (torchvision's 3x3/2 unpadded pools never do)
    possible = any(pads[k + n] + strides[k] > (kernel[k] - 1) * dilations[k] + 1
                   for k in range(n))
    if not all(isinstance(size, int) for size in sizes):
        if not possible:
            return out
        return _drop_padding_windows_run_time(out, x, kernel, strides, dilations, pads, n)
    ends = []
    for k, size in enumerate(sizes):
        extent = (kernel[k] - 1) * dilations[k] + 1
        count = -(-(size + pads[k] + pads[k + n] - extent) // strides[k]) + 1
        if (count - 1) * strides[k] >= size + pads[k]:
            count -= 1
        ends.append(count)
    axes = [2, 3] if n == 2 else [3]
    return _op.strided_slice(out, [0] * n, ends, axes=axes)


def _drop_padding_windows_run_time(out: RelayExpr, x: RelayExpr, kernel: Sequence[int],
                                   strides: Sequence[int], dilations: Sequence[int],
                                   pads: list[int], n: int) -> RelayExpr:
    """The same for sizes known only at run time: the window counts computed from ``x``'s
    run-time sizes, the slice a ``dyn.strided_slice``."""
    one = scalar(1, "int64")
    size = rt.dims_at(x, list(range(2, 2 + n)))
    s, begin = rt.vector(strides), rt.vector(pads[:n])
    extent = rt.vector([(k - 1) * d + 1 for k, d in zip(kernel, dilations)])
    span = _op.subtract(_op.add(_op.add(size, begin), rt.vector(pads[n:])), extent)
    count = _op.add(_op.floor_divide(_op.add(span, _op.subtract(s, one)), s), one)
    in_padding = _op.greater_equal(_op.multiply(_op.subtract(count, one), s),
                                   _op.add(size, begin))
    count = _op.where(in_padding, _op.subtract(count, one), count)
    axes = [2, 3] if n == 2 else [3]
    return _op.strided_slice(out, rt.vector([0] * n), count, axes=axes)


def _global(kind: str) -> Any:
    def convert(node: Node) -> RelayExpr:
        x, ndim = node.input(0), node.ndim(0)
        if ndim < 3:
            raise node.fail(f"X must have rank >= 3 (N, C, spatial...), got rank {ndim}")
        if ndim == 4:
            fn = _op.nn.global_avg_pool2d if kind == "avg" else _op.nn.global_max_pool2d
            return fn(x)
        reduce = _op.mean if kind == "avg" else _op.max
        return reduce(x, axis=list(range(2, ndim)), keepdims=True)

    convert.__name__ = f"global_{kind}_pool"
    return convert


global_average_pool = _global("avg")
global_max_pool = _global("max")
