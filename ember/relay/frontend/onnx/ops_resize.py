"""The Resize and Upsample converters: ``image.resize2d`` on the last two axes (a 3-D input
runs as a height-1 image). Scales or sizes come from inputs (empty tensors mean "not given");
from version 18 ``axes`` may name the resized axes. Resize-10 and Upsample (7: scales as an
attribute, 9: as an input) have neither sizes nor a coordinate mode: coordinates are
asymmetric, and nearest rounds down when enlarging an axis and up when shrinking it, as
onnxruntime does for these versions.

Constant scales of a symbolic height or width (a detector exported with dynamic height and
width) keep ``image.resize2d``, with size 0 on those axes: the input's size times the scale,
rounded down (float32, as onnxruntime), known at run time; the op fuses as in a static build.
Scales or sizes known only at run time (and constant scales of the batch or channel axis of a
symbolic input) resize with ``dyn.image.resize2d``: the output size is computed at run time,
and the coordinate transform uses the scales given (or size / input size). The batch and
channel axes must then keep their sizes (not checked at run time)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import norm_axes

_MODES = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_COORDS = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
           "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


def _given(node: Node, i: int) -> np.ndarray | RelayExpr | None:
    """A scales/sizes input: None when absent or empty, its value when known, else the
    expression that computes it at run time."""
    if not node.has_input(i) or node.type(i).shape == (0,):
        return None
    value = node.value(i)
    if value is None:
        return node.input(i)
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
    policy = node.choice("keep_aspect_ratio_policy", "stretch", _POLICIES)
    axes = norm_axes(node, node.attr("axes", list(range(ndim))), ndim)
    scales_in, sizes_in = _given(node, 2), _given(node, 3)
    if coord == "tf_crop_and_resize" or node.attr("antialias", 0):  # resampled axis by axis
        from .ops_resample import antialias_resize, crop_and_resize

        if node.attr("antialias", 0):
            if coord == "tf_crop_and_resize":
                raise node.unsupported("antialias with tf_crop_and_resize")
            return antialias_resize(node, axes, sizes_in, scales_in, coord)
        return crop_and_resize(node, axes, sizes_in, scales_in)
    in_sizes = ty.shape
    attrs = dict(method=mode, coordinate_transformation_mode=coord,
                 rounding_method=node.choice("nearest_mode", "round_prefer_floor", _NEAREST),
                 cubic_alpha=node.attr("cubic_coeff_a", -0.75),
                 cubic_exclude=node.attr("exclude_outside", 0))
    if isinstance(sizes_in, RelayExpr) or (sizes_in is None and isinstance(scales_in,
                                                                            RelayExpr)):
        return _resize_run_time(node, sizes_in, scales_in, axes, attrs, policy)
    if sizes_in is not None and policy != "stretch":
        out, scales = _keep_aspect(node, sizes_in, axes, in_sizes, policy)
    elif sizes_in is not None:
        sizes = _full(node, sizes_in, axes, ndim, math.nan)
        out = [int(s) if not math.isnan(s) else in_sizes[k] for k, s in enumerate(sizes)]
        scales = None
    elif scales_in is not None:
        factors = _full(node, scales_in, axes, ndim, 1.0)
        out, scales = _scaled(in_sizes, factors), factors
        if out is None:  # a symbolic axis scaled: its new size is computed at run time
            return _resize_scaled(node, factors, attrs)
    else:
        raise node.fail("needs scales or sizes")
    return _resize2d(node, out, scales, **attrs)


def upsample(node: Node) -> RelayExpr:
    if node.version >= 9 and node.value(1) is None:  # scales known only at run time
        mode = node.choice("mode", "nearest", ("nearest", "linear"))
        _check_rank(node, node.ndim(0))
        attrs = dict(method=_MODES[mode], coordinate_transformation_mode="asymmetric",
                     rounding_method="floor")  # Upsample only enlarges
        return _resize_run_time(node, None, node.input(1), list(range(node.ndim(0))), attrs)
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
    out = _scaled(ty.shape, factors)
    attrs = dict(method=_MODES[mode], coordinate_transformation_mode="asymmetric",
                 rounding_method=rounding)
    if out is None:  # a symbolic axis scaled: its new size is computed at run time
        return _resize_scaled(node, factors, attrs)
    return _resize2d(node, out, factors, **attrs)


def _check_rank(node: Node, ndim: int) -> None:
    if ndim not in (3, 4):
        raise node.unsupported(f"input of rank {ndim} (ember resizes NCW and NCHW data)")


def _scaled(in_sizes: tuple[Any, ...], factors: list[float]) -> list[Any] | None:
    """The output sizes of scaling ``in_sizes`` by ``factors`` (ONNX rounds down); None when
    a symbolic size is scaled (known at run time only)."""
    if any(not isinstance(d, int) and f != 1.0 for d, f in zip(in_sizes, factors)):
        return None
    return [math.floor(d * f) if f != 1.0 else d for d, f in zip(in_sizes, factors)]


def _keep_aspect(node: Node, sizes: np.ndarray, axes: list[int], in_sizes: tuple[Any, ...],
                 policy: str) -> tuple[list[Any], list[float]]:
    """keep_aspect_ratio_policy: one scale for every resized axis, the smallest (not_larger)
    or largest (not_smaller) of sizes / input sizes; sizes round half up."""
    if len(sizes) != len(axes) or not all(isinstance(in_sizes[a], int) for a in axes):
        raise node.fail(f"{len(sizes)} sizes for axes {axes} of static sizes")
    ratios = [float(s) / in_sizes[a] for s, a in zip(sizes, axes)]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    out = [int(scale * d + 0.5) if k in axes else d for k, d in enumerate(in_sizes)]
    return out, [scale if k in axes else 1.0 for k in range(len(in_sizes))]


def _resize_scaled(node: Node, factors: list[float], attrs: dict[str, Any]) -> RelayExpr:
    """Constant scales of a symbolic height or width: ``image.resize2d`` with size 0 on those
    axes (the input's size times the scale, rounded down, at run time), a static op that
    fuses as the static build's does; ``dyn.image.resize2d`` when the batch or channel axis
    is scaled (the run-time path checks they keep their sizes)."""
    x, ty = node.input(0), node.type(0)
    if any(f != 1.0 for f in factors[:2]):
        return _resize_run_time(node, None, const(np.asarray(factors, "float32")),
                                list(range(ty.ndim)), attrs)
    in_hw, scales = (ty.shape[2:], factors[2:]) if ty.ndim == 4 else ((1, ty.shape[2]),
                                                                      [1.0, factors[2]])
    size = [math.floor(np.float32(d) * np.float32(f)) if isinstance(d, int) else 0
            for d, f in zip(in_hw, scales)]
    if any(isinstance(d, int) and s < 1 for d, s in zip(in_hw, size)):
        raise node.fail(f"the output size {size} of scaling {list(in_hw)} by {scales} is empty")
    data = x if ty.ndim == 4 else _op.expand_dims(x, 2)
    result = _op.image.resize2d(data, size=size, scales=scales, **attrs)
    return result if ty.ndim == 4 else _op.squeeze(result, [2])


def _resize_run_time(node: Node, sizes: Any, scales: Any, axes: list[int],
                     attrs: dict[str, Any], policy: str = "stretch") -> RelayExpr:
    """dyn.image.resize2d with the output size (and the scales of the coordinate transform)
    computed at run time from ``sizes`` or ``scales`` (values of ``axes``, known or not)."""
    x, ndim = node.input(0), node.ndim(0)
    shape = _op.shape_of(x, rt.I64)
    if sizes is not None and policy != "stretch":
        given = sizes if isinstance(sizes, RelayExpr) else rt.vector(sizes)
        ratios = _op.divide(_op.cast(given, "float32"),
                            _op.cast(rt.dims_at(x, axes), "float32"))
        pick = _op.min if policy == "not_larger" else _op.max
        scale = _op.broadcast_to(pick(ratios, axis=[0], keepdims=True), (len(axes),))
        factors = rt.on_axes(scale, axes, ndim, const(np.ones(ndim, "float32")))
        half_up = _op.add(_op.multiply(_op.cast(shape, "float32"), factors),
                          const(np.array(0.5, "float32")))
        out = _op.cast(_op.floor(half_up), rt.I64)
    elif sizes is not None:
        given = sizes if isinstance(sizes, RelayExpr) else rt.vector(sizes)
        out = rt.on_axes(_op.cast(given, rt.I64), axes, ndim, shape)
        factors = _op.divide(_op.cast(out, "float32"), _op.cast(shape, "float32"))
    else:
        given = scales if isinstance(scales, RelayExpr) else const(
            np.asarray(scales, "float32"))
        factors = rt.on_axes(_op.cast(given, "float32"), axes, ndim,
                             const(np.ones(ndim, "float32")))
        out = _op.cast(_op.floor(_op.multiply(_op.cast(shape, "float32"), factors)), rt.I64)
    size_hw = _op.strided_slice(out, [2], [ndim])
    scale_hw = _op.strided_slice(factors, [2], [ndim])
    data = x
    if ndim == 3:  # NCW as a height-1 image
        data = _op.expand_dims(x, 2)
        size_hw = _op.concatenate([rt.vector([1]), size_hw], 0)
        scale_hw = _op.concatenate([const(np.ones(1, "float32")), scale_hw], 0)
    result = _op.dyn.image.resize2d(data, size_hw, scale_hw, where=node.label, **attrs)
    return result if ndim == 4 else _op.squeeze(result, [2])


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
