"""Signal operators: ``signal.frames_fft``, the forward DFT of a signal's frames by an FFT
(``topi/signal.py``, ``kernels/fft.h``), which the ONNX importer makes of STFT and DFT nodes
whose length has prime factors 2, 3 and 5 only.

Frame ``f`` of a signal (batch, samples) or (batch, samples, 1 or 2) holds its samples
``f * step + start + p`` (``p < positions``), times a window, at positions ``start + p`` of a
length-``length`` transform (zeros elsewhere); there are ``1 + (samples - frame_length) //
step`` frames (none when the signal is shorter than one). The output is (batch, frames,
bins, 2) in ONNX's complex layout: ``length // 2 + 1`` bins when ``onesided``, else
``length``. The second argument is the constant table of ``topi.signal.fft_table`` (the
window, then the FFT's twiddles): :func:`frames_fft` builds it from a numpy window.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, const
from ...ir.types import Any as AnyDim
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ._attrs_base import OpAttrs, attrs_class
from ._compute_common import out_dims
from ._reg import OPAQUE, call, defop
from ._shape import fail, fmt_shape, known, tensor_of

__all__ = ["frames_fft", "has_fft_plan"]

OP = "signal.frames_fft"


@attrs_class("FramesFFTAttrs")
class FramesFFTAttrs(OpAttrs):
    """The transform's ``length``, the frames' ``frame_length`` (their count) and ``step``,
    where the gathered samples sit (``start``, ``positions``), and ``onesided``."""

    length: int = 1
    frame_length: int = 1
    step: int = 1
    start: int = 0
    positions: int = 1
    onesided: bool = False
    _op: ClassVar[str] = OP

    def __post_init__(self) -> None:
        from ...topi.signal import fft_radices

        for name in ("length", "frame_length", "step", "start", "positions"):
            self._int(name)
        for name in ("length", "frame_length", "step"):
            self._positive(name)
        for name in ("start", "positions"):
            self._positive(name, allow_zero=True)
        self._bool("onesided")
        if fft_radices(self.length) is None:
            raise self._invalid("length", "a length whose prime factors are 2, 3 and 5")
        if self.start + self.positions > min(self.length, self.frame_length):
            raise self._invalid("positions", f"start + positions within the frame_length "
                                             f"{self.frame_length} and the length {self.length}")

    @property
    def bins(self) -> int:
        return self.length // 2 + 1 if self.onesided else self.length


def has_fft_plan(length: int) -> bool:
    """Whether ``signal.frames_fft`` takes a transform of ``length`` (prime factors 2, 3, 5)."""
    from ...topi.signal import fft_radices

    return length >= 1 and fft_radices(length) is not None


def _table_size(attrs: FramesFFTAttrs) -> int:
    from ...topi.signal import fft_radices

    n, pairs = attrs.length, 0
    for r in fft_radices(attrs.length) or []:
        pairs += (r - 1) * (n // r)
        n //= r
    return attrs.positions + 2 * pairs


def _frames(samples: Any, attrs: FramesFFTAttrs) -> Any:
    return max(0, 1 + (samples - attrs.frame_length) // attrs.step)


def _rel(args: list[TensorType], attrs: FramesFFTAttrs) -> TensorType:
    signal, table = args
    if signal.ndim not in (2, 3) or signal.ndim == 3 and signal.shape[2] not in (1, 2) or \
            signal.dtype != "float32":
        raise fail(OP, f"signal must be float32 (batch, samples) or (batch, samples, 1 or 2), "
                       f"got {signal.dtype}{fmt_shape(signal.shape)}")
    if signal.ndim == 3 and attrs.onesided and signal.shape[2] == 2:
        raise fail(OP, "onesided needs a real signal")
    want = _table_size(attrs)
    if table.ndim != 1 or table.dtype != "float32" or table.shape[0] != want:
        raise fail(OP, f"table must be float32 ({want},) (topi.signal.fft_table of the window "
                       f"and length {attrs.length}), got {table.dtype}{fmt_shape(table.shape)}")
    samples = signal.shape[1]
    frames = _frames(samples, attrs) if known(samples) else AnyDim()
    return tensor_of((signal.shape[0], frames, attrs.bins, 2), "float32")


def _ref(signal: np.ndarray, table: np.ndarray, attrs: FramesFFTAttrs) -> np.ndarray:
    x = signal if signal.ndim == 3 else signal[..., None]
    x = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    frames = _frames(x.shape[1], attrs)
    window = table[:attrs.positions].astype(np.float64)
    idx = np.arange(frames)[:, None] * attrs.step + attrs.start + np.arange(attrs.positions)
    buf = np.zeros((x.shape[0], frames, attrs.length), np.complex128)
    buf[..., attrs.start:attrs.start + attrs.positions] = x[:, idx] * window
    y = np.fft.fft(buf, axis=-1)[..., :attrs.bins]
    return np.stack([y.real, y.imag], -1).astype("float32")


def _compute(attrs: FramesFFTAttrs, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    from ...topi.signal import frames_fft as topi_frames_fft

    signal, table = inputs
    frames = tir.max(tir.add(tir.floordiv(tir.sub(signal.shape[1], attrs.frame_length),
                                          attrs.step), 1), 0)
    shape = out_dims(out_type, (signal.shape[0], frames, attrs.bins, 2))  # type: ignore[arg-type]
    return [topi_frames_fft(signal, table, shape, length=attrs.length, step=attrs.step,
                            start=attrs.start, positions=attrs.positions, bins=attrs.bins)]


defop(OP, _rel, _ref, OPAQUE, args=("signal", "table"), attrs=FramesFFTAttrs, level=10,
      compute=_compute, doc="The forward DFT of a signal's frames, by an FFT.")


def frames_fft(signal: Any, window: np.ndarray | None, *, length: int, frame_length: int,
               step: int, start: int = 0, positions: int | None = None,
               onesided: bool = False) -> Call:
    """A call of ``signal.frames_fft`` (module docstring) with ``window``'s values (None: ones)
    folded into its table; ``positions`` defaults to the window's size, or ``frame_length``."""
    from ...topi.signal import fft_table

    if positions is None:
        positions = len(window) if window is not None else frame_length
    values = np.ones(positions) if window is None else np.asarray(window).reshape(-1)
    attrs = FramesFFTAttrs(length=length, frame_length=frame_length, step=step, start=start,
                           positions=positions, onesided=onesided)
    if len(values) != positions:
        raise fail(OP, f"the window has {len(values)} values for {positions} positions")
    return call(OP, signal, const(fft_table(length, values)), attrs=attrs)
