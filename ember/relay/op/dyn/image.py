"""``dyn.image.resize2d``: resize2d whose output size and scales are tensors (known only at
run time): ``size`` (height, width) integers and ``scales`` (height, width) float32 factors
that drive the coordinate transform, as in image.resize2d with ``scales`` given (the
builder passes size / input size when there are none)."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from .._attrs_base import OpAttrs, attrs_class
from .._layout import nchwc_lanes
from .._reg import INJECTIVE, call, defop
from .._shape import fail, fmt_shape, fmt_type, is_float, tensor_of
from .._value_dims import check_value, read, value_dim
from ..image import Resize2DAttrs, _resize_ref, check_modes, resize_tensor
from ._common import ints, label, require, vector_length

__all__ = ["resize2d"]


@attrs_class("DynResize2DAttrs")
class DynResize2DAttrs(OpAttrs):
    """dyn.image.resize2d: image.resize2d's attrs but size and scales (arguments), and
    ``where`` the op came from."""

    layout: str = "NCHW"
    method: str = "linear"
    coordinate_transformation_mode: str = "half_pixel"
    rounding_method: str = "round_prefer_floor"
    cubic_alpha: float = -0.75
    cubic_exclude: bool = False
    out_dtype: str = ""
    where: str = ""
    _op: ClassVar[str] = "dyn.image.resize2d"

    def __post_init__(self) -> None:
        check_modes(self, blocked=True)  # NCHW[L]c: AlterOpLayout keeps an FPN blocked
        self._set("where", str(self.where))


def static_attrs(attrs: DynResize2DAttrs, size: tuple[int, int],
                 scales: tuple[float, float]) -> Resize2DAttrs:
    """The attrs of the static image.resize2d for these values."""
    return Resize2DAttrs(size, scales, attrs.layout, attrs.method,
                         attrs.coordinate_transformation_mode, attrs.rounding_method,
                         attrs.cubic_alpha, attrs.cubic_exclude, attrs.out_dtype)


def _rel(args: list[TensorType], attrs: DynResize2DAttrs) -> TensorType:
    op, (data, size, scales) = "dyn.image.resize2d", args
    lanes = nchwc_lanes(attrs.layout)
    rank = 5 if lanes else 4
    if data.ndim != rank or (lanes and data.shape[4] != lanes):
        raise fail(op, f"data must be {attrs.layout} (rank {rank}), got {fmt_shape(data.shape)}")
    if not is_float(data.dtype):
        raise fail(op, f"data must be floating-point, got {data.dtype}")
    if vector_length(op, size, "size") != 2:
        raise fail(op, f"size must hold (height, width), got {fmt_type(size)}")
    if scales.shape != (2,) or scales.dtype != "float32":
        raise fail(op, f"scales must be float32[2] (height, width), got {fmt_type(scales)}")
    return tensor_of((*data.shape[:2], AnyDim(), AnyDim(), *data.shape[4:]),
                     attrs.out_dtype or data.dtype)


def _ref(data: np.ndarray, size: np.ndarray, scales: np.ndarray,
         attrs: DynResize2DAttrs) -> np.ndarray:
    where, (h, w), (sh, sw) = label("dyn.image.resize2d", attrs), ints(size), scales.tolist()
    require(h > 0 and w > 0, where, f"size ({h}, {w}) must be positive")
    require(sh > 0 and sw > 0, where, f"scales ({sh}, {sw}) must be positive")
    return _resize_ref(data, static_attrs(attrs, (h, w), (sh, sw)))


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, size, scales = inputs
    what = label("dyn.image.resize2d", attrs)
    sh, sw = (tir.cast(scales(tir.const(k)), "float32") for k in range(2))
    check_value(tir.all(sh > tir.const(0.0, "float32"), sw > tir.const(0.0, "float32")),
                f"{what}: scales must be positive")
    dims = []
    for k, name in enumerate(("height", "width")):
        check_value(read(size, k) > 0, f"{what}: the output {name} must be positive")
        dims.append(value_dim(f"resize_{name}", read(size, k), what))
    return [resize_tensor(x, attrs, (dims[0], dims[1]), (sh, sw),
                          out_type.dtype)]  # type: ignore[attr-defined]


defop("dyn.image.resize2d", _rel, _ref, INJECTIVE, args=("data", "size", "scales"),
      attrs=DynResize2DAttrs, doc="resize2d to a size and with scales given as tensors.",
      level=10, compute=_compute, shape_data=("size", "scales"))


def resize2d(data: Any, size: Any, scales: Any, method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel",
             rounding_method: str = "round_prefer_floor", cubic_alpha: float = -0.75,
             cubic_exclude: bool = False, out_dtype: str = "", layout: str = "NCHW",
             where: str = "") -> Call:
    """``data`` (NCHW, or NCHW[L]c) resized to the (height, width) values of the integer tensor ``size``,
    the coordinate transform driven by the float32 (height, width) tensor ``scales``."""
    attrs = DynResize2DAttrs(layout, method, coordinate_transformation_mode, rounding_method,
                             cubic_alpha, cubic_exclude, out_dtype, where)
    return call("dyn.image.resize2d", data, size, scales, attrs=attrs)
