"""Image operators: ``image.resize2d`` (nearest, linear and cubic resampling of the H and W
axes of NCHW data): attrs, type relation, numpy reference, compute rule and builder.

Output pixel x maps to input coordinate c(x) by the coordinate transformation mode (ONNX's
names); nearest picks one pixel by the rounding method, linear blends 2 taps and cubic 4
taps per axis (Keys' kernel with parameter ``cubic_alpha``; ``cubic_exclude`` drops taps
outside the image and renormalises). Taps outside the image read the edge pixel.
Coordinates are computed in float32, as onnxruntime does, so ties round the same way.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call
from ...ir.types import Any as AnyDim
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import IntImm, PrimExpr
from ._attrs_base import OpAttrs, attrs_class
from ._compute_common import require
from ._dispatch import dyn_op, numbers, run_time
from ._layout import nchwc_lanes
from ._reg import INJECTIVE, call, defop
from ._shape import fail, fmt_shape, is_float, tensor_of

__all__ = ["resize2d"]

METHODS = ("nearest_neighbor", "linear", "cubic")
COORD_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
               "tf_half_pixel_for_nn", "half_pixel_symmetric")
ROUNDING = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "round")


@attrs_class("Resize2DAttrs")
class Resize2DAttrs(OpAttrs):
    """image.resize2d: output (height, width); ``scales`` (height, width) drive the
    coordinate transform when given (None: output size / input size). A size of 0 (scales
    required) is the input's size times the scale, rounded down (``scaled_size``): an
    upsampling of a run-time height or width keeps a static op, which fuses and whose
    output size the VM derives from the input's."""

    size: tuple[int, int] = (1, 1)
    scales: tuple[float, float] | None = None
    layout: str = "NCHW"
    method: str = "linear"
    coordinate_transformation_mode: str = "half_pixel"
    rounding_method: str = "round_prefer_floor"
    cubic_alpha: float = -0.75
    cubic_exclude: bool = False
    out_dtype: str = ""
    _op: ClassVar[str] = "image.resize2d"

    def __post_init__(self) -> None:
        self._ints("size", length=(2,))
        self._positive("size", allow_zero=True)
        if self.scales is not None:
            self._set("scales", tuple(float(s) for s in self.scales))
            if len(self.scales) != 2 or min(self.scales) <= 0:
                raise self._invalid("scales", "two positive factors (height, width)")
        elif 0 in self.size:
            raise self._invalid("size", "positive (a size of 0, scaled from the input's, "
                                        "needs scales)")
        check_modes(self, blocked=True)


def check_modes(attrs: Any, blocked: bool = False) -> None:
    """Normalise and check what image.resize2d and dyn.image.resize2d share: layout (NCHW, and
    with ``blocked`` NCHW<L>c too), method, coordinate and rounding modes, the cubic parameters
    and the output dtype."""
    if not (blocked and nchwc_lanes(attrs.layout)):
        attrs._choice("layout", ("NCHW", "NCHW<L>c") if blocked else ("NCHW",))
    attrs._choice("method", METHODS)
    attrs._choice("coordinate_transformation_mode", COORD_MODES)
    attrs._choice("rounding_method", ROUNDING)
    attrs._set("cubic_alpha", float(attrs.cubic_alpha))
    attrs._bool("cubic_exclude")
    attrs._dtype("out_dtype", allow_empty=True)


def _resize_rel(args: list[TensorType], attrs: Resize2DAttrs) -> TensorType:
    data, lanes = args[0], nchwc_lanes(attrs.layout)
    rank = 5 if lanes else 4
    if data.ndim != rank or (lanes and data.shape[4] != lanes):
        raise fail("image.resize2d", f"data must be {attrs.layout} (rank {rank}), got "
                                     f"{fmt_shape(data.shape)}")
    if not is_float(data.dtype):
        raise fail("image.resize2d", f"data must be floating-point, got {data.dtype}")
    size = output_size(attrs, data.shape[2], data.shape[3])
    if any(isinstance(d, int) and d < 1 for d in size):
        raise fail("image.resize2d", f"the output size {fmt_shape(size)} of scaling "
                                     f"{fmt_shape(data.shape)} by {attrs.scales} is empty")
    return tensor_of((*data.shape[:2], *size, *data.shape[4:]), attrs.out_dtype or data.dtype)


def scaled_size(n: Any, scale: float) -> Any:
    """floor(n * scale) as onnxruntime computes it (float32) for an int ``n``; for a size
    expression, the same in loop-IR arithmetic (an integral scale multiplies exactly)."""
    if isinstance(n, IntImm):
        n = n.value
    if isinstance(n, (int, np.integer)):
        return int(np.floor(np.float32(n) * np.float32(scale)))
    if float(scale).is_integer():
        return n * int(scale)
    return tir.cast(tir.floor(tir.cast(n, "float32") * tir.const(scale, "float32")), n.dtype)


def output_size(attrs: Resize2DAttrs, in_h: Any, in_w: Any) -> tuple[Any, Any]:
    """The output (height, width): the size attr, an entry 0 scaled from the input's (a
    symbolic input size stays symbolic: ``?``)."""
    out = []
    for given, n, k in zip(attrs.size, (in_h, in_w), range(2)):
        if given:
            out.append(given)
        elif isinstance(n, (int, np.integer)):
            out.append(scaled_size(int(n), attrs.scales[k]))  # type: ignore[index]
        else:
            out.append(AnyDim())
    return out[0], out[1]


# ---------------------------------------------------------------- per-axis sampling plans
# Each helper works on numpy float32 scalars/arrays and on te expressions alike (through the
# ``ops`` table), so the reference and the kernel compute the same coordinates.
def _coord(x: Any, in_size: Any, out_size: Any, scale: Any, mode: str, ops: Any) -> Any:
    f32 = ops.f32
    half = f32(0.5)
    if mode == "asymmetric":
        return f32(x) / scale
    if mode == "tf_half_pixel_for_nn":
        return (f32(x) + half) / scale
    if mode == "align_corners":
        # x * (in - 1) / (out - 1) in that order, as the ONNX spec and onnxruntime: exact at
        # ties (x = 3 of 7 over 2 pixels is 0.5), where x * ((in - 1) / (out - 1)) is not, and
        # no multiply-add for the C compiler to contract into a differently rounded result
        return ops.select(out_size > 1, f32(x) * f32(in_size - 1) / f32(out_size - 1),
                          f32(0.0))
    c = (f32(x) + half) / scale - half
    if mode == "pytorch_half_pixel":
        return ops.select(out_size > 1, c, f32(0.0))
    if mode == "half_pixel_symmetric":
        adjust = f32(out_size) / (f32(in_size) * scale)
        return f32(in_size) * half * (f32(1.0) - adjust) + c
    return c


def _cubic_weight(t: Any, a: float, ops: Any) -> Any:
    """Keys' cubic kernel at distance |t| (t in [0, 2))."""
    f32 = ops.f32
    t = ops.abs(t)
    near = ((f32(a + 2) * t - f32(a + 3)) * t * t) + f32(1.0)
    far = ((f32(a) * t - f32(5 * a)) * t + f32(8 * a)) * t - f32(4 * a)
    return ops.select(t <= f32(1.0), near, ops.select(t < f32(2.0), far, f32(0.0)))


def _taps(c: Any, n: Any, attrs: Resize2DAttrs, ops: Any) -> list[tuple[Any, Any]]:
    """(index, weight) pairs of one output coordinate along an axis of input size n."""
    f32 = ops.f32
    if attrs.method == "nearest_neighbor":
        r = attrs.rounding_method
        if r == "round_prefer_floor":
            i = ops.ceil(c - f32(0.5))
        elif r in ("round_prefer_ceil", "round"):
            i = ops.floor(c + f32(0.5))
        else:
            i = ops.floor(c) if r == "floor" else ops.ceil(c)
        return [(ops.clamp(ops.to_int(i), n), f32(1.0))]
    base = ops.floor(c)
    t = c - base
    b = ops.to_int(base)
    if attrs.method == "linear":
        return [(ops.clamp(b, n), f32(1.0) - t), (ops.clamp(b + 1, n), t)]
    taps = [(b + k, _cubic_weight(t - f32(k), attrs.cubic_alpha, ops)) for k in (-1, 0, 1, 2)]
    if not attrs.cubic_exclude:
        return [(ops.clamp(i, n), w) for i, w in taps]
    inside = [ops.select(ops.inside(i, n), w, f32(0.0)) for i, w in taps]
    total = inside[0] + inside[1] + inside[2] + inside[3]
    return [(ops.clamp(i, n), w / total) for (i, _), w in zip(taps, inside)]


class _NumpyOps:
    f32 = staticmethod(np.float32)
    abs = staticmethod(np.abs)
    floor = staticmethod(np.floor)
    ceil = staticmethod(np.ceil)

    @staticmethod
    def select(c: Any, a: Any, b: Any) -> Any:
        return np.where(c, a, b).astype(np.float32)

    @staticmethod
    def to_int(v: Any) -> Any:
        return np.asarray(v).astype(np.int64)

    @staticmethod
    def clamp(i: Any, n: int) -> Any:
        return np.clip(i, 0, n - 1)

    @staticmethod
    def inside(i: Any, n: int) -> Any:
        return (i >= 0) & (i < n)


class _TirOps:
    @staticmethod
    def f32(v: Any) -> PrimExpr:
        return tir.cast(v, "float32") if isinstance(v, PrimExpr) else tir.const(float(v),
                                                                                 "float32")

    abs = staticmethod(tir.abs)

    @staticmethod
    def floor(v: PrimExpr) -> PrimExpr:
        return tir.floor(v)

    @staticmethod
    def ceil(v: PrimExpr) -> PrimExpr:
        return tir.ceil(v)

    select = staticmethod(tir.Select_)

    @staticmethod
    def to_int(v: PrimExpr) -> PrimExpr:
        return tir.cast(v, "int32")

    @staticmethod
    def clamp(i: PrimExpr, n: PrimExpr) -> PrimExpr:
        return tir.min(tir.max(i, tir.const(0)), n - 1)

    @staticmethod
    def inside(i: PrimExpr, n: PrimExpr) -> PrimExpr:
        return tir.logical_and(i >= 0, i < n)


def _scales(attrs: Resize2DAttrs, in_h: Any, in_w: Any, ops: Any) -> tuple[Any, Any]:
    if attrs.scales is not None:
        return ops.f32(attrs.scales[0]), ops.f32(attrs.scales[1])
    oh, ow = attrs.size  # sizes without scales are given (nonzero)
    return ops.f32(oh) / ops.f32(in_h), ops.f32(ow) / ops.f32(in_w)


# ---------------------------------------------------------------- reference
def _resample_axis(x: np.ndarray, axis: int, out: int, scale: Any, attrs: Resize2DAttrs
                   ) -> np.ndarray:
    n = x.shape[axis]
    pos = np.arange(out)
    c = _coord(pos, n, out, scale, attrs.coordinate_transformation_mode, _NumpyOps)
    result = np.zeros(x.shape[:axis] + (out,) + x.shape[axis + 1:], np.float64)
    shape = [1] * x.ndim
    shape[axis] = out
    for idx, w in _taps(np.asarray(c, np.float32), n, attrs, _NumpyOps):
        picked = np.take(x, np.broadcast_to(idx, (out,)), axis=axis).astype(np.float64)
        result += picked * np.broadcast_to(w, (out,)).astype(np.float64).reshape(shape)
    return result


def _resize_ref(data: np.ndarray, attrs: Resize2DAttrs) -> np.ndarray:
    sh, sw = _scales(attrs, data.shape[2], data.shape[3], _NumpyOps)
    oh, ow = output_size(attrs, data.shape[2], data.shape[3])
    out = _resample_axis(data, 2, oh, sh, attrs)
    out = _resample_axis(out, 3, ow, sw, attrs)
    return out.astype(attrs.out_dtype or data.dtype)


# ---------------------------------------------------------------- compute
_N_TAPS = {"nearest_neighbor": 1, "linear": 2, "cubic": 4}


def _axis_tables(attrs: Any, n: PrimExpr, out: PrimExpr, scale: PrimExpr, axis: str
                 ) -> list[tuple[te.Tensor, te.Tensor]]:
    """Per tap, the source index and weight of every output position along one axis, as
    small stages of their own (tag "resize_table", not inlined): the main stage then reads
    16 numbers per pixel instead of repeating the coordinate arithmetic for every tap."""
    mode = attrs.coordinate_transformation_mode

    def tap(o: PrimExpr, k: int) -> tuple[PrimExpr, PrimExpr]:
        return _taps(_coord(o, n, out, scale, mode, _TirOps), n, attrs, _TirOps)[k]

    tables = []
    for k in range(_N_TAPS[attrs.method]):
        idx = te.compute((out,), lambda o, k=k: tap(o, k)[0],
                         name=f"T_resize_{axis}_index{k}", tag="resize_table")
        weight = te.compute((out,), lambda o, k=k: tap(o, k)[1],
                            name=f"T_resize_{axis}_weight{k}", tag="resize_table")
        tables.append((idx, weight))
    return tables


def _resize_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    sh, sw = _scales(attrs, x.shape[2], x.shape[3], _TirOps)
    dims = []
    for k, given in enumerate(attrs.size):
        dim = given or scaled_size(x.shape[2 + k], attrs.scales[k])
        if not isinstance(dim, int):  # a run-time size scaled by a factor below 1 may be 0
            require(dim > 0, f"image.resize2d: the output {('height', 'width')[k]} of "
                             f"scaling by {attrs.scales[k]} must be positive")
        dims.append(tir.const(dim) if isinstance(dim, int) else dim)
    oh, ow = dims
    return [resize_tensor(x, attrs, (oh, ow), (sh, sw), out_type.dtype)]  # type: ignore


def resize_tensor(x: te.Tensor, attrs: Any, size: tuple[PrimExpr, PrimExpr],
                  scales: tuple[PrimExpr, PrimExpr], dtype: str) -> te.Tensor:
    """The resize kernel for output ``size`` (size variables for dyn.image.resize2d) and
    float32 ``scales``; ``attrs`` gives the method and the coordinate modes. ``x`` is NCHW,
    or NCHW[L]c (the lanes, innermost, share each pixel's taps)."""
    in_h, in_w = x.shape[2], x.shape[3]
    (oh, ow), (sh, sw) = size, scales
    rows = _axis_tables(attrs, in_h, oh, sh, "h")
    cols = _axis_tables(attrs, in_w, ow, sw, "w")
    nearest = attrs.method == "nearest_neighbor"

    def f(n: PrimExpr, c: PrimExpr, y: PrimExpr, w: PrimExpr, *lane: PrimExpr) -> PrimExpr:
        acc: PrimExpr | None = None
        for iy, wy in rows:
            for ix, wx in cols:
                pixel = x(n, c, iy(y), ix(w), *lane)
                term = pixel if nearest else tir.cast(pixel, "float32") * (wy(y) * wx(w))
                acc = term if acc is None else acc + term
        return tir.cast(acc, dtype)

    shape = (x.shape[0], x.shape[1], oh, ow, *x.shape[4:])
    return te.compute(shape, f, name="T_resize2d", tag="injective")


defop("image.resize2d", _resize_rel, _resize_ref, INJECTIVE, attrs=Resize2DAttrs,
      doc="Resize the H and W axes of NCHW or NCHW[L]c data (nearest, linear or cubic).",
      level=5,
      compute=_resize_compute)


def resize2d(data: Any, roi: Any = None, size: Any = None, layout: str = "NCHW",
             method: str = "linear", coordinate_transformation_mode: str = "half_pixel",
             rounding_method: str = "", cubic_alpha: float = -0.5, cubic_exclude: int = 0,
             extrapolation_value: float = 0.0, out_dtype: str = "",
             scales: Any = None) -> Call:
    """``data`` (NCHW) resized to ``size`` = (height, width); Relay's signature. ``roi`` and
    ``extrapolation_value`` (tf_crop_and_resize) are not supported; an empty
    ``rounding_method`` means "round" (ties away from zero)."""
    if run_time(size, scales):  # a size or scales known at run time: dyn.image.resize2d
        return _dyn_resize(data, size, scales, method, coordinate_transformation_mode,
                           rounding_method or "round", cubic_alpha, bool(cubic_exclude),
                           out_dtype, layout)
    size, scales = numbers(size), numbers(scales)
    if roi is not None and any(float(v) for v in np.asarray(roi).reshape(-1)):
        raise NotImplementedError("image.resize2d: roi (tf_crop_and_resize) is not supported")
    if size is None:
        raise TypeError("image.resize2d: size (height, width) is required")
    attrs = Resize2DAttrs(tuple(int(s) for s in size), scales, layout, method,
                          coordinate_transformation_mode, rounding_method or "round",
                          cubic_alpha, bool(cubic_exclude), out_dtype)
    return call("image.resize2d", data, attrs=attrs)


def _dyn_resize(data: Any, size: Any, scales: Any, *attrs: Any) -> Call:
    """dyn.image.resize2d; without scales, size / input size (float32, as resize2d)."""
    from ...ir.expr import RelayExpr, const
    from .tensor import cast, divide
    from .transform import shape_of, strided_slice

    if not isinstance(size, RelayExpr):
        size = const(np.asarray(size, "int64"))
    if scales is None:
        in_hw = strided_slice(shape_of(data, "int64"), [2], [4])
        scales = divide(cast(size, "float32"), cast(in_hw, "float32"))
    elif not isinstance(scales, RelayExpr):
        scales = const(np.asarray(scales, "float32"))
    return dyn_op("image.resize2d")(data, size, scales, *attrs)
