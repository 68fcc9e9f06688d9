"""nn.contrib_conv2d_transpose_interleave: the last step of a transposed convolution computed
as phase convolutions (``topi/nn/conv2d_transpose.py``): the ``strides[0] * strides[1]``
phase images, stacked along the channels (phase outermost), interleaved into the output and
cropped to it.

    out[n, c, y, x] = data[n, p * OC + c, (y + off_h) // sh, (x + off_w) // sw]
    p = ((y + off_h) % sh) * sw + (x + off_w) % sw

``data_layout`` and ``out_layout`` are ``NCHW`` or the blocked ``NCHW<L>c`` (each on its own:
AlterOpLayout keeps a blocked result blocked when the output channels split into blocks).
An ``out_size`` of 0 on an axis takes that axis' size from the data at run time: ``OH = Qh * sh
- trim_h`` (a transposed conv of a ``?`` height or width: ``trim`` is ``PhasePlan.trim``).
It is injective: FuseOps puts the bias, activation or residual add that follow into the same
loop, so the interleave costs one pass over the output.

``nn.contrib_conv2d_transpose_fewoc`` is the phase conv and the interleave in one op, for a
transposed conv whose phases make one output block of 4 or 8 channels over input blocks of 8
or 16 (``topi/nn/conv2d_fewoc.py``: DBNet's 64 -> 1 head, 4 phases), or ``channels`` of a
block as wide as the input's, zero padding after them (DCGAN's 128 -> 3: 12 of 16): the conv
``nn.contrib_conv2d_NCHWc_fused`` would compute (stride and dilation 1, its bias and
activation; data ``[N, IC/CB, H, W, CB]``, weight ``[1, IC/CB, KH, KW, CB, L]``, bias
``[L]``), written straight to its places in the plain NCHW output ``[N, L / phases, OH,
OW]``, which the interleave would otherwise move in a second pass (an ``out_size`` of 0 on an
axis: ``Q * s - trim`` from the data, as the interleave's).

``nn.contrib_conv2d_transpose_phased`` is a whole transposed conv on a small map (DCGAN's
4x4, 8x8): data ``[N, IC/L, H, W, L]``, weight ``[S, OCBp, IC/L, TH, TW, L, L]`` (each phase
packed as the blocked conv's, output blocks padded to the register tile's), bias ``[S * OCBp
* L]``, the output ``[N, OC/L, OH, OW, L]`` written phase by phase with the bias and
activation (``topi/nn/conv2d_phase.py``): no second pass, and no phase computes the crop's
extra row and column.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import Any as AnyDim
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from .._attrs_base import OpAttrs, attrs_class
from .._compute_common import as_int, require
from .._layout import nchwc_lanes
from .._reg import INJECTIVE, OPAQUE, call, defop
from .._shape import fail, fmt_shape, known, tensor_of

__all__ = ["contrib_conv2d_transpose_fewoc", "contrib_conv2d_transpose_interleave",
           "contrib_conv2d_transpose_phased"]

OP = "nn.contrib_conv2d_transpose_interleave"


@attrs_class("Conv2DTransposeInterleaveAttrs")
class InterleaveAttrs(OpAttrs):
    """strides (sh, sw); offset (off_h, off_w), each below its stride; out_size (OH, OW), 0
    on an axis sized from the data (``Q * s - trim``); data_layout and out_layout NCHW or
    NCHW<L>c; trim (th, tw), read only on such an axis."""

    strides: tuple[int, int] = (1, 1)
    offset: tuple[int, int] = (0, 0)
    out_size: tuple[int, int] = (1, 1)
    data_layout: str = "NCHW"
    out_layout: str = "NCHW"
    trim: tuple[int, int] = (0, 0)
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        for name in ("strides", "offset", "out_size", "trim"):
            self._ints(name, length=(2,))
        self._positive("strides")
        for name in ("out_size", "offset", "trim"):
            self._positive(name, allow_zero=True)
        if any(o >= s for o, s in zip(self.offset, self.strides)):
            raise self._invalid("offset", f"values below the strides {self.strides}")
        for name in ("data_layout", "out_layout"):
            if getattr(self, name) != "NCHW" and not nchwc_lanes(getattr(self, name)):
                raise self._invalid(name, "NCHW or NCHW<L>c")


def _channels(ty: TensorType, layout: str, what: str) -> Any:
    lanes = nchwc_lanes(layout)
    rank = 5 if lanes else 4
    if ty.ndim != rank or (lanes and ty.shape[4] != lanes):
        raise fail(OP, f"{what} must be {layout} (rank {rank}), got {fmt_shape(ty.shape)}")
    c = ty.shape[1]
    return c * lanes if lanes and known(c) else c


def _rel(args: list[TensorType], attrs: InterleaveAttrs) -> TensorType:
    data = args[0]
    c = _channels(data, attrs.data_layout, "data")
    phases = attrs.strides[0] * attrs.strides[1]
    if not known(c) or c % phases:
        raise fail(OP, f"data has {c} channels, not a multiple of the {phases} phases "
                       f"(strides {attrs.strides})")
    oc, lanes = c // phases, nchwc_lanes(attrs.out_layout)
    if lanes and oc % lanes:
        raise fail(OP, f"{oc} output channels do not split into out_layout "
                       f"{attrs.out_layout}")
    out: list[Any] = []
    for axis, (size, o, s, q, t) in enumerate(zip(attrs.out_size, attrs.offset, attrs.strides,
                                                 data.shape[2:4], attrs.trim)):
        if size == 0:  # from the data
            size = q * s - t if known(q) else AnyDim()
            if known(size) and size <= 0:
                raise fail(OP, f"data has {q} phase {('rows', 'columns')[axis]}: with stride "
                               f"{s} and trim {t} the output would be empty")
            out.append(size)
            continue
        need = (size - 1 + o) // s + 1
        if known(q) and q < need:
            raise fail(OP, f"data has {q} phase {('rows', 'columns')[axis]}; out_size "
                           f"{attrs.out_size} with offset {attrs.offset} needs {need}")
        out.append(size)
    n, (oh, ow) = data.shape[0], out
    shape = (n, oc // lanes, oh, ow, lanes) if lanes else (n, oc, oh, ow)
    return tensor_of(shape, data.dtype)


def _ref(x: np.ndarray, attrs: InterleaveAttrs) -> np.ndarray:
    from ....topi.nn.conv2d_nchwc import from_blocked, to_blocked
    from ....topi.nn.conv2d_transpose import interleave

    sizes = tuple(q * s - t if size == 0 else size for size, q, s, t in
                  zip(attrs.out_size, x.shape[2:4], attrs.strides, attrs.trim))
    plan = _RefPlan(attrs.strides, attrs.offset, sizes)
    out = interleave(from_blocked(x) if x.ndim == 5 else x, plan)  # type: ignore[arg-type]
    lanes = nchwc_lanes(attrs.out_layout)
    return to_blocked(out, lanes) if lanes else np.ascontiguousarray(out)


class _RefPlan:
    """The fields of a PhasePlan that ``interleave`` reads."""

    def __init__(self, strides: tuple, offset: tuple, out: tuple) -> None:
        self.strides, self.offset, self.out = strides, offset, out
        self.phases = strides[0] * strides[1]


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    (sh, sw), (dy, dx) = attrs.strides, attrs.offset
    li, lo = nchwc_lanes(attrs.data_layout), nchwc_lanes(attrs.out_layout)
    shape = out_type.shape  # type: ignore[attr-defined]
    oc = shape[1] * lo if lo else shape[1]
    # whole blocks stay whole: phase p's channel block b is the input's block p * OC/L + b
    same_blocks = li and li == lo

    def at(n: PrimExpr, c_or_block: PrimExpr, y: PrimExpr, w: PrimExpr,
           lane: PrimExpr | None) -> PrimExpr:
        yy, xx = y + dy, w + dx
        p = tir.floormod(yy, sh) * sw + tir.floormod(xx, sw)
        qy, qx = tir.floordiv(yy, sh), tir.floordiv(xx, sw)
        if same_blocks:
            return x(n, p * (oc // lo) + c_or_block, qy, qx, lane)
        ch = p * oc + (c_or_block * lo + lane if lo else c_or_block)
        if li:
            return x(n, tir.floordiv(ch, li), qy, qx, tir.floormod(ch, li))
        return x(n, ch, qy, qx)

    if lo:
        f = lambda n, b, y, w, lane: at(n, b, y, w, lane)  # noqa: E731
    else:
        f = lambda n, c, y, w: at(n, c, y, w, None)  # noqa: E731
    dims = [tir.const(d) if isinstance(d, int) else x.shape[0] for d in shape[:2]]
    for axis in (2, 3):  # a ``?`` output row count follows the data's (out_size 0)
        s, t = attrs.strides[axis - 2], attrs.trim[axis - 2]
        if isinstance(shape[axis], int):
            dims.append(tir.const(shape[axis]))
            continue
        size = x.shape[axis] * s - t
        require(size > 0, f"{OP}: the output {('height', 'width')[axis - 2]} "
                          f"(phase rows * {s} - {t}) must be positive")
        dims.append(size)
    dims += [tir.const(d) for d in shape[4:]]
    return [te.compute(tuple(dims), f, name="T_conv2d_transpose_interleave", tag="injective")]


defop(OP, _rel, _ref, INJECTIVE, attrs=InterleaveAttrs,
      doc="Interleave the phase convolutions of a transposed conv into its output.", level=10,
      compute=_compute)


def contrib_conv2d_transpose_interleave(data: Any, strides: Any, offset: Any, out_size: Any,
                                        data_layout: str = "NCHW",
                                        out_layout: str = "NCHW", trim: Any = (0, 0)) -> Call:
    """The transposed conv's output from its stacked phase convs (module docstring)."""
    attrs = InterleaveAttrs(strides, offset, out_size, data_layout, out_layout, trim)
    return call(OP, data, attrs=attrs)


# -- the phase conv and the interleave in one op -----------------------------------------------
FEWOC = "nn.contrib_conv2d_transpose_fewoc"


@attrs_class("Conv2DTransposeFewOCAttrs")
class FewOCAttrs(OpAttrs):
    """The phase conv's padding, lanes (its channels), in_block, activation and its two
    parameters (``nn.contrib_conv2d_NCHWc_fused``'s), then the interleave's strides, offset,
    out_size (0 on an axis sized from the data) and trim (read only on such an axis)."""

    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    lanes: int = 4
    in_block: int = 16
    activation: str = "none"
    clip_min: float = 0.0
    clip_max: float = 0.0
    strides: tuple[int, int] = (1, 1)
    offset: tuple[int, int] = (0, 0)
    out_size: tuple[int, int] = (1, 1)
    channels: int = 0  # the real phase channels, the rest of the lanes zero padding; 0: all
    trim: tuple[int, int] = (0, 0)
    _op: ClassVar[str] = FEWOC

    def __post_init__(self) -> None:
        from ....topi.nn.conv2d_nchwc import ACTIVATIONS

        self._ints("padding", length=(4,))
        self._positive("padding", allow_zero=True)
        for name in ("strides", "offset", "out_size", "trim"):
            self._ints(name, length=(2,))
        for name in ("lanes", "in_block"):
            self._int(name)
            self._positive(name)
        self._positive("strides")
        for name in ("out_size", "offset", "trim"):
            self._positive(name, allow_zero=True)
        if any(o >= s for o, s in zip(self.offset, self.strides)):
            raise self._invalid("offset", f"values below the strides {self.strides}")
        self._int("channels")
        if not 0 <= self.channels <= self.lanes:
            raise self._invalid("channels", f"0 to the {self.lanes} lanes")
        if (self.channels or self.lanes) % (self.strides[0] * self.strides[1]):
            raise self._invalid("channels" if self.channels else "lanes",
                                f"a multiple of the {self.strides} strides' phases")
        self._choice("activation", tuple(ACTIVATIONS))
        for name in ("clip_min", "clip_max"):
            self._set(name, float(getattr(self, name)))


def _fewoc_rel(args: list[TensorType], attrs: FewOCAttrs) -> TensorType:
    data, weight, bias = args
    cb, lanes = attrs.in_block, attrs.lanes
    if data.ndim != 5 or weight.ndim != 6 or bias.ndim != 1 or data.shape[4] != cb or \
            tuple(weight.shape[:2]) != (1, data.shape[1]) or weight.shape[4:] != (cb, lanes) or \
            bias.shape[0] != lanes:
        raise fail(FEWOC, f"expected data [N, C/{cb}, H, W, {cb}], weight [1, C/{cb}, KH, KW, "
                          f"{cb}, {lanes}] and bias [{lanes}]; got {fmt_shape(data.shape)}, "
                          f"{fmt_shape(weight.shape)}, {fmt_shape(bias.shape)}")
    (pt, pl, pb, pr), (kh, kw) = attrs.padding, weight.shape[2:4]
    rows = tuple(d + lo + hi - k + 1 if known(d) else d for d, lo, hi, k in
                 ((data.shape[2], pt, pb, kh), (data.shape[3], pl, pr, kw)))
    out: list[Any] = []
    for axis, (size, o, s, q, t) in enumerate(zip(attrs.out_size, attrs.offset, attrs.strides,
                                                  rows, attrs.trim)):
        if size == 0:  # from the data
            size = q * s - t if known(q) else AnyDim()
            if known(size) and size <= 0:
                raise fail(FEWOC, f"the phase conv has {q} {('rows', 'columns')[axis]}: with "
                                  f"stride {s} and trim {t} the output would be empty")
        elif known(q) and q < (size - 1 + o) // s + 1:
            raise fail(FEWOC, f"the phase conv has {q} {('rows', 'columns')[axis]}; out_size "
                              f"{attrs.out_size} with offset {attrs.offset} needs "
                              f"{(size - 1 + o) // s + 1}")
        out.append(size)
    phases = attrs.strides[0] * attrs.strides[1]
    return tensor_of((data.shape[0], (attrs.channels or lanes) // phases, *out), data.dtype)


def _fewoc_parts(attrs: FewOCAttrs) -> tuple[Any, InterleaveAttrs]:
    from .conv_nchwc import Conv2DNCHWcFusedAttrs

    conv = Conv2DNCHWcFusedAttrs(padding=attrs.padding, lanes=attrs.lanes,
                                 in_block=attrs.in_block, activation=attrs.activation,
                                 clip_min=attrs.clip_min, clip_max=attrs.clip_max)
    return conv, InterleaveAttrs(attrs.strides, attrs.offset, attrs.out_size, "NCHW", "NCHW",
                                 attrs.trim)


def _fewoc_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, attrs: FewOCAttrs) -> np.ndarray:
    from ....topi.nn.conv2d_nchwc import from_blocked
    from .conv_nchwc import _fused_ref

    conv, interleave = _fewoc_parts(attrs)
    phases = from_blocked(_fused_ref(x, w, b, attrs=conv))[:, :attrs.channels or attrs.lanes]
    return _ref(np.ascontiguousarray(phases), interleave)


def _fewoc_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    from ....topi.nn import conv2d_nchwc as K
    from ....topi.nn.conv2d_fewoc import Interleave, conv2d_fewoc

    data, weight, bias = inputs
    n, icb, h, w, cb = (as_int(d) if as_int(d) is not None else d for d in data.shape)
    kh, kw = (as_int(d) for d in weight.shape[2:4])
    (pt, pl, pb, pr), lanes = attrs.padding, attrs.lanes
    geo = K.ConvGeometry(n, icb * cb, h, w, lanes, h + pt + pb - kh + 1, w + pl + pr - kw + 1,
                         kh, kw, (1, 1), attrs.padding, (1, 1), 1, lanes, cb)
    epilogue = [K.ACTIVATIONS[attrs.activation], tir.const(attrs.clip_min, "float32"),
                tir.const(attrs.clip_max, "float32"), 0]
    out = []
    for axis, (size, q) in enumerate(zip(attrs.out_size, (geo.oh, geo.ow))):
        s, t = attrs.strides[axis], attrs.trim[axis]
        if size == 0:  # a ``?`` output row count follows the phase conv's
            size = q * s - t
            if as_int(size) is None:
                require(size > 0, f"{FEWOC}: the output {('height', 'width')[axis]} "
                                  f"(phase rows * {s} - {t}) must be positive")
        out.append(size)
    il = Interleave(tuple(attrs.strides), tuple(attrs.offset), (out[0], out[1]),
                    attrs.channels)
    return [conv2d_fewoc(data, weight, bias, geo, epilogue, il)]


defop(FEWOC, _fewoc_rel, _fewoc_ref, OPAQUE, args=("data", "weight", "bias"),
      attrs=FewOCAttrs, level=10, compute=_fewoc_compute,
      doc="A transposed conv's phase conv to few channels, written interleaved.")


def contrib_conv2d_transpose_fewoc(data: Any, weight: Any, bias: Any, **attrs: Any) -> Call:
    """The phase conv and interleave of a transposed conv to few channels (module
    docstring)."""
    return call(FEWOC, data, weight, bias, attrs=FewOCAttrs(**attrs))


# -- a transposed conv on a small map, phase by phase ------------------------------------------
PHASED = "nn.contrib_conv2d_transpose_phased"


@attrs_class("Conv2DTransposePhasedAttrs")
class PhasedAttrs(OpAttrs):
    """The phase convs' padding (top, left, bottom, right) and output size ``rows`` (Qh,
    Qw), the interleave's strides, offset and out_size, the output ``channels``, the
    register ``tile`` (``topi/nn/conv2d_phase.py``'s TILES index) and the activation with
    its two parameters (``nn.contrib_conv2d_NCHWc_fused``'s)."""

    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    rows: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    offset: tuple[int, int] = (0, 0)
    out_size: tuple[int, int] = (1, 1)
    channels: int = 8
    tile: int = 0
    activation: str = "none"
    clip_min: float = 0.0
    clip_max: float = 0.0
    _op: ClassVar[str] = PHASED

    def __post_init__(self) -> None:
        from ....topi.nn.conv2d_nchwc import ACTIVATIONS
        from ....topi.nn.conv2d_phase import TILES

        self._ints("padding", length=(4,))
        self._positive("padding", allow_zero=True)
        for name in ("rows", "strides", "offset", "out_size"):
            self._ints(name, length=(2,))
        for name in ("rows", "strides", "out_size"):
            self._positive(name)
        self._positive("offset", allow_zero=True)
        if any(o >= s for o, s in zip(self.offset, self.strides)):
            raise self._invalid("offset", f"values below the strides {self.strides}")
        for name in ("channels", "tile"):
            self._int(name)
        self._positive("channels")
        if not 0 <= self.tile < len(TILES):
            raise self._invalid("tile", f"an index of the {len(TILES)} register tiles")
        self._choice("activation", tuple(ACTIVATIONS))
        for name in ("clip_min", "clip_max"):
            self._set(name, float(getattr(self, name)))


def _phased_rel(args: list[TensorType], attrs: PhasedAttrs) -> TensorType:
    from ....topi.nn.conv2d_phase import TILES

    data, weight, bias = args
    phases, lanes = attrs.strides[0] * attrs.strides[1], data.shape[4] if data.ndim == 5 else 0
    rb = TILES[attrs.tile][2]
    ocbp = -(-attrs.channels // max(lanes, 1) // rb) * rb
    if data.ndim != 5 or weight.ndim != 7 or bias.ndim != 1 or not lanes or \
            attrs.channels % lanes or tuple(weight.shape[:3]) != (phases, ocbp, data.shape[1]) \
            or tuple(weight.shape[5:]) != (lanes, lanes) or bias.shape[0] != phases * ocbp * lanes:
        raise fail(PHASED, f"expected data [N, C/L, H, W, L], weight [{phases}, {ocbp}, C/L, TH, "
                           f"TW, L, L] and bias [{phases * ocbp} * L] ({attrs.channels} channels, "
                           f"tile {attrs.tile}); got {fmt_shape(data.shape)}, "
                           f"{fmt_shape(weight.shape)}, {fmt_shape(bias.shape)}")
    (pt, pl, pb, pr), (th, tw) = attrs.padding, weight.shape[3:5]
    rows = (data.shape[2] + pt + pb - th + 1, data.shape[3] + pl + pr - tw + 1)
    if rows != tuple(attrs.rows):
        raise fail(PHASED, f"the phase convs have {rows} rows and columns, attrs say "
                           f"{attrs.rows}")
    for axis, (size, o, s, q) in enumerate(zip(attrs.out_size, attrs.offset, attrs.strides,
                                               rows)):
        if q < (size - 1 + o) // s + 1:
            raise fail(PHASED, f"the phase convs have {q} {('rows', 'columns')[axis]}; "
                               f"out_size {attrs.out_size} with offset {attrs.offset} needs "
                               f"{(size - 1 + o) // s + 1}")
    return tensor_of((data.shape[0], attrs.channels // lanes, *attrs.out_size, lanes),
                     data.dtype)


def _phased_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, attrs: PhasedAttrs) -> np.ndarray:
    from .conv_nchwc import Conv2DNCHWcFusedAttrs, _fused_ref

    lanes, phases = x.shape[4], w.shape[0]
    ocb, ocbp = attrs.channels // lanes, w.shape[1]
    conv = Conv2DNCHWcFusedAttrs(padding=attrs.padding, lanes=lanes, in_block=lanes,
                                 activation=attrs.activation, clip_min=attrs.clip_min,
                                 clip_max=attrs.clip_max)
    bias = b.reshape(phases, ocbp * lanes)[:, :ocb * lanes]
    stacked = np.concatenate([_fused_ref(x, w[p, :ocb], bias[p], attrs=conv)
                              for p in range(phases)], axis=1)  # phases outermost
    il = InterleaveAttrs(attrs.strides, attrs.offset, attrs.out_size, f"NCHW{lanes}c",
                         f"NCHW{lanes}c")
    return _ref(stacked, il)


def _phased_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    from ....topi.nn.conv2d_phase import conv2d_phase

    shape = tuple(int(d) for d in out_type.shape)  # type: ignore[attr-defined]
    return [conv2d_phase(*inputs, attrs, shape)]


defop(PHASED, _phased_rel, _phased_ref, OPAQUE, args=("data", "weight", "bias"),
      attrs=PhasedAttrs, level=10, compute=_phased_compute,
      doc="A transposed conv on a small map, phase by phase, written interleaved.")


def contrib_conv2d_transpose_phased(data: Any, weight: Any, bias: Any, **attrs: Any) -> Call:
    """A transposed conv on a small map: its phase convs, each over its own pixels, written
    into the blocked output (``topi/nn/conv2d_phase.py``)."""
    return call(PHASED, data, weight, bias, attrs=PhasedAttrs(**attrs))
