"""ResNet (v2, pre-activation) as in the Relay-era zoo: ``num_layers`` 18 ... 269.

Images taller than 28 use the ImageNet layout (four stages of basic blocks for < 50 layers,
bottlenecks from 50); a stem of 7x7/2 conv + 3x3/2 max pool, or a single 3x3 conv when the
image is at most 32 high (e.g. ``image_shape=(3, 32, 32)``). Images of height <= 28 use the
CIFAR layout (three stages, ``num_layers = 6n + 2`` basic or ``9n + 2`` bottleneck blocks).
Input ``data`` (batch_size, *image_shape) in ``layout`` (NCHW or NHWC); output
(batch_size, num_classes) softmax probabilities.
"""
from __future__ import annotations

from typing import Any

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import Xavier, create_workload

# num_layers -> units per stage, ImageNet layout
_IMAGENET_UNITS = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3],
                   152: [3, 8, 36, 3], 200: [3, 24, 36, 3], 269: [3, 30, 48, 8]}
_EPS = 2e-5


class _Layout:
    """Keyword arguments shared by every conv / bn / pool of one network."""

    def __init__(self, layout: str) -> None:
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"resnet: layout must be 'NCHW' or 'NHWC', got {layout!r}")
        self.conv: dict[str, Any] = {"data_layout": layout,
                                     "kernel_layout": layers.conv_kernel_layout(layout)}
        self.bn: dict[str, Any] = {"axis": layout.index("C"), "epsilon": _EPS}
        self.pool: dict[str, Any] = {"layout": layout}


def _bn_relu(x: RelayExpr, name: str, lay: _Layout) -> RelayExpr:
    return relay.nn.relu(layers.batch_norm_infer(x, name=name, **lay.bn))


def _conv(x: RelayExpr, channels: int, kernel: int, stride: Any, name: str,
          lay: _Layout) -> RelayExpr:
    return layers.conv2d(x, channels=channels, kernel_size=(kernel, kernel), strides=stride,
                         padding=(kernel // 2, kernel // 2), name=name, **lay.conv)


def residual_unit(data: RelayExpr, num_filter: int, stride: tuple[int, int], dim_match: bool,
                  name: str, bottle_neck: bool, lay: _Layout) -> RelayExpr:
    """One pre-activation block: (bn, relu, conv) x 2 (basic) or x 3 (bottleneck, 1-3-1 with a
    quarter of the filters inside), plus the input or a 1x1 projection of it."""
    act1 = _bn_relu(data, f"{name}_bn1", lay)
    if bottle_neck:
        mid = int(num_filter * 0.25)
        body = _conv(act1, mid, 1, stride, f"{name}_conv1", lay)
        body = _conv(_bn_relu(body, f"{name}_bn2", lay), mid, 3, (1, 1), f"{name}_conv2", lay)
        body = _conv(_bn_relu(body, f"{name}_bn3", lay), num_filter, 1, (1, 1),
                     f"{name}_conv3", lay)
    else:
        body = _conv(act1, num_filter, 3, stride, f"{name}_conv1", lay)
        body = _conv(_bn_relu(body, f"{name}_bn2", lay), num_filter, 3, (1, 1),
                     f"{name}_conv2", lay)
    shortcut = data if dim_match else _conv(act1, num_filter, 1, stride, f"{name}_sc", lay)
    return relay.add(body, shortcut)


def resnet(units: list[int], num_stages: int, filter_list: list[int], num_classes: int,
           data_shape: tuple[int, ...], bottle_neck: bool = True, layout: str = "NCHW",
           dtype: str = "float32") -> Function:
    """The network from explicit stage sizes; ``filter_list[0]`` is the stem's width."""
    if len(units) != num_stages:
        raise ValueError(f"resnet: {len(units)} stage sizes for {num_stages} stages")
    lay = _Layout(layout)
    data = relay.var("data", shape=data_shape, dtype=dtype)
    # Normalise the raw input (no scale: gamma is unused but kept as a parameter, as before).
    body = layers.batch_norm_infer(data, name="bn_data", scale=False, **lay.bn)
    height = data_shape[layout.index("H")]
    if height <= 32:  # CIFAR-sized: no downsampling stem
        body = _conv(body, filter_list[0], 3, (1, 1), "conv0", lay)
    else:
        body = _conv(body, filter_list[0], 7, (2, 2), "conv0", lay)
        body = _bn_relu(body, "bn0", lay)
        body = relay.nn.max_pool2d(body, pool_size=(3, 3), strides=(2, 2), padding=(1, 1),
                                   **lay.pool)
    for i in range(num_stages):
        stride = (1, 1) if i == 0 else (2, 2)
        for j in range(units[i]):
            body = residual_unit(body, filter_list[i + 1], stride if j == 0 else (1, 1), j > 0,
                                 f"stage{i + 1}_unit{j + 1}", bottle_neck, lay)
    body = _bn_relu(body, "bn1", lay)
    body = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(body, **lay.pool))
    net = relay.nn.softmax(layers.dense_add_bias(body, units=num_classes, name="fc1"))
    return relay.Function(relay.analysis.free_vars(net), net)


def _height(image_shape: tuple[int, ...], layout: str) -> int:
    if len(image_shape) != 3:
        raise ValueError(f"resnet: image_shape must have 3 dims ({layout[1:]}), "
                         f"got {image_shape}")
    return image_shape[0] if layout == "NHWC" else image_shape[1]


def _plan(num_layers: int, height: int) -> tuple[list[int], list[int], bool]:
    """(units per stage, filter list, bottleneck?) for a depth and an image height."""
    if height <= 28:
        if num_layers >= 164 and (num_layers - 2) % 9 == 0:
            return [(num_layers - 2) // 9] * 3, [16, 64, 128, 256], True
        if num_layers < 164 and (num_layers - 2) % 6 == 0:
            return [(num_layers - 2) // 6] * 3, [16, 16, 32, 64], False
        raise ValueError(f"resnet: no {num_layers}-layer network for images of height "
                         f"{height} (<= 28 needs 6n+2 layers below 164, 9n+2 from 164)")
    if num_layers not in _IMAGENET_UNITS:
        raise ValueError(f"resnet: no {num_layers}-layer network; choose one of "
                         f"{sorted(_IMAGENET_UNITS)} (or an image of height <= 28)")
    if num_layers >= 50:
        return _IMAGENET_UNITS[num_layers], [64, 256, 512, 1024, 2048], True
    return _IMAGENET_UNITS[num_layers], [64, 64, 128, 256, 512], False


def get_net(batch_size: int, num_classes: int, num_layers: int = 50,
            image_shape: tuple[int, ...] = (3, 224, 224), layout: str = "NCHW",
            dtype: str = "float32", **kwargs: Any) -> Function:
    """The ResNet Function for ``num_layers`` and ``image_shape`` (C, H, W or H, W, C)."""
    image_shape = tuple(image_shape)
    units, filter_list, bottle_neck = _plan(num_layers, _height(image_shape, layout))
    return resnet(units, len(units), filter_list, num_classes, (batch_size, *image_shape),
                  bottle_neck, layout, dtype)


def initializer(num_units: int, bottle_neck: bool) -> Xavier:
    """Weights for a trunk of ``num_units`` pre-activation blocks that neither vanishes nor
    explodes: each block adds its branch to the trunk, and with He weights (magnitude 6) a
    branch keeps its input's variance, so the trunk's variance would double per block. A
    magnitude of ``6 / U ** (1 / k)`` (``k`` convs per branch) gives each branch ``1/U`` of the
    variance, so the trunk grows by at most ``(1 + 1/U) ** U < e`` (the idea of Fixup)."""
    convs = 3 if bottle_neck else 2
    return Xavier(factor_type="in", magnitude=6.0 / max(2.0, num_units ** (1.0 / convs)))


def get_workload(batch_size: int = 1, num_classes: int = 1000, num_layers: int = 18,
                 image_shape: tuple[int, ...] = (3, 224, 224), layout: str = "NCHW",
                 dtype: str = "float32", **kwargs: Any) -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of ResNet-``num_layers`` with Xavier weights (seed 0)."""
    net = get_net(batch_size, num_classes, num_layers, image_shape, layout, dtype, **kwargs)
    units, _, bottle_neck = _plan(num_layers, _height(image_shape, layout))
    return create_workload(net, initializer(sum(units), bottle_neck))
