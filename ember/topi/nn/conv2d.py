"""conv2d (NCHW/OIHW and NHWC/HWIO; strides, padding, dilation, groups incl. depthwise).

Dense convolutions (groups == 1) use a direct, channel-blocked template: the weight is packed
so that ``bc`` output channels are contiguous ([conv_pack]), the padded input is materialised
once ([conv_pad]), and each parallel iteration computes a ``bw`` (output columns) x ``bc``
(output channels) register tile over all (ci, kh, kw) before writing it through the fused
epilogue ([conv_nchw] / [conv_nhwc] anchors, [conv_unpack] back to the user layout).
Depthwise convolutions vectorise along the contiguous axis (ow for NCHW, c for NHWC) with a
row accumulator ([depthwise_nchw] / [depthwise_nhwc]). Other grouped convolutions use a plain
reduction ([conv2d_generic]) scheduled as a reduction.
"""
from __future__ import annotations

from typing import Any

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import IntImm, PrimExpr
from ..schedule import (
    inline_injective,
    max_tile_rows,
    maybe_parallel,
    register_anchor,
    tile_rows,
    work_of,
)
from .dense import fusable
from .pad import out_size, pad, pad_tuple, pair, static

BC = 16  # output channels per register tile (one AVX-512 vector, two AVX2 vectors)


def choose_bw(ow: int | PrimExpr, bc: int = BC) -> int:
    """Output columns per register tile (see ``schedule.tile_rows``); a run-time width takes
    the widest tile, its last one guarded (measured on a 4-channel 1x1 and 3x3 conv at
    96x128 and 97x131, AVX-512: 16 columns 10% faster than 8 and 2x faster than 4)."""
    return tile_rows(ow, bc) if isinstance(ow, int) else max_tile_rows(bc)


def _padded(data: te.Tensor, pads: tuple, layout: str) -> te.Tensor:
    pt, pl, pb, pr = pads
    if not any(pads):
        return data
    before = [0, 0, pt, pl] if layout == "NCHW" else [0, pt, pl, 0]
    after = [0, 0, pb, pr] if layout == "NCHW" else [0, pb, pr, 0]
    return pad(data, before, after, 0.0, name="T_pad", tag="conv_pad")


def conv2d(data: te.Tensor, kernel: te.Tensor, strides: Any = 1, padding: Any = 0,
           dilation: Any = 1, layout: str = "NCHW", kernel_layout: str = "", groups: int = 1,
           out_dtype: str | None = None) -> te.Tensor:
    """2-d convolution; ``layout`` NCHW (kernel OIHW) or NHWC (kernel HWIO, depthwise HWOI)."""
    if layout == "NCHW":
        return conv2d_nchw(data, kernel, strides, padding, dilation, groups, out_dtype)
    if layout == "NHWC":
        return conv2d_nhwc(data, kernel, strides, padding, dilation, groups, out_dtype,
                           kernel_layout or "HWIO")
    raise OpError(f"nn.conv2d: layout {layout} is not supported (use NCHW or NHWC)")


def _extent(d: PrimExpr) -> int | PrimExpr:
    """A static extent as an int, a symbolic one as it is."""
    return d.value if isinstance(d, IntImm) else d


def _out_extent(name: str, size: int | PrimExpr, k: int, stride: int, dilation: int,
                before: int, after: int) -> int | PrimExpr:
    if isinstance(size, int):
        return out_size(name, size, k, stride, dilation, before, after)
    # symbolic: the shape function checked at run time that the window fits
    return (size + before + after - (k - 1) * dilation - 1) // stride + 1


def _geometry(name: str, h: Any, w: Any, kh: int, kw: int, strides: Any, padding: Any,
              dilation: Any) -> tuple:
    sh, sw = pair(strides)
    dh, dw = pair(dilation)
    pads = pad_tuple(padding, (kh, kw))
    oh = _out_extent(name, h, kh, sh, dh, pads[0], pads[2])
    ow = _out_extent(name, w, kw, sw, dw, pads[1], pads[3])
    return sh, sw, dh, dw, pads, oh, ow


def conv2d_nchw(data: te.Tensor, kernel: te.Tensor, strides: Any = 1, padding: Any = 0,
                dilation: Any = 1, groups: int = 1, out_dtype: str | None = None) -> te.Tensor:
    """NCHW convolution with an OIHW kernel (``I`` = input channels per group).

    The batch, height and width may be symbolic (a model exported with a ``?`` image size):
    the same template then takes them at run time, its register tile chosen as for an
    extent that no tile divides (``choose_bw``), so a dynamic build runs the static one's
    kernel."""
    n = data.shape[0]
    (ci,) = static("nn.conv2d", data.shape[1:2])
    h, w = (_extent(d) for d in data.shape[2:])
    co, cig, kh, kw = static("nn.conv2d", kernel.shape)
    if ci != cig * groups or co % groups:
        raise OpError(f"nn.conv2d: data has {ci} channels but weight expects {cig * groups} "
                      f"(layout NCHW, kernel_layout OIHW, groups={groups})")
    sh, sw, dh, dw, pads, oh, ow = _geometry("nn.conv2d", h, w, kh, kw, strides, padding,
                                             dilation)
    out_dtype = out_dtype or data.dtype
    p = _padded(data, pads, "NCHW")
    if groups == 1:
        return _conv_nchw_packed(p, kernel, (n, co, oh, ow, ci, kh, kw), (sh, sw, dh, dw),
                                 out_dtype)
    if cig == 1 and groups == ci:
        mult = co // ci
        r = [te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")]
        return te.compute((n, co, oh, ow), lambda b, c, y, x: te.sum(
            tir.cast(p[b, c // mult, y * sh + r[0] * dh, x * sw + r[1] * dw], out_dtype) *
            tir.cast(kernel[c, 0, r[0], r[1]], out_dtype), axis=r), name="T_depthwise_conv2d",
            tag="depthwise_nchw")
    cog = co // groups
    r = [te.reduce_axis((0, cig), "rc"), te.reduce_axis((0, kh), "rh"),
         te.reduce_axis((0, kw), "rw")]
    return te.compute((n, co, oh, ow), lambda b, c, y, x: te.sum(
        tir.cast(p[b, (c // cog) * cig + r[0], y * sh + r[1] * dh, x * sw + r[2] * dw],
                 out_dtype) * tir.cast(kernel[c, r[0], r[1], r[2]], out_dtype), axis=r),
        name="T_group_conv2d", tag="conv2d_generic")


def _conv_nchw_packed(p: te.Tensor, kernel: te.Tensor, dims: tuple, sd: tuple,
                      out_dtype: str) -> te.Tensor:
    n, co, oh, ow, ci, kh, kw = dims
    sh, sw, dh, dw = sd
    bc = min(BC, co)
    coo = (co + bc - 1) // bc

    def pack(o: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr, i: PrimExpr) -> PrimExpr:
        v = kernel[o * bc + i, c, y, x]
        return v if co % bc == 0 else tir.if_then_else(o * bc + i < co, v, tir.const(0, v.dtype))

    wp = te.compute((coo, ci, kh, kw, bc), pack, name="T_conv_weight_pack", tag="conv_pack")
    rc, ry, rx = (te.reduce_axis((0, ci), "rc"), te.reduce_axis((0, kh), "ry"),
                  te.reduce_axis((0, kw), "rx"))
    cp = te.compute((n, coo, oh, ow, bc), lambda b, o, y, x, i: te.sum(
        tir.cast(p[b, rc, y * sh + ry * dh, x * sw + rx * dw], out_dtype) *
        tir.cast(wp[o, rc, ry, rx, i], out_dtype), axis=[rc, ry, rx]),
        name="T_conv2d_compute", tag="conv_nchw", attrs={"bc": bc, "bw": choose_bw(ow, bc)})
    return te.compute((n, co, oh, ow), lambda b, c, y, x: cp[b, c // bc, y, x, c % bc],
                      name="T_conv2d_nchw", tag="conv_unpack")


def conv2d_nhwc(data: te.Tensor, kernel: te.Tensor, strides: Any = 1, padding: Any = 0,
                dilation: Any = 1, groups: int = 1, out_dtype: str | None = None,
                kernel_layout: str = "HWIO") -> te.Tensor:
    """NHWC convolution with an HWIO kernel (depthwise: HWOI, [kh, kw, c, multiplier])."""
    n = data.shape[0]
    h, w, ci = static("nn.conv2d", data.shape[1:])
    kh, kw, k2, k3 = static("nn.conv2d", kernel.shape)
    out_dtype = out_dtype or data.dtype
    depthwise = groups > 1 and groups == ci and (kernel_layout == "HWOI" or k2 == ci and k3 != ci)
    if depthwise:
        co = ci * k3
    elif kernel_layout == "HWIO":
        if ci != k2 * groups or k3 % groups:
            raise OpError(f"nn.conv2d: data has {ci} channels but weight expects {k2 * groups} "
                          f"(layout NHWC, kernel_layout HWIO, groups={groups})")
        co = k3
    else:
        raise OpError(f"nn.conv2d: kernel layout {kernel_layout} is not supported with NHWC")
    sh, sw, dh, dw, pads, oh, ow = _geometry("nn.conv2d", h, w, kh, kw, strides, padding,
                                             dilation)
    p = _padded(data, pads, "NHWC")
    if depthwise:
        mult = k3
        r = [te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")]
        return te.compute((n, oh, ow, co), lambda b, y, x, c: te.sum(
            tir.cast(p[b, y * sh + r[0] * dh, x * sw + r[1] * dw, c // mult], out_dtype) *
            tir.cast(kernel[r[0], r[1], c // mult, c % mult], out_dtype), axis=r),
            name="T_depthwise_conv2d_nhwc", tag="depthwise_nhwc")
    if groups == 1:
        return _conv_nhwc_packed(p, kernel, (n, co, oh, ow, ci, kh, kw), (sh, sw, dh, dw),
                                 out_dtype)
    cig, cog = ci // groups, co // groups
    r = [te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw"),
         te.reduce_axis((0, cig), "rc")]
    return te.compute((n, oh, ow, co), lambda b, y, x, c: te.sum(
        tir.cast(p[b, y * sh + r[0] * dh, x * sw + r[1] * dw, (c // cog) * cig + r[2]],
                 out_dtype) * tir.cast(kernel[r[0], r[1], r[2], c], out_dtype), axis=r),
        name="T_group_conv2d_nhwc", tag="conv2d_generic")


def _conv_nhwc_packed(p: te.Tensor, kernel: te.Tensor, dims: tuple, sd: tuple,
                      out_dtype: str) -> te.Tensor:
    n, co, oh, ow, ci, kh, kw = dims
    sh, sw, dh, dw = sd
    bc = min(BC, co)
    coo = (co + bc - 1) // bc

    def pack(o: PrimExpr, y: PrimExpr, x: PrimExpr, c: PrimExpr, i: PrimExpr) -> PrimExpr:
        v = kernel[y, x, c, o * bc + i]
        return v if co % bc == 0 else tir.if_then_else(o * bc + i < co, v, tir.const(0, v.dtype))

    wp = te.compute((coo, kh, kw, ci, bc), pack, name="T_conv_weight_pack", tag="conv_pack")
    ry, rx, rc = (te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx"),
                  te.reduce_axis((0, ci), "rc"))
    cp = te.compute((n, oh, ow, coo, bc), lambda b, y, x, o, i: te.sum(
        tir.cast(p[b, y * sh + ry * dh, x * sw + rx * dw, rc], out_dtype) *
        tir.cast(wp[o, ry, rx, rc, i], out_dtype), axis=[ry, rx, rc]),
        name="T_conv2d_compute", tag="conv_nhwc", attrs={"bc": bc, "bw": choose_bw(ow, bc)})
    return te.compute((n, oh, ow, co), lambda b, y, x, c: cp[b, y, x, c // bc, c % bc],
                      name="T_conv2d_nhwc", tag="conv_unpack")


# -- schedules ---------------------------------------------------------------------------------
def _prep(s: Any, anchor: Any, out_op: Any) -> tuple[Any, Any]:
    unpack = next((st.op for st in s.stages if st.op.tag == "conv_unpack" and any(
        t.op is anchor for t in st.op.input_tensors)), anchor)
    target = out_op if fusable(s, unpack, out_op) else unpack
    keep = [target] + [st.op for st in s.stages if st.op.tag in ("conv_pack", "conv_pad")]
    inline_injective(s, keep=keep)
    if target is not unpack and unpack is not anchor and s[unpack].attach_type != "inline":
        s[unpack].compute_inline()
    for st in s.stages:
        if st.op.tag in ("conv_pack", "conv_pad"):
            axes = st.op.axis
            maybe_parallel(st, st.fuse(axes[0], axes[1]), work_of(st.op))
            st.vectorize(axes[-1])
    return target, unpack


@register_anchor("conv_nchw")
def schedule_conv_nchw(s: Any, cp: Any, out_op: Any) -> None:
    """Tile (n, co/bc, oh, ow/bw) in parallel; bw x bc accumulators over (ci, kh, kw)."""
    target, _ = _prep(s, cp, out_op)
    bc, bw = cp.attrs["bc"], cp.attrs["bw"]
    ts = s[target]
    b, c, y, x = ts.op.axis
    co_, ci_ = ts.split(c, bc)
    xo, xi = ts.split(x, bw)
    ts.reorder(b, co_, y, xo, ci_, xi)
    fused = ts.fuse(b, co_, y, xo)
    maybe_parallel(ts, fused, work_of(cp))
    ts.vectorize(xi)
    cs = s[cp]
    cs.compute_at(ts, fused)
    cb, co2, cy, cx, cc = cs.op.axis
    rc, ry, rx = cs.op.reduce_axis
    cs.reorder(cb, co2, cy, rc, ry, rx, cx, cc)
    cs.unroll(cx)
    cs.vectorize(cc)


@register_anchor("conv_nhwc")
def schedule_conv_nhwc(s: Any, cp: Any, out_op: Any) -> None:
    """Tile (n, oh, ow/bw, co/bc) in parallel; bw x bc accumulators over (kh, kw, ci)."""
    target, _ = _prep(s, cp, out_op)
    bc, bw = cp.attrs["bc"], cp.attrs["bw"]
    ts = s[target]
    b, y, x, c = ts.op.axis
    xo, xi = ts.split(x, bw)
    co_, ci_ = ts.split(c, bc)
    ts.reorder(b, y, xo, co_, xi, ci_)
    fused = ts.fuse(b, y, xo, co_)
    maybe_parallel(ts, fused, work_of(cp))
    ts.vectorize(ci_)
    cs = s[cp]
    cs.compute_at(ts, fused)
    cb, cy, cx, co2, cc = cs.op.axis
    ry, rx, rc = cs.op.reduce_axis
    cs.reorder(cb, cy, co2, ry, rx, rc, cx, cc)
    cs.unroll(cx)
    cs.vectorize(cc)


def _depthwise(s: Any, cp: Any, out_op: Any, outer: int) -> None:
    # outer: how many leading axes form the parallel loop; the last axis is vectorised.
    target, _ = _prep(s, cp, out_op)
    ts = s[target]
    axes = list(ts.op.axis)
    fused = ts.fuse(*axes[:outer])
    maybe_parallel(ts, fused, work_of(cp))
    ts.vectorize(axes[-1])
    middle = axes[outer:-1]
    cs = s[cp]
    rh, rw = cs.op.reduce_axis
    if target is cp:
        cs.reorder(fused, *middle, rh, rw, axes[-1])
        return
    cs.compute_at(ts, middle[-1] if middle else fused)
    c_axes = list(cs.op.axis)
    cs.reorder(*c_axes[:-1], rh, rw, c_axes[-1])
    cs.vectorize(c_axes[-1])


@register_anchor("depthwise_nchw")
def schedule_depthwise_nchw(s: Any, cp: Any, out_op: Any) -> None:
    """Parallel over (n, c, oh); per output row, taps outside and ow vectorised inside."""
    _depthwise(s, cp, out_op, 3)


@register_anchor("depthwise_nhwc")
def schedule_depthwise_nhwc(s: Any, cp: Any, out_op: Any) -> None:
    """Parallel over (n, oh); per output pixel, taps outside and channels vectorised inside."""
    _depthwise(s, cp, out_op, 2)
