"""A YOLOv8n-style detector (Ultralytics' ``yolov8n.yaml``), written as an exporter writes it.

Every "Conv" is conv + SiLU (batch norm folded into the bias; SiLU spelled ``x * sigmoid(x)``).

- Backbone: Conv 3x3/2 16, Conv 3x3/2 32, C2f(32, n=1), Conv 3x3/2 64, C2f(64, n=2),
  Conv 3x3/2 128, C2f(128, n=2), Conv 3x3/2 256, C2f(256, n=1), SPPF(256) (three chained 5x5
  stride-1 max pools, concatenated with their input). C2f: a 1x1 Conv to 2c, split in two
  halves, n bottlenecks (two 3x3 Convs, plus their input in the backbone) on the last half,
  every half concatenated and a 1x1 Conv.
- Neck: nearest 2x upsampling and concatenation with the stride-16 and stride-8 maps (top
  down), then 3x3/2 Convs and concatenation back down (bottom up), C2f after each join.
- Head (``Detect``, 80 classes, ``reg_max`` 16): per level two 3x3 Convs and a 1x1 conv to
  4 * 16 box logits, and two 3x3 Convs and a 1x1 conv to the class logits; the levels
  flattened and concatenated (8400 anchors at 640x640); the box logits as a distribution
  over 16 bins (softmax) whose expectation (a 1x1 conv with the weights 0..15) gives the
  distances to the four sides; boxes (centre x, y, width, height) from the anchor points and
  strides (constants), class scores by sigmoid.

Input ``data`` (batch_size, 3, H, W), H and W multiples of 32 (640x640 by default); output
(batch_size, 4 + num_classes, anchors). ``width`` and ``depth`` scale the channels and the
bottleneck counts (0.25 and 0.33 for "n").
"""
from __future__ import annotations

import math

import numpy as np

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import exported
from .init import create_workload

REG_MAX = 16


class _Namer:
    """Unique weight names in order: conv1, conv2, ..."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, what: str = "conv") -> str:
        self.count += 1
        return f"{what}{self.count}"


def conv(x: RelayExpr, name: _Namer, channels: int, kernel: int = 1, stride: int = 1) -> RelayExpr:
    """Ultralytics' Conv: conv (padding k // 2) + SiLU."""
    return exported.silu(exported.conv_bias(x, name(), channels, kernel, stride))


def c2f(x: RelayExpr, name: _Namer, channels: int, n: int, shortcut: bool) -> RelayExpr:
    """CSP bottlenecks with two convolutions: split, n bottlenecks, concatenate, 1x1."""
    c = channels // 2
    halves = relay.split(conv(x, name, 2 * c), 2, axis=1)
    ys = [halves[0], halves[1]]
    for _ in range(n):
        y = conv(conv(ys[-1], name, c, 3), name, c, 3)
        ys.append(relay.add(ys[-1], y) if shortcut else y)
    return conv(relay.concatenate(ys, axis=1), name, channels)


def sppf(x: RelayExpr, name: _Namer, channels: int, in_channels: int) -> RelayExpr:
    """Spatial pyramid pooling, fast: 1x1, three 5x5 max pools in a chain, concat, 1x1."""
    y = conv(x, name, in_channels // 2)
    pools = [y]
    for _ in range(3):
        pools.append(relay.nn.max_pool2d(pools[-1], pool_size=(5, 5), padding=(2, 2)))
    return conv(relay.concatenate(pools, axis=1), name, channels)


def _up(x: RelayExpr) -> RelayExpr:
    return relay.nn.upsampling(x, scale_h=2, scale_w=2, method="nearest_neighbor")


def _anchors(image: tuple[int, int], strides: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Anchor centres (2, A) in grid units and the stride of each anchor (1, A)."""
    points, per = [], []
    for s in strides:
        h, w = image[0] // s, image[1] // s
        ys, xs = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        points.append(np.stack([xs.ravel(), ys.ravel()]))
        per.append(np.full((1, h * w), float(s)))
    return (np.concatenate(points, axis=1).astype("float32"),
            np.concatenate(per, axis=1).astype("float32"))


def detect(levels: list[RelayExpr], name: _Namer, num_classes: int, in_channels: int,
           batch: int, image: tuple[int, int]) -> RelayExpr:
    """Ultralytics' Detect at inference: (batch, 4 + num_classes, anchors)."""
    c2 = max(16, in_channels // 4, 4 * REG_MAX)
    c3 = max(in_channels, min(num_classes, 100))
    flat = []
    for x in levels:
        box = exported.conv_bias(conv(conv(x, name, c2, 3), name, c2, 3), name(), 4 * REG_MAX)
        cls = exported.conv_bias(conv(conv(x, name, c3, 3), name, c3, 3), name(), num_classes)
        flat.append(relay.reshape(relay.concatenate([box, cls], axis=1),
                                  (batch, 4 * REG_MAX + num_classes, -1)))
    out = relay.concatenate(flat, axis=2)
    box, cls = relay.split(out, [4 * REG_MAX], axis=1)
    anchors = relay.reshape(box, (batch, 4, REG_MAX, -1))
    dist = relay.nn.softmax(relay.transpose(anchors, (0, 2, 1, 3)), axis=1)
    bins = np.arange(REG_MAX, dtype="float32").reshape(1, REG_MAX, 1, 1)
    dist = relay.nn.conv2d(dist, relay.const(bins), channels=1, kernel_size=(1, 1))
    dist = relay.reshape(dist, (batch, 4, -1))
    lt, rb = relay.split(dist, 2, axis=1)
    points, strides = _anchors(image, (8, 16, 32))
    x1y1 = relay.subtract(relay.const(points), lt)
    x2y2 = relay.add(relay.const(points), rb)
    centre = relay.divide(relay.add(x1y1, x2y2), relay.const(2.0))
    boxes = relay.concatenate([centre, relay.subtract(x2y2, x1y1)], axis=1)
    boxes = relay.multiply(boxes, relay.const(strides))
    return relay.concatenate([boxes, relay.sigmoid(cls)], axis=1)


def get_net(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 640, 640),
            num_classes: int = 80, width: float = 0.25, depth: float = 0.33,
            dtype: str = "float32") -> Function:
    """The detector Function of ``data`` (batch_size, *image_shape)."""
    if len(image_shape) != 3 or min(image_shape[1:]) < 32 or image_shape[1] % 32 or \
            image_shape[2] % 32:
        raise ValueError(f"yolov8: image_shape must be (C, H, W) with H, W multiples of 32, "
                         f"got {image_shape}")
    if width <= 0 or depth <= 0 or num_classes < 1:
        raise ValueError("yolov8: width, depth and num_classes must be positive")

    def ch(c: int) -> int:
        return max(8, int(math.ceil(min(c, 1024) * width / 8) * 8))

    def reps(n: int) -> int:
        return max(round(n * depth), 1)

    name = _Namer()
    data = relay.var("data", shape=(batch_size, *image_shape), dtype=dtype)
    x = conv(conv(data, name, ch(64), 3, 2), name, ch(128), 3, 2)
    x = c2f(x, name, ch(128), reps(3), True)
    p3 = c2f(conv(x, name, ch(256), 3, 2), name, ch(256), reps(6), True)
    p4 = c2f(conv(p3, name, ch(512), 3, 2), name, ch(512), reps(6), True)
    p5 = c2f(conv(p4, name, ch(1024), 3, 2), name, ch(1024), reps(3), True)
    p5 = sppf(p5, name, ch(1024), ch(1024))
    h4 = c2f(relay.concatenate([_up(p5), p4], axis=1), name, ch(512), reps(3), False)
    n3 = c2f(relay.concatenate([_up(h4), p3], axis=1), name, ch(256), reps(3), False)
    n4 = c2f(relay.concatenate([conv(n3, name, ch(256), 3, 2), h4], axis=1), name, ch(512),
             reps(3), False)
    n5 = c2f(relay.concatenate([conv(n4, name, ch(512), 3, 2), p5], axis=1), name, ch(1024),
             reps(3), False)
    out = detect([n3, n4, n5], name, num_classes, ch(256), batch_size, image_shape[1:])
    return relay.Function(relay.analysis.free_vars(out), out)


def get_workload(batch_size: int = 1, image_shape: tuple[int, int, int] = (3, 640, 640),
                 num_classes: int = 80, width: float = 0.25, depth: float = 0.33,
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the detector with He-scaled weights (seed 0)."""
    net = get_net(batch_size, tuple(image_shape), num_classes, width,  # type: ignore[arg-type]
                  depth, dtype)
    return create_workload(net)
