"""The Resize converter: ``image.resize2d`` on the last two axes (a 3-D input runs as a
height-1 image). Scales or sizes come from inputs (empty tensors mean "not given"); from
opset 18 ``axes`` may name the resized axes."""
from __future__ import annotations

import math

import numpy as np

from ....ir.expr import RelayExpr
from ... import op as _op
from ._node import Node
from ._util import norm_axes

_MODES = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_COORDS = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
           "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _given(node: Node, i: int) -> np.ndarray | None:
    """A scales/sizes input: None when absent or empty."""
    if not node.has_input(i):
        return None
    value = node.const_value(i, "scales" if i == 2 else "sizes")
    return None if value.size == 0 else value.reshape(-1)


def _full(node: Node, values: np.ndarray, axes: list[int], ndim: int, fill: float) -> list[float]:
    if len(values) != len(axes):
        raise node.fail(f"{len(values)} scales/sizes for {len(axes)} axes")
    out = [fill] * ndim
    for a, v in zip(axes, values):
        out[a] = float(v)
    return out


def resize(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
    ndim = ty.ndim
    if ndim not in (3, 4):
        raise node.unsupported(f"input of rank {ndim} (ember resizes NCW and NCHW data)")
    mode = _MODES[node.choice("mode", "nearest", tuple(_MODES))]
    coord = node.choice("coordinate_transformation_mode", "half_pixel", _COORDS)
    if coord == "tf_crop_and_resize":
        raise node.unsupported_attr("coordinate_transformation_mode", coord,
                                    "every mode but tf_crop_and_resize")
    if node.attr("antialias", 0):
        raise node.unsupported_attr("antialias", 1, "0")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise node.unsupported_attr("keep_aspect_ratio_policy",
                                    node.attr("keep_aspect_ratio_policy"), "'stretch'")
    axes = norm_axes(node, node.attr("axes", list(range(ndim))), ndim)
    scales_in, sizes_in = _given(node, 2), _given(node, 3)
    in_sizes = ty.shape
    if sizes_in is not None:
        sizes = _full(node, sizes_in, axes, ndim, math.nan)
        out = [int(s) if not math.isnan(s) else in_sizes[k] for k, s in enumerate(sizes)]
        scales = None
    elif scales_in is not None:
        factors = _full(node, scales_in, axes, ndim, 1.0)
        for k, d in enumerate(in_sizes):
            if not isinstance(d, int) and factors[k] != 1.0:
                raise node.unsupported("resizing a dynamic axis by a scale")
        out = [math.floor(d * f) if f != 1.0 else d for d, f in zip(in_sizes, factors)]
        scales = factors[-2:] if ndim == 4 else [1.0, factors[-1]]
    else:
        raise node.fail("needs scales or sizes")
    if list(out[:2]) != list(in_sizes[:2]):
        raise node.unsupported("resizing the batch or channel axis")
    spatial = out[2:] if ndim == 4 else [1, out[2]]
    if not all(isinstance(s, int) and s > 0 for s in spatial):
        raise node.fail(f"the output size {out} must be positive and static")
    data = x if ndim == 4 else _op.expand_dims(x, 2)
    result = _op.image.resize2d(
        data, size=spatial, method=mode, coordinate_transformation_mode=coord,
        rounding_method=node.choice("nearest_mode", "round_prefer_floor", _NEAREST),
        cubic_alpha=node.attr("cubic_coeff_a", -0.75),
        cubic_exclude=node.attr("exclude_outside", 0), scales=scales)
    return result if ndim == 4 else _op.squeeze(result, [2])
