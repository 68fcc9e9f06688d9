"""The Resize and Upsample converters: ``image.resize2d`` on the last two axes (a 3-D input
runs as a height-1 image). Scales or sizes come from inputs (empty tensors mean "not given");
from version 18 ``axes`` may name the resized axes. Resize-10 and Upsample (7: scales as an
attribute, 9: as an input) have neither sizes nor a coordinate mode: coordinates are
asymmetric, and nearest rounds down when enlarging an axis and up when shrinking it, as
onnxruntime does for these versions."""
from __future__ import annotations

import math
from typing import Any

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
    if node.version < 11:
        return _legacy(node, node.const_value(1, "scales").reshape(-1))
    ty = node.type(0)
    ndim = ty.ndim
    _check_rank(node, ndim)
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
        out, scales = _scaled(node, in_sizes, factors), factors
    else:
        raise node.fail("needs scales or sizes")
    return _resize2d(node, out, scales, method=mode, coordinate_transformation_mode=coord,
                     rounding_method=node.choice("nearest_mode", "round_prefer_floor", _NEAREST),
                     cubic_alpha=node.attr("cubic_coeff_a", -0.75),
                     cubic_exclude=node.attr("exclude_outside", 0))


def upsample(node: Node) -> RelayExpr:
    scales = node.attr("scales") if node.version < 9 else node.const_value(1, "scales")
    return _legacy(node, np.asarray(scales, dtype="float64").reshape(-1))


def _legacy(node: Node, factors: np.ndarray) -> RelayExpr:
    """Upsample and Resize-10: one scale per axis, asymmetric coordinates."""
    ty = node.type(0)
    _check_rank(node, ty.ndim)
    mode = node.choice("mode", "nearest", ("nearest", "linear"))
    if len(factors) != ty.ndim:
        raise node.fail(f"{len(factors)} scales for an input of rank {ty.ndim}")
    factors = [float(f) for f in factors]
    least = 1.0 if node.op_type == "Upsample" else 0.0  # Upsample only enlarges
    if any(not (f > 0 and f >= least) for f in factors):
        raise node.fail(f"scales {factors} must be {'>= 1' if least else 'positive'}")
    spatial = factors[2:]
    if mode == "nearest" and any(f < 1 for f in spatial) and any(f >= 1 for f in spatial):
        raise node.unsupported(f"nearest with scales {factors} that enlarge one axis and "
                               "shrink another")
    rounding = "ceil" if spatial and spatial[0] < 1 else "floor"
    out = _scaled(node, ty.shape, factors)
    return _resize2d(node, out, factors, method=_MODES[mode],
                     coordinate_transformation_mode="asymmetric", rounding_method=rounding)


def _check_rank(node: Node, ndim: int) -> None:
    if ndim not in (3, 4):
        raise node.unsupported(f"input of rank {ndim} (ember resizes NCW and NCHW data)")


def _scaled(node: Node, in_sizes: tuple[Any, ...], factors: list[float]) -> list[Any]:
    """The output sizes of scaling ``in_sizes`` by ``factors`` (ONNX rounds down)."""
    for d, f in zip(in_sizes, factors):
        if not isinstance(d, int) and f != 1.0:
            raise node.unsupported("resizing a dynamic axis by a scale")
    return [math.floor(d * f) if f != 1.0 else d for d, f in zip(in_sizes, factors)]


def _resize2d(node: Node, out: list[Any], factors: list[float] | None, **attrs: Any
              ) -> RelayExpr:
    """``image.resize2d`` of input 0 to the sizes ``out`` (its last two axes)."""
    x, ty = node.input(0), node.type(0)
    ndim, in_sizes = ty.ndim, ty.shape
    if list(out[:2]) != list(in_sizes[:2]):
        raise node.unsupported("resizing the batch or channel axis")
    spatial = out[2:] if ndim == 4 else [1, out[2]]
    if not all(isinstance(s, int) and s > 0 for s in spatial):
        raise node.fail(f"the output size {out} must be positive and static")
    scales = None if factors is None else (factors[-2:] if ndim == 4 else [1.0, factors[-1]])
    data = x if ndim == 4 else _op.expand_dims(x, 2)
    result = _op.image.resize2d(data, size=spatial, scales=scales, **attrs)
    return result if ndim == 4 else _op.squeeze(result, [2])
