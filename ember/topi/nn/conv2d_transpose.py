"""conv2d_transpose as ordinary convolutions: the phase (sub-pixel) decomposition.

A transposed convolution with stride ``s`` scatters every input pixel's kernel into the output
at ``s`` times its position. Output row ``y`` (before the padding crop) is ``q * s + r``: its
phase ``r`` fixes which kernel rows reach it (``r, r + s, r + 2s, ...``), so each of the
``s**2`` phases is a stride-1 convolution of the input with a flipped sub-kernel of
``T = ceil(K / s)`` taps per axis, and the output interleaves the phases:

    out[n, c, y, x] = conv[n, phase(y, x) * OC + c, (y + off_h) // sh, (x + off_w) // sw]
    phase(y, x) = ((y + off_h) % sh) * sw + (x + off_w) % sw

(``OC`` the output channels, phases outermost in the conv's channels). Only the phase rows the
cropped output needs are computed: the conv's padding is chosen so that its first row is the
first needed one. The work is ``T**2 / K**2`` of the direct scatter's per phase (no zero
taps when ``s`` divides ``K``). Weights are constants: :func:`phase_weights` runs at build time.

A dilated transposed conv (dilation ``d``) is the undilated one of its kernel with ``d - 1``
zero taps between neighbours (:func:`dilated_kernel`, ``(K - 1) * d + 1`` taps per axis): the
phases then carry those zeros as taps (when ``d`` and ``s`` share a factor, whole phases are
zero; the work is that of the ``ceil(((K - 1) * d + 1) / s)``-tap phase convs).

The conv runs on the blocked NCHW[L]c kernels (``conv2d_nchwc``); the interleave is the op
``nn.contrib_conv2d_transpose_interleave`` (``relay/op/nn/conv_transpose_nchwc.py``), or,
where the phases make one output block of 4 or 8 channels (a transposed conv to one or two
channels), ``nn.contrib_conv2d_transpose_fewoc``: the few-output-channel kernel
(``conv2d_fewoc.py``) writing each phase's outputs straight to their places; or, on a small
map with more than one tap per phase, ``nn.contrib_conv2d_transpose_phased``
(``conv2d_phase.py``): each phase's conv over exactly its pixels, written into the blocked
output.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from .conv2d import conv2d_nchw


@dataclass(frozen=True)
class PhasePlan:
    """The convolutions that compute one transposed convolution (module docstring).

    ``taps`` (Th, Tw) the sub-kernel size, ``padding`` the convs' (top, left, bottom, right)
    padding, ``rows`` (Qh, Qw) the convs' output size, ``offset`` (off_h, off_w) where the
    cropped output starts in the first computed phase row, ``out`` (OH, OW)."""

    strides: tuple[int, int]
    taps: tuple[int, int]
    padding: tuple[int, int, int, int]
    rows: tuple[int, int]
    offset: tuple[int, int]
    out: tuple[int, int]

    @property
    def phases(self) -> int:
        return self.strides[0] * self.strides[1]

    @property
    def trim(self) -> tuple[int, int]:
        """(rows * sh - OH, cols * sw - OW): the same for every input size (``out`` and
        ``rows`` both grow by the stride per input row), so an output of a run-time size is
        the phase convs' output times the stride less this."""
        return (self.rows[0] * self.strides[0] - self.out[0],
                self.rows[1] * self.strides[1] - self.out[1])


def _axis(size: int, k: int, s: int, pad_lo: int, pad_hi: int, out_pad: int
          ) -> tuple[int, int, int, int, int, int] | None:
    """(taps, conv pad low, conv pad high, conv rows, offset, out) along one axis, or None
    when the crop reaches beyond the conv's zero padding (padding >= taps * stride)."""
    taps = -(-k // s)
    out = (size - 1) * s - pad_lo - pad_hi + k + out_pad
    first = pad_lo // s  # the first phase row the output needs
    rows = -(-(out + pad_lo - first * s) // s)
    lo, hi = taps - 1 - first, rows - size + first
    if out <= 0 or lo < 0 or hi < 0:
        return None
    return taps, lo, hi, rows, pad_lo - first * s, out


def phase_plan(h: int, w: int, kernel: tuple[int, int], strides: tuple[int, int],
               padding: tuple[int, int, int, int], output_padding: tuple[int, int]
               ) -> PhasePlan | None:
    """The phase convolutions of a transposed conv over an ``h x w`` input (dilation 1), or
    None where the decomposition does not apply (a padding larger than the kernel's reach)."""
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = kernel, strides, padding
    rows = _axis(h, kh, sh, pt, pb, output_padding[0])
    cols = _axis(w, kw, sw, pl, pr, output_padding[1])
    if rows is None or cols is None:
        return None
    return PhasePlan((sh, sw), (rows[0], cols[0]), (rows[1], cols[1], rows[2], cols[2]),
                     (rows[3], cols[3]), (rows[4], cols[4]), (rows[5], cols[5]))


# the input size a plan for a run-time (``?``) size is made at: its taps, padding, offset and
# trim do not depend on the size (only ``rows`` and ``out`` do), once the output is not empty
PROBE = 4096


def symbolic_phase_plan(h: object, w: object, kernel: tuple[int, int],
                        strides: tuple[int, int], padding: tuple[int, int, int, int],
                        output_padding: tuple[int, int]) -> PhasePlan | None:
    """:func:`phase_plan` where ``h`` or ``w`` may be a run-time size (not an int): the plan
    at :data:`PROBE` for those axes, whose ``rows`` and ``out`` then hold for that probe only
    (the interleave takes ``out = rows * stride - trim`` at run time)."""
    return phase_plan(h if isinstance(h, int) else PROBE, w if isinstance(w, int) else PROBE,
                      kernel, strides, padding, output_padding)


def dilated_kernel(weight: np.ndarray, dilation: tuple[int, int]) -> np.ndarray:
    """The IOHW ``weight`` with ``dilation - 1`` zero taps between neighbours along H and W:
    the undilated kernel that a dilated transposed conv scatters (module docstring)."""
    (dh, dw), (i, o, kh, kw) = dilation, weight.shape
    out = np.zeros((i, o, (kh - 1) * dh + 1, (kw - 1) * dw + 1), weight.dtype)
    out[:, :, ::dh, ::dw] = weight
    return out


def phase_weights(weight: np.ndarray, groups: int, plan: PhasePlan) -> np.ndarray:
    """The phases' OIHW conv weights, ``(phases, OC, I / groups, Th, Tw)``, from the
    transposed conv's IOHW ``weight`` ``(I, OC / groups, KH, KW)``: phase ``(ry, rx)`` tap
    ``(u, v)`` is kernel tap ``((Th-1-u) * sh + ry, (Tw-1-v) * sw + rx)`` (zero past K)."""
    i, og, kh, kw = weight.shape
    (sh, sw), (th, tw) = plan.strides, plan.taps
    full = np.zeros((i, og, th * sh, tw * sw), weight.dtype)
    full[:, :, :kh, :kw] = weight
    # [I, OG, Th, sh, Tw, sw] -> flip the taps -> [sh, sw, G, OG, I/G, Th, Tw]
    taps = full.reshape(i, og, th, sh, tw, sw)[:, :, ::-1, :, ::-1, :]
    taps = taps.reshape(groups, i // groups, og, th, sh, tw, sw)
    out = taps.transpose(4, 6, 0, 2, 1, 3, 5)
    return np.ascontiguousarray(out.reshape(sh * sw, groups * og, i // groups, th, tw))


def interleave(conv: np.ndarray, plan: PhasePlan) -> np.ndarray:
    """The transposed conv's NCHW output from the phase convs' NCHW output (channels
    ``phase * OC + c``): the numpy form of the interleave (a reference)."""
    n, c, _, _ = conv.shape
    (sh, sw), (oh, ow), (dy, dx) = plan.strides, plan.out, plan.offset
    y, x = np.arange(oh) + dy, np.arange(ow) + dx
    phases = conv.reshape(n, sh, sw, c // plan.phases, *conv.shape[2:])
    return phases[:, (y % sh)[:, None], (x % sw)[None, :], :, (y // sh)[:, None],
                  (x // sw)[None, :]].transpose(2, 3, 0, 1)


def conv2d_transpose_phased(data: te.Tensor, kernel: te.Tensor, plan: PhasePlan,
                            out_dtype: str, dilation: tuple[int, int] = (1, 1)) -> te.Tensor:
    """The transposed conv of NCHW ``data`` and IOHW ``kernel`` (groups 1, static sizes) as
    its phase convs on topi's NCHW conv template, then the interleave: the path of builds
    without AlterOpLayout (the phase weight is a small stage the template's packing reads).
    With ``dilation``, ``plan`` is that of the dilated kernel (:func:`dilated_kernel`)."""
    n = data.shape[0]
    c, oc, kh, kw = (int(d) for d in kernel.shape)  # type: ignore[call-overload]
    (sh, sw), (th, tw), (dy, dx) = plan.strides, plan.taps, plan.offset
    dh, dw = dilation

    def phase_weight(o: PrimExpr, i: PrimExpr, u: PrimExpr, v: PrimExpr) -> PrimExpr:
        p, co = tir.floordiv(o, oc), tir.floormod(o, oc)
        ky = (th - 1 - u) * sh + tir.floordiv(p, sw)  # a tap of the dilated kernel
        kx = (tw - 1 - v) * sw + tir.floormod(p, sw)
        tap = kernel[i, co, tir.min(tir.floordiv(ky, dh), kh - 1),
                     tir.min(tir.floordiv(kx, dw), kw - 1)]
        real = tir.all(ky < (kh - 1) * dh + 1, kx < (kw - 1) * dw + 1,
                       tir.floormod(ky, dh) == 0, tir.floormod(kx, dw) == 0)
        return tir.if_then_else(real, tap, tir.const(0, kernel.dtype))

    weight = te.compute((plan.phases * oc, c, th, tw), phase_weight, name="T_phase_weight",
                        tag="injective")
    conv = conv2d_nchw(data, weight, 1, plan.padding, 1, 1, out_dtype)

    def out(b: PrimExpr, co: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        yy, xx = y + dy, x + dx
        p = tir.floormod(yy, sh) * sw + tir.floormod(xx, sw)
        return conv[b, p * oc + co, tir.floordiv(yy, sh), tir.floordiv(xx, sw)]

    return te.compute((n, oc, *plan.out), out, name="T_conv2d_transpose", tag="injective")
