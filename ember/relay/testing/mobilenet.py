"""MobileNet v1: a 3x3/2 conv, then 13 depthwise-separable blocks, global pool, dense, softmax.

Input ``data`` (batch_size, *image_shape) in ``layout`` (NCHW, or NHWC with image_shape
(H, W, C)); output (batch_size, num_classes) probabilities. ``alpha`` scales every width and
``is_shallow`` keeps only the shallow variant's blocks (both keyword extras; the defaults give
the standard 1.0 MobileNet). Any image of at least 32x32 works; 224x224 is the usual size.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

_EPS = 1e-5
# (depthwise channels, pointwise channels, downsample) of blocks 1-6, 7-11 and 12-13.
_HEAD = [(32, 64, False), (64, 128, True), (128, 128, False), (128, 256, True),
         (256, 256, False), (256, 512, True)]
_DEEP = [(512, 512, False)] * 5 + [(512, 1024, True), (1024, 1024, False)]
_SHALLOW = [(512, 1024, True), (1024, 1024, True)]


def _bn_relu(x: RelayExpr, name: str, layout: str) -> RelayExpr:
    bn = layers.batch_norm_infer(x, name=name, epsilon=_EPS, axis=layout.index("C"))
    return relay.nn.relu(bn)


def conv_block(data: RelayExpr, name: str, channels: int, kernel_size: tuple[int, int] = (3, 3),
               strides: tuple[int, int] = (1, 1), padding: tuple[int, int] = (1, 1),
               layout: str = "NCHW") -> RelayExpr:
    """conv, batch norm, relu; weights ``name_conv_weight`` and ``name_bn_*``."""
    conv = layers.conv2d(data, channels=channels, kernel_size=kernel_size, strides=strides,
                         padding=padding, data_layout=layout,
                         kernel_layout=layers.conv_kernel_layout(layout), name=f"{name}_conv")
    return _bn_relu(conv, f"{name}_bn", layout)


def separable_conv_block(data: RelayExpr, name: str, depthwise_channels: int,
                         pointwise_channels: int, kernel_size: tuple[int, int] = (3, 3),
                         downsample: bool = False, padding: tuple[int, int] = (1, 1),
                         layout: str = "NCHW", dtype: str = "float32") -> RelayExpr:
    """Depthwise 3x3 conv (stride 2 if ``downsample``) + bn + relu, then 1x1 conv + bn + relu."""
    if layout == "NCHW":
        wshape = (depthwise_channels, 1, *kernel_size)
    elif layout == "NHWC":
        wshape = (*kernel_size, depthwise_channels, 1)
    else:
        raise ValueError(f"mobilenet: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    weight = relay.var(f"{name}_weight", shape=wshape, dtype=dtype)
    strides = (2, 2) if downsample else (1, 1)
    conv1 = layers.conv2d(data, weight, channels=depthwise_channels, groups=depthwise_channels,
                          kernel_size=kernel_size, strides=strides, padding=padding,
                          data_layout=layout,
                          kernel_layout=layers.conv_kernel_layout(layout, is_depthwise=True))
    act1 = _bn_relu(conv1, f"{name}_bn1", layout)
    conv2 = layers.conv2d(act1, channels=pointwise_channels, kernel_size=(1, 1),
                          data_layout=layout, kernel_layout=layers.conv_kernel_layout(layout),
                          name=f"{name}_conv2")
    return _bn_relu(conv2, f"{name}_bn2", layout)


def mobile_net(num_classes: int = 1000, data_shape: tuple[int, ...] = (1, 3, 224, 224),
               dtype: str = "float32", alpha: float = 1.0, is_shallow: bool = False,
               layout: str = "NCHW") -> Function:
    """The MobileNet Function for an input of ``data_shape`` (N and the image)."""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"mobilenet: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    data = relay.var("data", shape=data_shape, dtype=dtype)
    body = conv_block(data, "conv_block_1", int(32 * alpha), strides=(2, 2), layout=layout)
    for i, (dw, pw, down) in enumerate(_HEAD + (_SHALLOW if is_shallow else _DEEP), start=1):
        body = separable_conv_block(body, f"separable_conv_block_{i}", int(dw * alpha),
                                    int(pw * alpha), downsample=down, layout=layout,
                                    dtype=dtype)
    pool = relay.nn.global_avg_pool2d(body, layout=layout)
    fc = layers.dense_add_bias(relay.nn.batch_flatten(pool), units=num_classes, name="fc")
    net = relay.nn.softmax(fc)
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int = 1, num_classes: int = 1000,
                 image_shape: tuple[int, ...] = (3, 224, 224), dtype: str = "float32",
                 layout: str = "NCHW", *, alpha: float = 1.0,
                 is_shallow: bool = False) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of MobileNet with Xavier weights (seed 0)."""
    net = mobile_net(num_classes, (batch_size, *image_shape), dtype, alpha, is_shallow, layout)
    return create_workload(net)
