"""2-D pooling: max/avg (with dilation, padding, ceil_mode, count_include_pad), global and
adaptive forms. Any layout with unsplit H and W axes works (NCHW, NHWC, NCHW16c).

The computes are written here rather than through topi.nn.pool2d: topi's pools take NCHW/NHWC
only, and the average divisor is counted exactly per window (taps at y0 + k * dilation inside
the counted region), which topi's closed form gets wrong when a dilated window overhangs both
ends of a small input. Every pool is a reduction stage tagged ``comm_reduce``; averages divide
in a following elementwise stage (integer pools truncate, as C division does and the reference
mimics).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ....topi.nn.pool_nchw import global_pool_nchw, pool2d_nchw
from ....topi.nn.pool_nchwc import pool2d_nchwc
from .._compute_common import out_dims, require
from .._layout import Layout
from .._reg import OUT_ELEMWISE_FUSABLE, call, defop
from .._shape import fail, fmt_shape, tensor_of
from ._attrs import AdaptivePool2DAttrs, AvgPool2DAttrs, GlobalPool2DAttrs, MaxPool2DAttrs
from .conv import conv_out_size

__all__ = [
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "avg_pool2d",
    "global_avg_pool2d",
    "global_max_pool2d",
    "max_pool2d",
]


def _hw_axes(op: str, ty: TensorType | tuple[Any, ...], layout: str) -> tuple[int, int]:
    lay = Layout.parse(layout)
    shape = ty.shape if isinstance(ty, TensorType) else ty
    if len(shape) != len(lay.axes):
        raise fail(op, f"data must have rank {len(lay.axes)} (layout {layout}), got rank "
                       f"{len(shape)} (shape {fmt_shape(shape)})")
    return lay.index("H"), lay.index("W")


def _pool_rel(op: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        data = args[0]
        ha, wa = _hw_axes(op, data, attrs.layout)
        (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
        pt, pl, pb, pr = attrs.padding
        shape = list(data.shape)
        shape[ha] = conv_out_size(op, "height", shape[ha], kh, pt + pb, sh, dh, attrs.ceil_mode)
        shape[wa] = conv_out_size(op, "width", shape[wa], kw, pl + pr, sw, dw, attrs.ceil_mode)
        return tensor_of(shape, data.dtype)

    return rel


def _hw_last(x: np.ndarray, ha: int, wa: int) -> tuple[np.ndarray, list[int]]:
    """x with H and W moved to the end, and the permutation that undoes it."""
    order = [i for i in range(x.ndim) if i not in (ha, wa)] + [ha, wa]
    return x.transpose(order), list(np.argsort(order))


def _window_count(size: int, out: int, k: int, s: int, d: int, pad_lo: int, pad_hi: int,
                  include_pad: bool) -> np.ndarray:
    # Tap coordinates in the unpadded input; count those in the region the divisor covers.
    taps = (np.arange(out) * s - pad_lo)[:, None] + np.arange(k)[None, :] * d
    lo, hi = (-pad_lo, size + pad_hi) if include_pad else (0, size)
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


def pool2d_ref(x: np.ndarray, attrs: Any, kind: str) -> np.ndarray:
    """Max or average pooling of ``x`` according to pool attrs (any H/W layout)."""
    ha, wa = _hw_axes("pool2d", x.shape, attrs.layout)
    xt, undo = _hw_last(x, ha, wa)
    h, w = xt.shape[-2:]
    (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
    pt, pl, pb, pr = attrs.padding
    oh = conv_out_size("pool2d", "height", h, kh, pt + pb, sh, dh, attrs.ceil_mode)
    ow = conv_out_size("pool2d", "width", w, kw, pl + pr, sw, dw, attrs.ceil_mode)
    extra_h = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - (h + pt + pb))  # ceil_mode overhang
    extra_w = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - (w + pl + pr))
    if kind == "max":
        fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    else:
        fill = 0
    pads = [(0, 0)] * (xt.ndim - 2) + [(pt, pb + extra_h), (pl, pr + extra_w)]
    xp = np.pad(xt, pads, constant_values=fill)
    taps = [xp[..., a * dh: a * dh + (oh - 1) * sh + 1: sh, b * dw: b * dw + (ow - 1) * sw + 1: sw]
            for a in range(kh) for b in range(kw)]
    stacked = np.stack(taps, axis=-1)
    if kind == "max":
        out = stacked.max(axis=-1)
    else:
        inc = attrs.count_include_pad
        count = np.outer(_window_count(h, oh, kh, sh, dh, pt, pb, inc),
                         _window_count(w, ow, kw, sw, dw, pl, pr, inc))
        total = stacked.sum(axis=-1, dtype=x.dtype)
        out = _divide(total, np.maximum(count, 1).astype(x.dtype))
    return np.ascontiguousarray(out.transpose(undo))


def _divide(total: np.ndarray, count: np.ndarray) -> np.ndarray:
    if np.issubdtype(total.dtype, np.integer):  # integer pooling truncates, as C division does
        return (np.trunc(total / count)).astype(total.dtype)
    return total / count


def _with_hw(idx: tuple, ha: int, wa: int, y: PrimExpr, x: PrimExpr) -> list[PrimExpr]:
    src = list(idx)
    src[ha], src[wa] = y, x
    return src


def _out_size(d: PrimExpr, k: int, s: int, dil: int, pad: int, ceil_mode: bool) -> PrimExpr:
    room = d + pad - ((k - 1) * dil + 1)
    return (room + (s - 1 if ceil_mode else 0)) // s + 1


def _tap_count(start: PrimExpr, k: int, dil: int, lo: PrimExpr, hi: PrimExpr) -> PrimExpr:
    """How many of the taps start + j * dil (0 <= j < k) fall in [lo, hi)."""
    first = tir.max((lo - start + (dil - 1)) // dil, tir.const(0))
    last = tir.min((hi - 1 - start) // dil, tir.const(k - 1))
    return tir.max(last - first + 1, tir.const(0))


def _pool_compute(op: str, kind: str) -> Callable[..., list[te.Tensor]]:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        ha, wa = _hw_axes(op, x.shape, attrs.layout)
        (kh, kw), (sh, sw), (dh, dw) = attrs.pool_size, attrs.strides, attrs.dilation
        pt, pl, pb, pr = attrs.padding
        h, w = x.shape[ha], x.shape[wa]
        for size, k, pad, dil, axis in ((h, kh, pt + pb, dh, "height"), (w, kw, pl + pr, dw,
                                                                           "width")):
            require(size + pad >= (k - 1) * dil + 1,
                    f"the pooling window must fit in the padded {axis} of the data")
        dims = list(x.shape)
        dims[ha] = _out_size(h, kh, sh, dh, pt + pb, attrs.ceil_mode)
        dims[wa] = _out_size(w, kw, sw, dw, pl + pr, attrs.ceil_mode)
        shape = out_dims(out_type, dims)  # type: ignore[arg-type]
        # ember's C kernels: NCHW[L]c, or plain NCHW float32 (any channel count)
        kernel = pool2d_nchwc(x, kind, shape, attrs) or pool2d_nchw(x, kind, shape, attrs)
        if kernel is not None:
            return [kernel]
        ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
        red = te.max if kind == "max" else te.sum

        def f(*idx: PrimExpr) -> PrimExpr:
            iy, ix = idx[ha] * sh - pt + ry * dh, idx[wa] * sw - pl + rx * dw
            inside = tir.all(iy >= 0, iy < h, ix >= 0, ix < w)
            return red(x(*_with_hw(idx, ha, wa, iy, ix)), axis=[ry, rx], where=inside)

        total = te.compute(shape, f, name=f"T_pool_{kind}", tag="comm_reduce")
        if kind == "max":
            return [total]
        inc = attrs.count_include_pad

        def avg(*idx: PrimExpr) -> PrimExpr:
            y0, x0 = idx[ha] * sh - pt, idx[wa] * sw - pl
            cy = _tap_count(y0, kh, dh, tir.const(-pt if inc else 0), h + pb if inc else h)
            cx = _tap_count(x0, kw, dw, tir.const(-pl if inc else 0), w + pr if inc else w)
            return total(*idx) / tir.cast(tir.max(cy * cx, tir.const(1)), x.dtype)

        return [te.compute(shape, avg, name="T_pool_avg", tag="elemwise")]

    return rule


defop("nn.max_pool2d", _pool_rel("nn.max_pool2d"), lambda x, attrs: pool2d_ref(x, attrs, "max"),
      OUT_ELEMWISE_FUSABLE, attrs=MaxPool2DAttrs, doc="2-D max pooling.", level=2,
      compute=_pool_compute("nn.max_pool2d", "max"))
defop("nn.avg_pool2d", _pool_rel("nn.avg_pool2d"), lambda x, attrs: pool2d_ref(x, attrs, "avg"),
      OUT_ELEMWISE_FUSABLE, attrs=AvgPool2DAttrs, doc="2-D average pooling.", level=2,
      compute=_pool_compute("nn.avg_pool2d", "avg"))


def max_pool2d(data: Any, pool_size: Any = (1, 1), strides: Any = (1, 1),
               dilation: Any = (1, 1), padding: Any = (0, 0), layout: str = "NCHW",
               out_layout: str = "", ceil_mode: bool = False) -> Call:
    """2-D max pooling; padding is 1, 2 (h, w) or 4 (top, left, bottom, right) values."""
    attrs = MaxPool2DAttrs(pool_size, strides, dilation, padding, layout, out_layout, ceil_mode)
    return call("nn.max_pool2d", data, attrs=attrs)


def avg_pool2d(data: Any, pool_size: Any = (1, 1), strides: Any = (1, 1),
               dilation: Any = (1, 1), padding: Any = (0, 0), layout: str = "NCHW",
               out_layout: str = "", ceil_mode: bool = False,
               count_include_pad: bool = False) -> Call:
    """2-D average pooling. count_include_pad: the divisor counts explicit padding cells
    (never the extra cells ceil_mode adds); otherwise only cells inside the input."""
    attrs = AvgPool2DAttrs(pool_size, strides, dilation, padding, layout, out_layout, ceil_mode,
                           count_include_pad)
    return call("nn.avg_pool2d", data, attrs=attrs)


# ---------------------------------------------------------------- global and adaptive
def _global_rel(op: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: GlobalPool2DAttrs) -> TensorType:
        ha, wa = _hw_axes(op, args[0], attrs.layout)
        shape = [1 if i in (ha, wa) else d for i, d in enumerate(args[0].shape)]
        return tensor_of(shape, args[0].dtype)

    return rel


def _global_ref(kind: str) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: GlobalPool2DAttrs) -> np.ndarray:
        axes = _hw_axes("global_pool2d", x.shape, attrs.layout)
        if kind == "max":
            return x.max(axis=axes, keepdims=True)
        total = x.sum(axis=axes, keepdims=True, dtype=x.dtype)
        return _divide(total, np.asarray(x.shape[axes[0]] * x.shape[axes[1]], dtype=x.dtype))

    return ref


@dataclass(frozen=True)
class _WholeImage:
    """The attrs of a pool whose window is the whole (possibly run-time) image."""

    layout: str
    pool_size: tuple[Any, Any]
    strides: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    count_include_pad: bool = False


def _global_compute(op: str, kind: str) -> Callable[..., list[te.Tensor]]:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        ha, wa = _hw_axes(op, x.shape, attrs.layout)
        h, w = x.shape[ha], x.shape[wa]
        shape = tuple(tir.const(1) if k in (ha, wa) else d for k, d in enumerate(x.shape))
        # NCHW[L]c: the C pool kernel with the whole image as its window (a run-time one for a
        # ? image; AlterOpLayout turns the pool of a static image into that pool itself), one
        # vector per tap instead of the generic reduction's strides over the lanes; plain NCHW
        # float32: each plane as a streaming reduction
        kernel = pool2d_nchwc(x, kind, shape, _WholeImage(attrs.layout, (h, w))) or \
            global_pool_nchw(x, kind, shape, attrs.layout)
        if kernel is not None:
            return [kernel]
        ry, rx = te.reduce_axis((0, h), "ry"), te.reduce_axis((0, w), "rx")
        red = te.max if kind == "max" else te.sum
        total = te.compute(shape, lambda *i: red(x(*_with_hw(i, ha, wa, ry.var, rx.var)),
                                                    axis=[ry, rx]),
                           name=f"T_global_{kind}_pool", tag="comm_reduce")
        if kind == "max":
            return [total]
        return [te.compute(shape, lambda *i: total(*i) / tir.cast(h * w, x.dtype),
                           name="T_global_avg_pool", tag="elemwise")]

    return rule


for _kind in ("max", "avg"):
    _op = f"nn.global_{_kind}_pool2d"
    defop(_op, _global_rel(_op), _global_ref(_kind), OUT_ELEMWISE_FUSABLE,
          attrs=GlobalPool2DAttrs, doc=f"Global 2-D {_kind} pooling: H and W reduce to 1.",
          level=2, compute=_global_compute(_op, _kind))


def global_max_pool2d(data: Any, layout: str = "NCHW", out_layout: str = "") -> Call:
    """Maximum over the whole H x W plane (H and W become 1)."""
    return call("nn.global_max_pool2d", data, attrs=GlobalPool2DAttrs(layout, out_layout))


def global_avg_pool2d(data: Any, layout: str = "NCHW", out_layout: str = "") -> Call:
    """Mean over the whole H x W plane (H and W become 1)."""
    return call("nn.global_avg_pool2d", data, attrs=GlobalPool2DAttrs(layout, out_layout))


def _adaptive_rel(op: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: AdaptivePool2DAttrs) -> TensorType:
        ha, wa = _hw_axes(op, args[0], attrs.layout)
        shape = list(args[0].shape)
        if attrs.output_size is not None:
            shape[ha], shape[wa] = attrs.output_size
        return tensor_of(shape, args[0].dtype)

    return rel


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """Adaptive pooling bin i covers [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_ref(kind: str) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: AdaptivePool2DAttrs) -> np.ndarray:
        ha, wa = _hw_axes("adaptive_pool2d", x.shape, attrs.layout)
        xt, undo = _hw_last(x, ha, wa)
        h, w = xt.shape[-2:]
        oh, ow = attrs.output_size or (h, w)
        rows = []
        for h0, h1 in _bins(h, oh):
            cells = [xt[..., h0:h1, w0:w1] for w0, w1 in _bins(w, ow)]
            if kind == "max":
                rows.append([c.max(axis=(-2, -1)) for c in cells])
            else:
                rows.append([_divide(c.sum(axis=(-2, -1), dtype=x.dtype),
                                     np.asarray(c.shape[-1] * c.shape[-2], x.dtype))
                             for c in cells])
        out = np.moveaxis(np.array(rows, dtype=x.dtype), (0, 1), (-2, -1))
        return np.ascontiguousarray(out.transpose(undo))

    return ref


def _max_bin(size: PrimExpr, out: PrimExpr) -> PrimExpr:
    """The widest bin: a static bound when sizes are static, else the whole axis (guarded)."""
    s, o = getattr(size, "value", None), getattr(out, "value", None)
    if s is None or o is None:
        return size
    return tir.const(max(-(-(i + 1) * s // o) - (i * s // o) for i in range(o)))


def _uniform_bins_nchw(x: te.Tensor, kind: str, shape: tuple, layout: str) -> te.Tensor | None:
    """An adaptive pool of plain NCHW whose bins tile the image evenly (static sizes, H and W
    multiples of the output's) through the NCHW C kernels: a global pool for one bin, else a
    pool whose window and stride are the bin; None otherwise."""
    if layout != "NCHW" or len(x.shape) != 4:
        return None
    h, w, oh, ow = (getattr(d, "value", None) for d in (*x.shape[2:], *shape[2:]))
    if None in (h, w, oh, ow) or h % oh or w % ow:
        return None
    if oh == ow == 1:
        return global_pool_nchw(x, kind, shape, layout)
    bins = (h // oh, w // ow)
    return pool2d_nchw(x, kind, shape, _WholeImage(layout, bins, strides=bins))


def _adaptive_compute(op: str, kind: str) -> Callable[..., list[te.Tensor]]:
    """Output cell i covers [floor(i * H / OH), ceil((i + 1) * H / OH)) on each axis."""

    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        ha, wa = _hw_axes(op, x.shape, attrs.layout)
        shape = out_dims(out_type, list(x.shape))  # type: ignore[arg-type]
        h, w, oh, ow = x.shape[ha], x.shape[wa], shape[ha], shape[wa]
        kernel = _uniform_bins_nchw(x, kind, shape, attrs.layout)
        if kernel is not None:
            return [kernel]
        kh, kw = _max_bin(h, oh), _max_bin(w, ow)
        ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")

        def bins(i: PrimExpr, size: PrimExpr, out: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
            return (i * size) // out, ((i + 1) * size + out - 1) // out

        def f(*idx: PrimExpr) -> PrimExpr:
            (y0, y1), (x0, x1) = bins(idx[ha], h, oh), bins(idx[wa], w, ow)
            inside = tir.all(y0 + ry < y1, x0 + rx < x1)
            red = te.max if kind == "max" else te.sum
            return red(x(*_with_hw(idx, ha, wa, y0 + ry, x0 + rx)), axis=[ry, rx], where=inside)

        total = te.compute(shape, f, name=f"T_adaptive_{kind}_pool", tag="comm_reduce")
        if kind == "max":
            return [total]

        def avg(*idx: PrimExpr) -> PrimExpr:
            (y0, y1), (x0, x1) = bins(idx[ha], h, oh), bins(idx[wa], w, ow)
            return total(*idx) / tir.cast((y1 - y0) * (x1 - x0), x.dtype)

        return [te.compute(shape, avg, name="T_adaptive_avg_pool", tag="elemwise")]

    return rule


for _kind in ("max", "avg"):
    _op = f"nn.adaptive_{_kind}_pool2d"
    defop(_op, _adaptive_rel(_op), _adaptive_ref(_kind), OUT_ELEMWISE_FUSABLE,
          attrs=AdaptivePool2DAttrs, doc=f"Adaptive 2-D {_kind} pooling to a fixed output size.",
          level=2, compute=_adaptive_compute(_op, _kind))


def adaptive_max_pool2d(data: Any, output_size: Any = None, layout: str = "NCHW",
                        out_layout: str = "") -> Call:
    """Max pooling into an ``output_size`` grid of (possibly overlapping) bins."""
    attrs = AdaptivePool2DAttrs(output_size, layout, out_layout)
    return call("nn.adaptive_max_pool2d", data, attrs=attrs)


def adaptive_avg_pool2d(data: Any, output_size: Any = None, layout: str = "NCHW",
                        out_layout: str = "") -> Call:
    """Average pooling into an ``output_size`` grid of (possibly overlapping) bins."""
    attrs = AdaptivePool2DAttrs(output_size, layout, out_layout)
    return call("nn.adaptive_avg_pool2d", data, attrs=attrs)

