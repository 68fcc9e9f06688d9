"""ONNX's experimental operators of opsets 1-9 (removed from ONNX at opset 10, still in the
ONNX Model Zoo's older files and run by onnxruntime in the default domain): ``ImageScaler``
(tiny-yolov2, the Caffe2 conversions), ``Scale``, ``Affine``, ``ScaledTanh``,
``ParametricSoftplus``, ``Crop``, and the first versions of ``ThresholdedRelu`` (defined
by ONNX from opset 10) and ``MeanVarianceNormalization`` (from opset 9, with other
attributes). Semantics as onnxruntime's kernels."""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from ._node import Node
from ._util import scalar
from .ops_math import _float_input, softplus_expr
from .ops_norm import mvn_expr


def image_scaler(node: Node) -> RelayExpr:
    """``scale * x + bias[c]`` over NCHW data, one bias per channel."""
    x, dtype = _float_input(node)
    if node.ndim(0) != 4:
        raise node.fail(f"input of rank {node.ndim(0)} (ImageScaler takes NCHW data)")
    bias = [float(b) for b in node.attr("bias", [])]
    channels = node.shape(0)[1]
    if isinstance(channels, int) and len(bias) not in (0, channels):
        raise node.fail(f"{len(bias)} bias values for {channels} channels")
    y = _op.multiply(x, scalar(node.attr("scale", 1.0), dtype))
    if not bias:
        return y
    return _op.add(y, const(np.array(bias, dtype).reshape(-1, 1, 1)))


def scale(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    return _op.multiply(x, scalar(node.attr("scale", 1.0), dtype))


def affine(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    return _op.add(_op.multiply(x, scalar(node.attr("alpha", 1.0), dtype)),
                   scalar(node.attr("beta", 0.0), dtype))


def scaled_tanh(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    inner = _op.tanh(_op.multiply(x, scalar(node.attr("beta", 1.0), dtype)))
    return _op.multiply(inner, scalar(node.attr("alpha", 1.0), dtype))


def parametric_softplus(node: Node) -> RelayExpr:
    x, dtype = _float_input(node)
    inner = softplus_expr(_op.multiply(x, scalar(node.attr("beta", 1.0), dtype)), dtype)
    return _op.multiply(inner, scalar(node.attr("alpha", 1.0), dtype))


def crop(node: Node) -> RelayExpr:
    """NCHW ``x[:, :, top:bottom, left:right]``: ``border`` (left, top, right, bottom) cut
    from each side, or with ``scale`` (height, width) the window of that size at (top,
    left)."""
    shape = node.shape(0)
    if len(shape) != 4:
        raise node.fail(f"input of rank {len(shape)} (Crop takes NCHW data)")
    if not all(isinstance(s, int) for s in shape[2:]):
        raise node.unsupported(f"input of run-time height or width {shape} (give them with "
                               "from_onnx(shape=...))")
    border = [int(b) for b in node.attr("border")]
    if len(border) != 4:
        raise node.invalid_attr("border", border, "4 values: left, top, right, bottom")
    left, top, right, bottom = border
    size = [int(s) for s in node.attr("scale", [])]
    h, w = shape[2:]
    if size:
        if len(size) != 2:
            raise node.invalid_attr("scale", size, "2 values: height, width")
        end_h, end_w = top + size[0], left + size[1]
    else:
        end_h, end_w = h - bottom, w - right
    if min(left, top) < 0 or end_h > h or end_w > w or end_h <= top or end_w <= left:
        raise node.fail(f"border {border} and scale {size} do not fit an input of {h}x{w}")
    return _op.strided_slice(node.input(0), [top, left], [end_h, end_w], axes=[2, 3])


def mean_variance_normalization_1(node: Node) -> RelayExpr:
    """As onnxruntime runs version 1 (before opset 9): statistics over the batch and the
    spatial axes (as version 9's default ``axes``), the channels too with
    ``across_channels``; centred only without ``normalize_variance``."""
    x, dtype = _float_input(node)
    if node.ndim(0) < 3:
        raise node.fail(f"input of rank {node.ndim(0)} (NCHW data expected)")
    axes = [k for k in range(node.ndim(0)) if k != 1 or node.attr("across_channels", 0)]
    return mvn_expr(x, dtype, axes, bool(node.attr("normalize_variance", 1)))
