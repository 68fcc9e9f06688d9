"""int8 convolution through the C kernel of ``ember/include/ember/kernels/qconv.h``.

:func:`fold` turns a QLinearConv's constants (weight, zero points, scales, bias) into what the
kernel reads, once at build time: the weight minus its zero point when that fits int8 (the
common case: s8 weights with zero point 0, u8 weights with 128), else the weight as int8 with a
per-channel zero point the kernel applies through each window's input sum; the bias with every
term that depends only on the weights folded in (``- x_zp * sum(w)`` and ``+ K * x_zp *
w_zp``); one float32 multiplier per output channel, ``x_scale * w_scale / y_scale`` computed
as onnxruntime does. :func:`pack_weight` lays the weight out in the kernel's blocks.
:func:`reference` is the numpy oracle (int64 products) that FoldConstant and the tests use.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...te import tensor as te
from ...tir import op as tir
from .qadd import reference as qadd_reference
from .sizes import dims, succeeds

QCONV_HEADER = "ember/kernels/qconv.h"
MR = 4  # output channels per packed block (EMBER_QCONV_MR)
RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


@dataclass(frozen=True)
class Folded:
    """The kernel's constants of one conv: ``weight`` (O, Cg, KH, KW) int8, ``bias``,
    ``w_zp`` (int32, O) and ``scale`` (float32, O); ``x_zp`` in the u8 view of the input;
    ``has_w_zp`` whether w_zp is applied (some value nonzero)."""

    weight: np.ndarray
    bias: np.ndarray
    w_zp: np.ndarray
    scale: np.ndarray
    x_zp: int
    has_w_zp: bool


def _per_channel(v: np.ndarray, o: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(v).reshape(-1), (o,)) if np.asarray(v).size == 1 else \
        np.asarray(v).reshape(o)


def fold(w: np.ndarray, w_zp: np.ndarray, x_zp: int, x_signed: bool, x_scale: float,
         w_scale: np.ndarray, y_scale: float, bias: np.ndarray | None) -> Folded:
    """The kernel's constants for weight ``w`` (O, Cg, KH, KW), u8 or s8, zero point ``w_zp``
    (one or per output channel), input zero point ``x_zp`` (in the input's own type), scales
    (``w_scale`` one or per channel) and int32 ``bias`` (None: 0)."""
    o = w.shape[0]
    k = int(np.prod(w.shape[1:]))
    wzp = _per_channel(w_zp, o).astype(np.int64)
    shifted = w.astype(np.int64) - wzp.reshape(o, 1, 1, 1)
    if shifted.min(initial=0) >= -128 and shifted.max(initial=0) <= 127:
        weight, zp = shifted.astype(np.int8), np.zeros(o, np.int64)
    elif w.dtype == np.int8:
        weight, zp = w, wzp
    else:  # u8 weights that do not fit int8 once shifted: w - 128 with zero point w_zp - 128
        weight, zp = (w.astype(np.int64) - 128).astype(np.int8), wzp - 128
    xz = int(x_zp) + (128 if x_signed else 0)
    sums = weight.astype(np.int64).reshape(o, -1).sum(axis=1)
    b = np.zeros(o, np.int64) if bias is None else bias.astype(np.int64).reshape(o)
    folded = b - xz * sums + k * xz * zp
    if np.abs(folded).max(initial=0) >= 2**31:
        raise OverflowError("the folded int32 bias overflows")
    # onnxruntime: X_scale * W_scale[o] / Y_scale in float32, in that order
    ws = _per_channel(np.asarray(w_scale, np.float32), o)
    scale = (np.float32(x_scale) * ws) / np.float32(y_scale)
    return Folded(weight, folded.astype(np.int32), zp.astype(np.int32),
                  scale.astype(np.float32), xz, bool(np.any(zp)))


def pack_weight(weight: np.ndarray, groups: int) -> np.ndarray:
    """(O, Cg, KH, KW) int8 -> (groups, OCB, K4, MR, 4): each group's output channels in blocks
    of MR (zero rows past O / groups), k ordered (ky, kx, channel) with the channels padded to
    a multiple of 4 (zeros), in quads (K4 = KH * KW * ceil(Cg / 4))."""
    o, cg, kh, kw = weight.shape
    og, cg4 = o // groups, -(-cg // 4) * 4
    ocb, k4 = -(-og // MR), kh * kw * cg4 // 4
    out = np.zeros((groups, ocb * MR, kh, kw, cg4), np.int8)
    out[:, :og, :, :, :cg] = weight.reshape(groups, og, cg, kh, kw).transpose(0, 1, 3, 4, 2)
    out = out.reshape(groups, ocb, MR, k4, 4)
    return np.ascontiguousarray(out.transpose(0, 1, 3, 2, 4))


def unpack_weight(packed: np.ndarray, o: int, cg: int, kh: int, kw: int) -> np.ndarray:
    """The inverse of :func:`pack_weight`: (O, Cg, KH, KW) int8."""
    groups, ocb, k4 = packed.shape[:3]
    flat = packed.transpose(0, 1, 3, 2, 4).reshape(groups, ocb * MR, kh, kw, -1)
    w = flat[:, :o // groups, :, :, :cg].transpose(0, 1, 4, 2, 3)
    return np.ascontiguousarray(w.reshape(o, cg, kh, kw))


def requantize(acc: np.ndarray, scale: np.ndarray, zp: int, dtype: str) -> np.ndarray:
    """saturate(round_half_even(float32(acc) * scale) + zp), scale along axis 1."""
    lo, hi = RANGES[dtype]
    shape = [1] * acc.ndim
    shape[1] = -1
    v = acc.astype(np.float32) * scale.reshape(shape).astype(np.float32)
    v = np.clip(np.nan_to_num(v, nan=0.0), lo - zp, hi - zp)
    return (np.rint(v).astype(np.int64) + zp).astype(dtype)


def conv_int(x: np.ndarray, w: np.ndarray, strides: tuple[int, int],
             padding: tuple[int, int, int, int], dilation: tuple[int, int], groups: int,
             pad_value: int) -> np.ndarray:
    """Exact int64 conv (NCHW, OIHW) of ``x`` padded with ``pad_value``."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pl, pb, pr = padding
    xp = np.full((n, c, h + pt + pb, wd + pl + pr), pad_value, np.int64)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - (kh - 1) * dilation[0] - 1) // strides[0] + 1
    ow = (wd + pl + pr - (kw - 1) * dilation[1] - 1) // strides[1] + 1
    og = o // groups
    out = np.zeros((n, groups, og, oh, ow), np.int64)
    xg = xp.reshape(n, groups, cg, *xp.shape[2:])
    wg = w.astype(np.int64).reshape(groups, og, cg, kh, kw)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dilation[0], kx * dilation[1]
            win = xg[:, :, :, y0:y0 + (oh - 1) * strides[0] + 1:strides[0],
                     x0:x0 + (ow - 1) * strides[1] + 1:strides[1]]
            out += np.einsum("ngchw,goc->ngohw", win, wg[:, :, :, ky, kx])
    return out.reshape(n, o, oh, ow)


def reference(x: np.ndarray, packed: np.ndarray, bias: np.ndarray, w_zp: np.ndarray,
              scale: np.ndarray, *, o: int, kernel: tuple[int, int], strides: tuple[int, int],
              padding: tuple[int, int, int, int], dilation: tuple[int, int], groups: int,
              x_zp: int, has_w_zp: bool, y_zp: int, out_dtype: str,
              y_range: tuple[int, int] | None = None) -> np.ndarray:
    """What ``ember_qconv2d`` computes (see qconv.h), in numpy."""
    u = x.astype(np.int64) + (128 if x.dtype == np.int8 else 0)
    cg = x.shape[1] // groups
    w = unpack_weight(packed, o, cg, *kernel).astype(np.int64)
    acc = conv_int(u, w, strides, padding, dilation, groups, x_zp)
    acc += bias.astype(np.int64).reshape(1, -1, 1, 1)
    if has_w_zp:
        ones = np.ones((o, cg) + tuple(kernel), np.int64)
        sums = conv_int(u, ones, strides, padding, dilation, groups, x_zp)
        acc -= w_zp.astype(np.int64).reshape(1, -1, 1, 1) * sums
    out = requantize(acc.astype(np.int32), scale, y_zp, out_dtype)
    lo, hi = y_range or RANGES[out_dtype]
    return np.clip(out, lo, hi).astype(out_dtype)


def out_size(size: int, k: int, stride: int, dilation: int, before: int, after: int) -> int:
    return (size + before + after - (k - 1) * dilation - 1) // stride + 1


@dataclass(frozen=True)
class ResidualAdd:
    """A QLinearAdd of the conv's output (its zero point y_zp) and a residual folded into the
    conv (nn.contrib_qconv2d_add): the ratios (``topi.nn.qadd.ratios``), the residual's zero
    point, and the sum's zero point, type and range."""

    ra: float
    rb: float
    r_zp: int
    s_zp: int
    s_dtype: str
    s_range: tuple[int, int]


def reference_add(conv_out: np.ndarray, residual: np.ndarray, add: ResidualAdd,
                  y_zp: int) -> np.ndarray:
    """What ``ember_qconv2d`` with a residual makes of its conv's output ``conv_out``: the
    qadd kernel's values (``topi.nn.qadd.reference``)."""
    return qadd_reference(conv_out, residual, ra=add.ra, rb=add.rb, a_zp=y_zp, b_zp=add.r_zp,
                          y_zp=add.s_zp, y_range=add.s_range, out_dtype=add.s_dtype)


def qconv2d(x: te.Tensor, weight: te.Tensor, bias: te.Tensor, w_zp: te.Tensor,
            scale: te.Tensor, *, o: int, kernel: tuple[int, int], strides: tuple[int, int],
            padding: tuple[int, int, int, int], dilation: tuple[int, int], groups: int,
            x_zp: int, has_w_zp: bool, y_zp: int, out_dtype: str,
            y_range: tuple[int, int] | None = None, residual: te.Tensor | None = None,
            add: ResidualAdd | None = None) -> te.Tensor:
    """The ``ember_qconv2d`` stage: (N, O, OH, OW) ``out_dtype`` (u8 or s8), clamped to
    ``y_range`` (None: the type's range); with ``residual`` and ``add``, that output summed
    with ``residual`` as ``add`` says (``add.s_dtype``)."""
    y_range = y_range or RANGES[out_dtype]
    n, c, h, wd = dims(x.shape)
    kh, kw = kernel
    oh = out_size(h, kh, strides[0], dilation[0], padding[0], padding[2])
    ow = out_size(wd, kw, strides[1], dilation[1], padding[1], padding[3])
    macs = o * oh * ow * (c // groups) * kh * kw if isinstance(n, int) else 1 << 30
    parallel = int(macs >= 1 << 16)  # below ~20 us of work a launch costs more than it saves

    def body(ins, outs):
        i64 = lambda v: tir.const(int(v), "int64")  # noqa: E731
        call = tir.call_extern(
            "int32", "ember_qconv2d", ins[0].data, ins[1].data, ins[2].data, ins[3].data,
            ins[4].data, outs[0].data, n, c, h, wd, i64(o), i64(oh), i64(ow), i64(kh), i64(kw),
            i64(strides[0]), i64(strides[1]), i64(padding[0]), i64(padding[1]),
            i64(dilation[0]), i64(dilation[1]), i64(groups), int(x.dtype == "int8"), int(x_zp),
            int(has_w_zp), int(y_zp), int(y_range[0]), int(y_range[1]), parallel,
            *_add_args(ins, out_dtype, residual, add), header=QCONV_HEADER)
        return succeeds(call, "nn.contrib_qconv2d: ember_qconv2d failed (workspace or "
                              "parallel launch)")

    inputs = [x, weight, bias, w_zp, scale] + ([residual] if add is not None else [])
    return te.extern((x.shape[0], o, oh, ow), inputs, body, name="T_qconv2d",
                     dtype=out_dtype if add is None else add.s_dtype, tag="qconv_kernel")


def _add_args(ins: list, out_dtype: str, residual: te.Tensor | None,
              add: ResidualAdd | None) -> list:
    """ember_qconv2d's residual arguments: NULL and zeros without one."""
    if add is None or residual is None:
        return [tir.const(0, "int32"), tir.const(0.0, "float32"), tir.const(0.0, "float32"),
                0, 0, 0, 0, 0, 0]
    return [ins[5].data, tir.const(add.ra, "float32"), tir.const(add.rb, "float32"),
            int(out_dtype == "int8"), int(residual.dtype == "int8"), int(add.r_zp),
            int(add.s_zp), int(add.s_range[0]), int(add.s_range[1])]
