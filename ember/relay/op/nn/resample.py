"""nn.upsampling: nearest-neighbour or bilinear resize of the H and W axes by scale factors.

Layouts: NCHW, NHWC, and the blocked NCHW[L]c of AlterOpLayout (the lanes, innermost, share
each pixel's coordinates)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, Type
from ....runtime.errors import OpAttributeUnImplemented
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from .._compute_common import not_implemented, out_dims
from .._layout import nchwc_lanes
from .._reg import INJECTIVE, call, defop
from .._shape import fail, fmt_shape, known, tensor_of
from ._attrs import UpSamplingAttrs

__all__ = ["upsampling"]


def _scaled(d: Any, scale: float) -> Any:
    return int(np.floor(d * scale + 0.5)) if known(d) else AnyDim()  # C round, half away


def _upsampling_rel(args: list[TensorType], attrs: UpSamplingAttrs) -> TensorType:
    data, lanes = args[0], nchwc_lanes(attrs.layout)
    rank = 5 if lanes else 4
    if data.ndim != rank or (lanes and data.shape[4] != lanes):
        raise fail("nn.upsampling", f"data must have rank {rank} (layout {attrs.layout}), got "
                                    f"shape {fmt_shape(data.shape)}")
    ha, wa = attrs.layout.index("H"), attrs.layout.index("W")
    shape = list(data.shape)
    shape[ha], shape[wa] = _scaled(shape[ha], attrs.scale_h), _scaled(shape[wa], attrs.scale_w)
    return tensor_of(shape, data.dtype)


def _source_coords(size: int, out: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return np.arange(out) * ((size - 1) / (out - 1) if out > 1 else 0.0)
    return np.arange(out) * (size / out)  # "asymmetric": x_in = x_out * in / out


def _resize_axis(x: np.ndarray, axis: int, out: int, attrs: UpSamplingAttrs) -> np.ndarray:
    size = x.shape[axis]
    src = _source_coords(size, out, attrs.align_corners)
    if attrs.method == "nearest_neighbor":
        idx = np.floor(src + 0.5) if attrs.align_corners else np.floor(src)
        return np.take(x, np.clip(idx.astype(np.int64), 0, size - 1), axis=axis)
    if attrs.method != "bilinear":
        raise OpAttributeUnImplemented(f"nn.upsampling: method {attrs.method!r} has no "
                                       "reference yet; use nearest_neighbor or bilinear")
    lo = np.floor(src).astype(np.int64)
    frac = (src - lo).astype(x.dtype)
    shape = [-1 if i == axis else 1 for i in range(x.ndim)]
    a = np.take(x, np.clip(lo, 0, size - 1), axis=axis)
    b = np.take(x, np.clip(lo + 1, 0, size - 1), axis=axis)
    return a + (b - a) * frac.reshape(shape)


def _upsampling_ref(x: np.ndarray, attrs: UpSamplingAttrs) -> np.ndarray:
    ha, wa = attrs.layout.index("H"), attrs.layout.index("W")
    out = _resize_axis(x, ha, _scaled(x.shape[ha], attrs.scale_h), attrs)
    return _resize_axis(out, wa, _scaled(x.shape[wa], attrs.scale_w), attrs).astype(x.dtype)


def _f64(v: Any) -> PrimExpr:
    return tir.cast(v, "float64")


def _upsampling_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """Nearest or bilinear resize with the reference's coordinates: x_in = x_out * in / out
    ("asymmetric"), or corner-aligned; bilinear interpolates H first, then W."""
    x = inputs[0]
    ha, wa = attrs.layout.index("H"), attrs.layout.index("W")
    if attrs.method not in ("nearest_neighbor", "bilinear"):
        raise not_implemented("nn.upsampling", f"method {attrs.method!r}")
    dims = list(x.shape)
    for ax, scale in ((ha, attrs.scale_h), (wa, attrs.scale_w)):
        dims[ax] = tir.cast(tir.floor(_f64(x.shape[ax]) * scale + 0.5), "int32")
    shape = out_dims(out_type, dims)  # type: ignore[arg-type]

    def coord(i: PrimExpr, ax: int) -> PrimExpr:
        size, out = x.shape[ax], shape[ax]
        if attrs.align_corners:
            ratio = tir.Select_(out > 1, _f64(size - 1) / _f64(out - 1), tir.const(0.0, "float64"))
            return _f64(i) * ratio
        return _f64(i) * (_f64(size) / _f64(out))

    def clamp(v: PrimExpr, ax: int) -> PrimExpr:
        return tir.min(tir.max(v, tir.const(0)), x.shape[ax] - 1)

    def at(idx: tuple, y: PrimExpr, w: PrimExpr) -> PrimExpr:
        src = list(idx)
        src[ha], src[wa] = y, w
        return x(*src)

    if attrs.method == "nearest_neighbor":
        def near(*idx: PrimExpr) -> PrimExpr:
            def pick(ax: int) -> PrimExpr:
                c = coord(idx[ax], ax)
                return clamp(tir.cast(tir.floor(c + 0.5 if attrs.align_corners else c), "int32"),
                             ax)
            return at(idx, pick(ha), pick(wa))
        return [te.compute(shape, near, name="T_upsampling", tag="injective")]

    def lerp(*idx: PrimExpr) -> PrimExpr:
        cy, cx = coord(idx[ha], ha), coord(idx[wa], wa)
        y0, x0 = tir.floor(cy), tir.floor(cx)
        fy, fx = tir.cast(cy - y0, x.dtype), tir.cast(cx - x0, x.dtype)
        ya, xa = clamp(tir.cast(y0, "int32"), ha), clamp(tir.cast(x0, "int32"), wa)
        yb, xb = clamp(tir.cast(y0, "int32") + 1, ha), clamp(tir.cast(x0, "int32") + 1, wa)

        def row(w: PrimExpr) -> PrimExpr:
            a = at(idx, ya, w)
            return a + (at(idx, yb, w) - a) * fy

        left = row(xa)
        return left + (row(xb) - left) * fx

    return [te.compute(shape, lerp, name="T_upsampling", tag="injective")]


defop("nn.upsampling", _upsampling_rel, _upsampling_ref, INJECTIVE, attrs=UpSamplingAttrs,
      doc="Upsample H and W by scale factors.", level=2, compute=_upsampling_compute)


def upsampling(data: Any, scale_h: float = 1, scale_w: float = 1, layout: str = "NCHW",
               method: str = "nearest_neighbor", align_corners: bool = False) -> Call:
    """Upsample H and W by ``scale_h``/``scale_w`` (nearest_neighbor or bilinear)."""
    attrs = UpSamplingAttrs(scale_h, scale_w, layout, method, align_corners)
    return call("nn.upsampling", data, attrs=attrs)
