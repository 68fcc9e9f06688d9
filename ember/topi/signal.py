"""The forward DFT of a signal's frames by a mixed-radix FFT: a call of ``ember_frames_fft``
(``ember/include/ember/kernels/fft.h``), for STFT and DFT.

:func:`fft_radices` says whether a length has an FFT plan here (prime factors 2, 3 and 5:
512, 400, 256, 320, 1024...); :func:`fft_table` builds the constant the kernel reads (the
window, then each stage's twiddles) and :func:`frames_fft` is the extern stage.
"""
from __future__ import annotations

import numpy as np

from ..runtime.errors import OpError
from ..te import tensor as te
from ..tir import op as tir
from .nn.sizes import Dim, dims, succeeds

HEADER = "ember/kernels/fft.h"


def fft_radices(n: int) -> list[int] | None:
    """The stages' radices of a length-``n`` FFT, in fft.h's order (4s, then 2, 3, 5), or
    None when ``n`` has a prime factor above 5."""
    radices: list[int] = []
    while n > 1:
        r = next((r for r in (4, 2, 3, 5) if n % r == 0), None)
        if r is None:
            return None
        radices.append(r)
        n //= r
    return radices if n == 1 else None


def fft_table(length: int, window: np.ndarray) -> np.ndarray:
    """float32: ``window`` (one factor per gathered sample), then for each stage of
    :func:`fft_radices` (``n`` its length, ``m = n / r``) the twiddles exp(-2 pi i p u / n),
    p < m, 1 <= u < r, as (cos, sin) pairs."""
    radices = fft_radices(length)
    if radices is None:
        raise OpError(f"frames_fft: length {length} has a prime factor above 5")
    parts = [np.asarray(window, dtype="float64").reshape(-1)]
    n = length
    for r in radices:
        m = n // r
        angle = -2.0 * np.pi * np.arange(m)[:, None] * np.arange(1, r)[None, :] / n
        parts.append(np.stack([np.cos(angle), np.sin(angle)], -1).reshape(-1))
        n = m
    return np.concatenate(parts).astype("float32")


def frames_fft(signal: te.Tensor, table: te.Tensor, out_shape: tuple[Dim, ...], *, length: int,
               step: int, start: int, positions: int, bins: int) -> te.Tensor:
    """(batch, frames, bins, 2) from ``signal`` (batch, samples) or (batch, samples, 1 or 2):
    frame f's samples f * step + start + p (p < positions), times the table's window, at
    positions start + p of a length-``length`` DFT; the first ``bins`` outputs."""
    if signal.dtype != "float32" or table.dtype != "float32":
        raise OpError(f"frames_fft: the C FFT kernel is float32 only, got {signal.dtype} and "
                      f"{table.dtype}")
    shape = dims(signal.shape)
    channels = int(shape[2]) if len(shape) == 3 else 1
    batch, frames = out_shape[0], out_shape[1]
    table_size = int(dims(table.shape)[0])

    def body(ins: list, outs: list) -> object:
        call = tir.call_extern(
            "int32", "ember_frames_fft", ins[0].data, ins[1].data, outs[0].data,
            tir.cast(batch, "int64"), tir.cast(frames, "int64"), tir.cast(shape[1], "int64"),
            tir.const(step, "int64"), channels, positions, start, length, bins,
            tir.const(table_size, "int64"), 1, header=HEADER)
        msg = ("signal.frames_fft: ember_frames_fft failed (a length without an FFT plan, a "
               "table of another size, or out of workspace memory)")
        return succeeds(call, msg)

    return te.extern(out_shape, [signal, table], body, name="T_frames_fft", dtype="float32",
                     tag="frames_fft")
