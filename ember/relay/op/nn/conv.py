"""nn.conv2d and nn.conv2d_transpose: type relations, numpy references, computes and API.

Layouts are any permutation of NCHW (data) and OIHW (kernel), e.g. NHWC with HWIO. The weight's
I is the input channels of one group, so depthwise convolution is groups=C with I=1 and
O = C * multiplier. The references convert to NCHW/OIHW, accumulate in ``out_dtype`` (the
inputs are cast to it first, as the kernel does) and convert the result to ``out_layout``.

The conv2d compute goes to the C kernel of plain NCHW convs to few output channels
(``topi/nn/conv2d_nchw_small.py``) when it applies, else to topi's templates (packed
NCHW/NHWC, depthwise, grouped) when the shapes are static; any other layout permutation is
transposed to NCHW/OIHW around it (injective stages the template inlines), and the result
transposed to ``out_layout``. With a symbolic dimension a direct reduction (zero padding read
through a guard) serves every size.
conv2d_transpose (static, groups 1, any dilation) runs as its phase convs on the conv template
and an interleave (``topi/nn/conv2d_transpose.py``); otherwise a direct reduction.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .... import topi
from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import Dim, TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from ....topi.nn.conv2d_nchw_small import conv2d_nchw_small, nchw_small_applies
from ....topi.nn.conv2d_transpose import PhasePlan, conv2d_transpose_phased, phase_plan
from .._compute_common import all_static, as_int, require, require_equal
from .._reg import OUT_ELEMWISE_FUSABLE, call, defop
from .._shape import dim_mul, fail, fmt_dim, fmt_shape, known, may_equal, tensor_of
from ._attrs import Conv2DAttrs, Conv2DTransposeAttrs

__all__ = ["conv2d", "conv2d_transpose"]


def conv_out_size(op: str, what: str, size: Dim, kernel: Dim, pad: int, stride: int,
                  dilation: int, ceil_mode: bool = False) -> Dim:
    """Output length of a sliding window; ``?`` when size or kernel is not static."""
    if not known(size, kernel):
        return AnyDim()
    span = (kernel - 1) * dilation + 1  # type: ignore[operator]
    room = size + pad - span  # type: ignore[operator]
    if room < 0:
        raise fail(op, f"{what}: the window spans {span} (kernel {kernel}, dilation "
                       f"{dilation}) but the padded input is only {size + pad}")  # type: ignore
    return (room + (stride - 1 if ceil_mode else 0)) // stride + 1


def _dims(op: str, ty: TensorType, layout: str, letters: str, what: str) -> list[Dim]:
    if ty.ndim != 4:
        raise fail(op, f"{what} must have rank 4 (layout {layout}), got rank {ty.ndim} "
                       f"(shape {fmt_shape(ty.shape)})")
    return [ty.shape[layout.index(a)] for a in letters]


def _in_layout(shape: dict[str, Dim], layout: str) -> list[Dim]:
    return [shape[a] for a in layout]


def _check_weight_attrs(op: str, attrs: Any, out_c: Dim, kh: Dim, kw: Dim) -> None:
    if attrs.channels is not None and not may_equal(out_c, attrs.channels):
        raise fail(op, f"channels={attrs.channels} but the weight gives {fmt_dim(out_c)} "
                       "output channels")
    ks = attrs.kernel_size
    if ks is not None and not (may_equal(kh, ks[0]) and may_equal(kw, ks[1])):
        raise fail(op, f"kernel_size={ks} but the weight's kernel is "
                       f"({fmt_dim(kh)}, {fmt_dim(kw)})")


def _conv2d_rel(args: list[TensorType], attrs: Conv2DAttrs) -> TensorType:
    op, (data, weight) = "nn.conv2d", args
    n, c, h, w = _dims(op, data, attrs.data_layout, "NCHW", "data")
    o, i, kh, kw = _dims(op, weight, attrs.kernel_layout, "OIHW", "weight")
    g = attrs.groups
    expect = dim_mul(i, g)
    if not may_equal(c, expect):
        raise fail(op, f"data has {fmt_dim(c)} channels but weight expects {fmt_dim(expect)} "
                       f"(layout {attrs.data_layout}, kernel_layout {attrs.kernel_layout}, "
                       f"groups={g})")
    if known(o) and o % g:  # type: ignore[operator]
        raise fail(op, f"weight has {o} output channels, which groups={g} does not divide")
    _check_weight_attrs(op, attrs, o, kh, kw)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    oh = conv_out_size(op, "height", h, kh, pt + pb, sh, dh)
    ow = conv_out_size(op, "width", w, kw, pl + pr, sw, dw)
    shape = _in_layout({"N": n, "C": o, "H": oh, "W": ow}, attrs.out_layout or attrs.data_layout)
    return tensor_of(shape, attrs.out_dtype or data.dtype)


def _to(arr: np.ndarray, src: str, dst: str) -> np.ndarray:
    return arr.transpose([src.index(a) for a in dst])


def _windows(xp: np.ndarray, kh: int, kw: int, oh: int, ow: int, s: Sequence[int],
             d: Sequence[int]) -> np.ndarray:
    """The (..., oh, ow) slab of padded input that kernel tap (kh, kw) multiplies."""
    return xp[..., kh * d[0]: kh * d[0] + (oh - 1) * s[0] + 1: s[0],
              kw * d[1]: kw * d[1] + (ow - 1) * s[1] + 1: s[1]]


def conv2d_nchw(x: np.ndarray, w: np.ndarray, strides: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], groups: int) -> np.ndarray:
    """Grouped 2-D convolution, NCHW data and OIHW weight, in their (common) dtype."""
    n, _, h, wd = x.shape
    o, i, kh, kw = w.shape
    pt, pl, pb, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (kh - 1) * dilation[0] - 1) // strides[0] + 1
    ow = (wd + pl + pr - (kw - 1) * dilation[1] - 1) // strides[1] + 1
    xg = xp.reshape(n, groups, i, *xp.shape[2:])
    wg = w.reshape(groups, o // groups, i, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow), dtype=x.dtype)
    for a in range(kh):
        for b in range(kw):
            patch = _windows(xg, a, b, oh, ow, strides, dilation)
            out += np.einsum("ngihw,goi->ngohw", patch, wg[..., a, b])
    return out.reshape(n, o, oh, ow)


def _conv2d_ref(x: np.ndarray, w: np.ndarray, attrs: Conv2DAttrs) -> np.ndarray:
    dtype = attrs.out_dtype or x.dtype
    x = _to(x, attrs.data_layout, "NCHW").astype(dtype)
    w = _to(w, attrs.kernel_layout, "OIHW").astype(dtype)
    out = conv2d_nchw(x, w, attrs.strides, attrs.padding, attrs.dilation, attrs.groups)
    return np.ascontiguousarray(_to(out, "NCHW", attrs.out_layout or attrs.data_layout))


# ---------------------------------------------------------------- computes (te)
_TOPI_LAYOUTS = {("NCHW", "OIHW"), ("NHWC", "HWIO")}


def _permute(t: te.Tensor, src: str, dst: str) -> te.Tensor:
    """``t`` with its axes permuted from layout ``src`` to ``dst`` (letters of one set)."""
    if src == dst:
        return t
    return topi.transpose(t, [src.index(a) for a in dst])


def conv_size(d: PrimExpr, k: PrimExpr, pad: int, s: int, dil: int) -> PrimExpr:
    """The output length of a sliding window over ``d`` (te sizes, or ints)."""
    return (d + pad - (k - 1) * dil - 1) // s + 1


def _require_window(data: te.Tensor, weight: te.Tensor, attrs: Any) -> None:
    """The run-time check that the kernel window fits the padded (symbolic) height and width
    of NCHW ``data`` (OIHW ``weight``; a static size was checked by the type relation)."""
    (dh, dw), (pt, pl, pb, pr) = attrs.dilation, attrs.padding
    for size, k, pad, dil, axis in ((data.shape[2], weight.shape[2], pt + pb, dh, "height"),
                                    (data.shape[3], weight.shape[3], pl + pr, dw, "width")):
        if as_int(size) is None:
            require(size + pad >= (k - 1) * dil + 1,
                    f"the kernel window must fit in the padded {axis} of the data")


def _conv2d_generic(data: te.Tensor, weight: te.Tensor, attrs: Any, dtype: str) -> te.Tensor:
    """Grouped NCHW x OIHW convolution as one reduction (any, also symbolic, sizes) over the
    data padded first: a bounds test per tap would keep the C compiler from vectorising the
    taps (wav2vec2's positional conv at a run-time length: 2.6 ms tested, 0.14 ms padded)."""
    n, _, h, w = data.shape
    o, i, kh, kw = weight.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    og = o // attrs.groups
    require_equal(data.shape[1], i * attrs.groups,
                  "the data's channels must be the weight's input channels times groups")
    for size, k, pad, dil, axis in ((h, kh, pt + pb, dh, "height"), (w, kw, pl + pr, dw, "width")):
        require(size + pad >= (k - 1) * dil + 1,
                f"the kernel window must fit in the padded {axis} of the data")
    oh, ow = conv_size(h, kh, pt + pb, sh, dh), conv_size(w, kw, pl + pr, sw, dw)
    rc, ry, rx = (te.reduce_axis((0, i), "rc"), te.reduce_axis((0, kh), "ry"),
                  te.reduce_axis((0, kw), "rx"))
    p = topi.nn.pad(data, [0, 0, pt, pl], [0, 0, pb, pr], 0.0, name="T_pad", tag="conv_pad") \
        if any((pt, pl, pb, pr)) else data

    def f(b: PrimExpr, co: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        v = p[b, (co // og) * i + rc, y * sh + ry * dh, x * sw + rx * dw]
        return te.sum(tir.cast(v, dtype) * tir.cast(weight[co, rc, ry, rx], dtype),
                      axis=[rc, ry, rx])

    return te.compute((n, o, oh, ow), f, name="T_conv2d", tag="comm_reduce")


def _conv2d_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, weight = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    layout, kernel_layout = attrs.data_layout, attrs.kernel_layout
    out_layout = attrs.out_layout or layout
    # topi's channel-blocked templates take a run-time batch, and NCHW's a run-time height
    # and width too; the channels must be static
    run_time = "NHW" if layout == "NCHW" else "N"
    static = all_static(weight) and all(as_int(d) is not None for k, d in enumerate(data.shape)
                                        if layout[k] not in run_time)
    if (layout, kernel_layout) == ("NCHW", "OIHW") and nchw_small_applies(
            data, weight, attrs.strides, attrs.padding, attrs.dilation, attrs.groups, dtype):
        _require_window(data, weight, attrs)
        out = conv2d_nchw_small(data, weight, attrs.strides, attrs.padding, attrs.dilation)
    elif static and (layout, kernel_layout) in _TOPI_LAYOUTS:
        if layout == "NCHW":
            _require_window(data, weight, attrs)
        out = topi.nn.conv2d(data, weight, attrs.strides, attrs.padding, attrs.dilation,
                             layout, kernel_layout, attrs.groups, dtype)
    else:
        d = _permute(data, layout, "NCHW")
        k = _permute(weight, kernel_layout, "OIHW")
        layout = "NCHW"
        if static:
            _require_window(d, k, attrs)
            out = topi.nn.conv2d(d, k, attrs.strides, attrs.padding, attrs.dilation, "NCHW",
                                 "OIHW", attrs.groups, dtype)
        else:
            out = _conv2d_generic(d, k, attrs, dtype)
    return [_permute(out, layout, out_layout)]


def _weight_from_attrs(data: TensorType | None, attrs: Any, sizes: dict[str, Any]) -> Any:
    """The weight type that ``channels`` and ``kernel_size`` imply (None if they are unset)."""
    if data is None or attrs.channels is None or attrs.kernel_size is None:
        return None
    sizes = {**sizes, "H": attrs.kernel_size[0], "W": attrs.kernel_size[1]}
    return tensor_of([sizes[a] for a in attrs.kernel_layout], data.dtype)


def _conv2d_infer_args(args: list[Any], attrs: Conv2DAttrs) -> list[Any]:
    c = args[0].shape[attrs.data_layout.index("C")] if args[0] is not None else AnyDim()
    i = c // attrs.groups if known(c) else AnyDim()  # type: ignore[operator]
    return [None, _weight_from_attrs(args[0], attrs, {"O": attrs.channels, "I": i})]


defop("nn.conv2d", _conv2d_rel, _conv2d_ref, OUT_ELEMWISE_FUSABLE, args=("data", "weight"),
      attrs=Conv2DAttrs, doc="2-D convolution.", level=2, infer_args=_conv2d_infer_args,
      compute=_conv2d_compute)


def conv2d(data: Any, weight: Any, strides: Any = (1, 1), padding: Any = (0, 0),
           dilation: Any = (1, 1), groups: int = 1, channels: int | None = None,
           kernel_size: Any = None, data_layout: str = "NCHW", kernel_layout: str = "OIHW",
           out_layout: str = "", out_dtype: str = "") -> Call:
    """2-D convolution of ``data`` with ``weight``.

    padding: one value, (height, width) or (top, left, bottom, right). Raises TypeError-like
    errors at type inference when channels, kernel or ranks disagree.
    """
    attrs = Conv2DAttrs(strides, padding, dilation, groups, channels, kernel_size, data_layout,
                        kernel_layout, out_layout, out_dtype)
    return call("nn.conv2d", data, weight, attrs=attrs)


# ---------------------------------------------------------------- conv2d_transpose
def _transpose_out(size: Dim, k: Dim, s: int, d: int, pad: int, out_pad: int) -> Dim:
    if not known(size, k):
        return AnyDim()
    return (size - 1) * s - pad + (k - 1) * d + 1 + out_pad  # type: ignore[operator]


def _conv2d_transpose_rel(args: list[TensorType], attrs: Conv2DTransposeAttrs) -> TensorType:
    op, (data, weight) = "nn.conv2d_transpose", args
    n, c, h, w = _dims(op, data, attrs.data_layout, "NCHW", "data")
    # kernel_layout letters: I = input channels (all groups), O = output channels per group
    i, o, kh, kw = _dims(op, weight, attrs.kernel_layout, "IOHW", "weight")
    g = attrs.groups
    if not may_equal(c, i):
        raise fail(op, f"data has {fmt_dim(c)} channels but weight expects {fmt_dim(i)} "
                       f"(layout {attrs.data_layout}, kernel_layout {attrs.kernel_layout}, "
                       f"groups={g})")
    if known(c) and c % g:  # type: ignore[operator]
        raise fail(op, f"data has {c} channels, which groups={g} does not divide")
    out_c = o * g if known(o) else AnyDim()  # type: ignore[operator]
    _check_weight_attrs(op, attrs, out_c, kh, kw)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    oph, opw = attrs.output_padding
    oh = _transpose_out(h, kh, sh, dh, pt + pb, oph)
    ow = _transpose_out(w, kw, sw, dw, pl + pr, opw)
    for size, what in ((oh, "height"), (ow, "width")):
        if known(size) and size <= 0:  # type: ignore[operator]
            raise fail(op, f"output {what} would be {size}: padding is too large")
    shape = _in_layout({"N": n, "C": out_c, "H": oh, "W": ow},
                       attrs.out_layout or attrs.data_layout)
    return tensor_of(shape, attrs.out_dtype or data.dtype)


def conv2d_transpose_nchw(x: np.ndarray, w: np.ndarray, strides: Sequence[int],
                          padding: Sequence[int], output_padding: Sequence[int],
                          dilation: Sequence[int], groups: int) -> np.ndarray:
    """Transposed convolution: every input pixel scatters ``w`` into the output (IOHW weight)."""
    n, c, h, wd = x.shape
    _, o, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilation, padding
    oh = (h - 1) * sh - pt - pb + (kh - 1) * dh + 1 + output_padding[0]
    ow = (wd - 1) * sw - pl - pr + (kw - 1) * dw + 1 + output_padding[1]
    full_h = max((h - 1) * sh + (kh - 1) * dh + 1, pt + oh)
    full_w = max((wd - 1) * sw + (kw - 1) * dw + 1, pl + ow)
    buf = np.zeros((n, groups, o, full_h, full_w), dtype=x.dtype)
    xg = x.reshape(n, groups, c // groups, h, wd)
    wg = w.reshape(groups, c // groups, o, kh, kw)
    for a in range(kh):
        for b in range(kw):
            tap = np.einsum("ngchw,gco->ngohw", xg, wg[..., a, b])
            rows = slice(a * dh, a * dh + (h - 1) * sh + 1, sh)
            cols = slice(b * dw, b * dw + (wd - 1) * sw + 1, sw)
            buf[..., rows, cols] += tap
    return buf[..., pt: pt + oh, pl: pl + ow].reshape(n, groups * o, oh, ow)


def _conv2d_transpose_ref(x: np.ndarray, w: np.ndarray,
                          attrs: Conv2DTransposeAttrs) -> np.ndarray:
    dtype = attrs.out_dtype or x.dtype
    x = _to(x, attrs.data_layout, "NCHW").astype(dtype)
    w = _to(w, attrs.kernel_layout, "IOHW").astype(dtype)
    out = conv2d_transpose_nchw(x, w, attrs.strides, attrs.padding, attrs.output_padding,
                                attrs.dilation, attrs.groups)
    return np.ascontiguousarray(_to(out, "NCHW", attrs.out_layout or attrs.data_layout))


def _conv2d_transpose_generic(data: te.Tensor, weight: te.Tensor, attrs: Any, dtype: str,
                              out_shape: tuple) -> te.Tensor:
    """Grouped transposed convolution, NCHW data and IOHW weight: output (y, x) gathers the
    input pixels whose scattered kernel tap lands on it."""
    _, c, h, w = data.shape
    _, og, kh, kw = weight.shape
    (sh, sw), (dh, dw), (pt, pl, _, _) = attrs.strides, attrs.dilation, attrs.padding
    cg = c // attrs.groups
    rc, ry, rx = (te.reduce_axis((0, cg), "rc"), te.reduce_axis((0, kh), "ry"),
                  te.reduce_axis((0, kw), "rx"))
    if (kh, kw, dh, dw, pt, pl, attrs.groups) == (sh, sw, 1, 1, 0, 0, 1) and \
            tuple(attrs.padding[2:]) == (0, 0) == tuple(attrs.output_padding):
        return _conv2d_transpose_taps(data, weight, dtype, out_shape, rc)

    def f(b: PrimExpr, co: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        ty, tx = y + pt - ry * dh, x + pl - rx * dw
        iy, ix = ty // sh, tx // sw
        ok = tir.all(ty >= 0, tx >= 0, ty % sh == 0, tx % sw == 0, iy < h, ix < w)
        ci = (co // og) * cg + rc
        v = tir.cast(data[b, ci, iy, ix], dtype) * tir.cast(weight[ci, co % og, ry, rx], dtype)
        return te.sum(v, axis=[rc, ry, rx], where=ok)

    return te.compute(out_shape, f, name="T_conv2d_transpose", tag="comm_reduce")


def _conv2d_transpose_taps(data: te.Tensor, weight: te.Tensor, dtype: str, out_shape: tuple,
                           rc: Any) -> te.Tensor:
    """An ungrouped transposed conv whose kernel is its stride (a 2x2/2 upsampling), at any
    H and W: each output pixel takes exactly one tap, a dot product over the channels, read
    contiguously from channels-last copies of the data and the weight."""
    n, c, h, w = data.shape
    _, oc, kh, kw = weight.shape
    rows = te.compute((n, h, w, c), lambda b, i, j, k: data[b, k, i, j], name="T_nhwc")
    taps = te.compute((oc, kh, kw, c), lambda o, a, e, k: weight[k, o, a, e], name="T_ohwi")

    def f(b: PrimExpr, co: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        v = tir.cast(rows[b, y // kh, x // kw, rc], dtype) * \
            tir.cast(taps[co, y % kh, x % kw, rc], dtype)
        return te.sum(v, axis=[rc])

    return te.compute(out_shape, f, name="T_conv2d_transpose", tag="comm_reduce")


def _phase_plan(d: te.Tensor, k: te.Tensor, attrs: Any) -> PhasePlan | None:
    """The phase decomposition of a static, ungrouped transposed conv (of its dilated kernel),
    or None."""
    if attrs.groups != 1 or not all_static(d, k):
        return None
    h, w = (as_int(x) for x in d.shape[2:])
    (kh, kw), (dh, dw) = (as_int(x) for x in k.shape[2:]), attrs.dilation
    return phase_plan(h, w, ((kh - 1) * dh + 1, (kw - 1) * dw + 1),  # type: ignore[arg-type]
                      attrs.strides, attrs.padding, attrs.output_padding)


def _conv2d_transpose_compute(attrs: Any, inputs: list[te.Tensor],
                              out_type: Type) -> list[te.Tensor]:
    data, weight = inputs
    dtype = out_type.dtype  # type: ignore[attr-defined]
    d = _permute(data, attrs.data_layout, "NCHW")
    k = _permute(weight, attrs.kernel_layout, "IOHW")  # I: in channels, O: out per group
    n, _, h, w = d.shape
    _, og, kh, kw = k.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = attrs.strides, attrs.dilation, attrs.padding
    oph, opw = attrs.output_padding
    dims = [n, og * attrs.groups, (h - 1) * sh - pt - pb + (kh - 1) * dh + 1 + oph,
            (w - 1) * sw - pl - pr + (kw - 1) * dw + 1 + opw]
    out_layout = attrs.out_layout or attrs.data_layout
    nchw_type = [out_type.shape[out_layout.index(a)] for a in "NCHW"]  # type: ignore
    shape = tuple(tir.const(t) if isinstance(t, int) else e for t, e in zip(nchw_type, dims))
    plan = _phase_plan(d, k, attrs)
    if plan is not None:
        out = conv2d_transpose_phased(d, k, plan, dtype, tuple(attrs.dilation))
    elif attrs.groups == 1 and all_static(d, k):
        out = topi.nn.conv2d_transpose_nchw(d, k, attrs.strides, attrs.padding, dtype,
                                            attrs.output_padding, attrs.dilation)
    else:
        out = _conv2d_transpose_generic(d, k, attrs, dtype, shape)
    return [_permute(out, "NCHW", out_layout)]


def _conv2d_transpose_infer_args(args: list[Any], attrs: Conv2DTransposeAttrs) -> list[Any]:
    c = args[0].shape[attrs.data_layout.index("C")] if args[0] is not None else AnyDim()
    o = attrs.channels // attrs.groups if attrs.channels is not None else None
    return [None, _weight_from_attrs(args[0], attrs, {"I": c, "O": o})]


defop("nn.conv2d_transpose", _conv2d_transpose_rel, _conv2d_transpose_ref,
      OUT_ELEMWISE_FUSABLE, args=("data", "weight"), attrs=Conv2DTransposeAttrs,
      doc="2-D transposed convolution.", level=2, infer_args=_conv2d_transpose_infer_args,
      compute=_conv2d_transpose_compute)


def conv2d_transpose(data: Any, weight: Any, strides: Any = (1, 1), padding: Any = (0, 0),
                     dilation: Any = (1, 1), groups: int = 1, channels: int | None = None,
                     kernel_size: Any = None, data_layout: str = "NCHW",
                     kernel_layout: str = "IOHW", out_layout: str = "",
                     output_padding: Any = (0, 0), out_dtype: str = "") -> Call:
    """2-D transposed convolution; the weight is (in_channels, out_channels/groups, kh, kw)."""
    attrs = Conv2DTransposeAttrs(channels, kernel_size, strides, padding, output_padding,
                                 dilation, groups, data_layout, kernel_layout, out_layout,
                                 out_dtype)
    return call("nn.conv2d_transpose", data, weight, attrs=attrs)
