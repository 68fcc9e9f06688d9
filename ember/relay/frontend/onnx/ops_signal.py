"""Converters of the signal operators: DFT and STFT as products with constant cosine and
sine matrices (``nn.dense`` along the transformed axis), and the window and mel-filter
generators (HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix) as constants.

The lengths that fix these shapes (``dft_length``, the axis of DFT-20, STFT's frame step and
length, a window's size, the mel parameters) must be known when importing.

Complex tensors are ONNX's: a last axis of size 2 (real, imaginary), or 1 for a real signal.
DFT of length L over ``n`` samples (zero-padded or truncated to L)::

    forward:  Y[k] = sum_n x[n] exp(-2 pi i k n / L),  k < L (onesided: k <= L / 2)
    inverse:  y[n] = 1/L sum_k Y[k] exp(+2 pi i k n / L);  onesided inverse: the real signal
              whose spectrum is Y's Hermitian completion (numpy's irfft)
"""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import check_constant_size, norm_axis, scalar

_TWO_PI = 2.0 * np.pi
MIN_FFT_LENGTH = 32


def _known_int(node: Node, i: int, what: str, default: int | None = None) -> int | None:
    if not node.has_input(i):
        return default
    values = node.ints(i, what)
    if len(values) != 1:
        raise node.fail(f"{what} must hold one value, got {values}")
    return values[0]


def _parts(x: RelayExpr, size: int) -> tuple[RelayExpr, RelayExpr | None]:
    """(real, imaginary or None) of an ONNX complex tensor (last axis of size 1 or 2)."""
    real = _op.squeeze(_op.strided_slice(x, [0], [1], axes=[-1]), [-1])
    if size == 1:
        return real, None
    return real, _op.squeeze(_op.strided_slice(x, [1], [2], axes=[-1]), [-1])


def _dense(x: RelayExpr, matrix: np.ndarray, dtype: str) -> RelayExpr:
    """``x`` (..., n) @ ``matrix`` (n, k) along the last axis."""
    return _op.nn.dense(x, const(np.ascontiguousarray(matrix.T).astype(dtype)))


def dft_last_axis(real: RelayExpr, imag: RelayExpr | None, n: int, length: int,
                  inverse: bool, onesided: bool, dtype: str) -> tuple[RelayExpr, RelayExpr | None]:
    """The DFT of ``real + i imag`` (``n`` samples on the last axis) of length ``length``:
    (real, imaginary or None for the real output of a onesided inverse)."""
    if inverse and onesided:  # irfft: the input holds frequencies 0 .. length // 2
        used = min(n, length // 2 + 1)
        k = np.arange(used)[:, None]
        weight = np.where((k == 0) | ((length % 2 == 0) & (k == length // 2)), 1.0, 2.0)
        angle = _TWO_PI * k * np.arange(length)[None, :] / length
        out = _dense(_trim(real, n, used), weight * np.cos(angle) / length, dtype)
        if imag is not None:
            out = _op.subtract(out, _dense(_trim(imag, n, used), weight * np.sin(angle) / length,
                                           dtype))
        return out, None
    used = min(n, length)
    freqs = length // 2 + 1 if onesided else length
    angle = _TWO_PI * np.arange(used)[:, None] * np.arange(freqs)[None, :] / length
    scale, sign = (1.0 / length, 1.0) if inverse else (1.0, -1.0)
    cos, sin = np.cos(angle) * scale, sign * np.sin(angle) * scale
    real = _trim(real, n, used)
    out_r, out_i = _dense(real, cos, dtype), _dense(real, sin, dtype)
    if imag is not None:  # (a + ib)(cos + i sin) = a cos - b sin + i (a sin + b cos)
        imag = _trim(imag, n, used)
        out_r = _op.subtract(out_r, _dense(imag, sin, dtype))
        out_i = _op.add(out_i, _dense(imag, cos, dtype))
    return out_r, out_i


def dft_interleaved(real: RelayExpr, imag: RelayExpr | None, positions: np.ndarray,
                    length: int, onesided: bool, dtype: str, ndim: int,
                    weights: np.ndarray | None = None) -> RelayExpr:
    """The forward DFT of length ``length`` of ``real + i imag``, whose last axis holds the
    samples at ``positions`` (the others are 0), in ONNX's complex layout (..., freqs, 2): one
    product per input part with the cosine and sine columns interleaved (real, imaginary per
    frequency), so the result is a reshape of the product, not a stack of two. ``weights``:
    per-sample factors folded into the matrix (a constant window); ``ndim``: the rank of
    ``real``."""
    freqs = length // 2 + 1 if onesided else length
    angle = _TWO_PI * positions[:, None] * np.arange(freqs)[None, :] / length
    cos, sin = np.cos(angle), -np.sin(angle)  # e^{-i angle} = cos + i sin
    if weights is not None:
        cos, sin = cos * weights[:, None], sin * weights[:, None]
    # (a + ib)(cos + i sin) = (a cos - b sin) + i (a sin + b cos)
    out = _dense(real, np.stack([cos, sin], -1).reshape(len(positions), 2 * freqs), dtype)
    if imag is not None:
        out = _op.add(out, _dense(imag, np.stack([-sin, cos], -1).reshape(len(positions),
                                                                          2 * freqs), dtype))
    return _op.reshape(out, [0] * (ndim - 1) + [freqs, 2])


def _trim(x: RelayExpr, n: int, used: int) -> RelayExpr:
    return x if used == n else _op.strided_slice(x, [0], [used], axes=[-1])


def _complex(real: RelayExpr, imag: RelayExpr | None) -> RelayExpr:
    parts = [real] if imag is None else [real, imag]
    return _op.stack(parts, -1)


def dft(node: Node) -> RelayExpr:
    x, shape, dtype = node.input(0, "input"), node.shape(0), node.dtype(0)
    rank = len(shape)
    if rank < 2 or shape[-1] not in (1, 2) or not dtype.startswith("float"):
        raise node.fail(f"input must be a float tensor with a last axis of 1 (real) or 2 "
                        f"(complex) values, got {dtype}{list(shape)}")
    if node.version >= 20:
        axis = _known_int(node, 2, "axis", -2)
    else:
        axis = node.attr("axis", 1)
    axis = norm_axis(node, axis, rank)
    if axis == rank - 1:
        raise node.fail("axis must not be the last axis (it holds the real and imaginary parts)")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if onesided and not inverse and shape[-1] == 2:
        raise node.fail("onesided=1 needs a real input (last axis of size 1)")
    n = shape[axis]
    if not isinstance(n, int):
        raise node.unsupported(f"the transformed axis {axis} of input {list(shape)} has a size "
                               "known only at run time; the DFT's matrices need it at import "
                               "(other axes may be dynamic)")
    length = _known_int(node, 1, "dft_length", 2 * (n - 1) if inverse and onesided else n)
    if length is None or length < 1:
        raise node.fail(f"dft_length must be positive, got {length}")
    check_constant_size(node, (min(n, length), length), f"dft_length {length}")
    perm = [a for a in range(rank - 1) if a != axis] + [axis]
    back = [int(a) for a in np.argsort(perm)] + [rank - 1]
    lead = [shape[a] for a in perm[:-1]]
    if not inverse and _takes_fft(length, dtype) and (rank == 3 or all(
            isinstance(d, int) for d in lead)):
        # one frame per signal: (signals, n, 1 or 2) -> (signals, 1, bins, 2)
        signal = _op.transpose(x, perm + [rank - 1])
        if rank != 3:
            signal = _op.reshape(signal, [-1, n, shape[-1]])
        used = min(n, length)
        check_constant_size(node, (used + 2 * length,), f"dft_length {length}")
        out = _op.signal.frames_fft(signal, None, length=length, frame_length=n, step=1,
                                    positions=used, onesided=onesided)
        bins = length // 2 + 1 if onesided else length
        out = _op.reshape(out, [0, bins, 2] if rank == 3 else [*lead, bins, 2])
        return _op.transpose(out, back)
    real, imag = _parts(x, shape[-1])
    real = _op.transpose(real, perm)
    imag = None if imag is None else _op.transpose(imag, perm)
    if inverse:
        out = _complex(*dft_last_axis(real, imag, n, length, inverse, onesided, dtype))
    else:
        used = min(n, length)
        out = dft_interleaved(_trim(real, n, used), None if imag is None else
                              _trim(imag, n, used), np.arange(used), length, onesided, dtype,
                              rank - 1)
    return _op.transpose(out, back)


def stft(node: Node) -> RelayExpr:
    """Frames of ``frame_length`` every ``frame_step`` samples (gathered with one index
    table: a constant, or computed from a step known only at run time), times the window,
    each transformed: (batch, frames, bins, 2). The frame length must be known; the batch and
    the signal's length may be known only at run time (the frame count follows the length).
    A signal of shape [batch, length] is real: torch.onnx writes ``torch.stft``'s input so,
    and onnxruntime and ONNX's shape inference take it."""
    x, shape, dtype = node.input(0, "signal"), node.shape(0), node.dtype(0)
    flat = len(shape) == 2
    if flat:
        shape = (*shape, 1)
    if len(shape) != 3 or shape[-1] not in (1, 2):
        raise node.fail(f"signal must have shape [batch, length] or [batch, length, 1 or 2], "
                        f"got {list(shape)}")
    window = node.optional(2)
    size = node.static_shape(2, "window")[0] if window is not None else None
    length = _known_int(node, 3, "frame_length", size)
    total = shape[1] if isinstance(shape[1], int) else None
    if length is None or length < 1 or total is not None and length > total:
        raise node.fail(f"frame_length ({length}, or the window's size) must be in "
                        f"[1, {shape[1]}]")
    if size is not None and size != length:
        raise node.fail(f"the window has {size} values but frame_length is {length}")
    onesided = bool(node.attr("onesided", 1))
    if onesided and shape[-1] == 2:
        raise node.fail("onesided=1 needs a real signal (last axis of size 1)")
    # A constant window is folded into the DFT's matrix, and only the samples under its
    # nonzero span are gathered (torch.stft pads a window shorter than n_fft with zeros).
    weights = None if window is None else node.value(2)
    positions = np.arange(length)
    if weights is not None:
        weights = np.asarray(weights, dtype="float64").reshape(-1)
        nonzero = np.flatnonzero(weights)
        if len(nonzero):
            positions = np.arange(nonzero[0], nonzero[-1] + 1)
            weights = weights[positions]
    step = _known_step(node)
    if (window is None or weights is not None) and step is not None and \
            _takes_fft(length, dtype):
        check_constant_size(node, (len(positions) + 2 * length,), f"frame_length {length}")
        return _op.signal.frames_fft(
            x, weights, length=length, frame_length=length, step=step,
            start=int(positions[0]), positions=len(positions), onesided=onesided)
    freqs = length // 2 + 1 if onesided else length
    check_constant_size(node, (len(positions), 2 * freqs), f"frame_length {length}")
    index = _frame_index(node, x, total, length, positions)
    real, imag = (x, None) if flat else _parts(x, shape[-1])
    real = _op.take(real, index, axis=1)  # (batch, frames, positions)
    imag = None if imag is None else _op.take(imag, index, axis=1)
    if window is not None and weights is None:  # a window known only at run time
        real = _op.multiply(real, window)
        imag = None if imag is None else _op.multiply(imag, window)
    return dft_interleaved(real, imag, positions, length, onesided, dtype, 3, weights)


def _known_step(node: Node) -> int | None:
    """The STFT's frame_step when known at import (it must then be positive)."""
    known = node.value(1)
    step = None if known is None else int(np.asarray(known).reshape(-1)[0])
    if step is not None and step < 1:
        raise node.fail(f"frame_step must be positive, got {step}")
    return step


def _takes_fft(length: int, dtype: str) -> bool:
    """Whether a forward transform of ``length`` runs as an FFT (``signal.frames_fft``): a
    float32 one whose length has prime factors 2, 3 and 5 only, and not so short that the DFT
    matrix's product is as cheap."""
    return dtype == "float32" and length >= MIN_FFT_LENGTH and _op.signal.has_fft_plan(length)


def _frame_index(node: Node, signal: RelayExpr, total: int | None, length: int,
                 positions: np.ndarray) -> RelayExpr:
    """(frames, positions) int64 indices of each frame's samples at ``positions`` (within
    its ``length``): a constant when the signal's length (``total``) and the step are known,
    else computed at run time (no frame when the signal is shorter than one)."""
    offsets = positions.astype("int64")[None, :]
    step_value = _known_step(node)
    if step_value is not None and total is not None:
        frames = 1 + (total - length) // step_value
        check_constant_size(node, (frames, len(positions)), "the frame index table")
        return const(np.arange(frames, dtype="int64")[:, None] * step_value + offsets)
    i64 = "int64"
    if step_value is not None:
        step = scalar(step_value, i64)
    else:
        step = rt.int64(node, 1, "frame_step")
        step = rt.scalar(step) if node.ndim(1) else step
    samples = scalar(total, i64) if total is not None else rt.scalar(rt.dims_at(signal, [1]))
    if step_value is None:  # a step below 1 becomes 0, which arange rejects at run time
        step = _op.where(_op.greater(step, scalar(0, i64)), step, scalar(0, i64))
    # 1 + (samples - length) // step starts, none when the signal is shorter than a frame
    ends = _op.add(_op.subtract(samples, scalar(length, i64)), scalar(1, i64))
    starts = _op.arange(scalar(0, i64), ends, step, dtype=i64)
    return _op.add(_op.expand_dims(starts, 1), const(offsets))


# ---------------------------------------------------------------- generated constants
def _out_dtype(node: Node) -> str:
    from ._proto import dtype_of

    return dtype_of(node.attr("output_datatype", 1), f"{node.label}: output_datatype")


def _cosine_window(node: Node, a0: float, a1: float, a2: float = 0.0) -> RelayExpr:
    """a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n < size, N = size (periodic) or
    size - 1: a constant for a known size, else computed from arange(size) at run time."""
    periodic, dtype = bool(node.attr("periodic", 1)), _out_dtype(node)
    size = node.value(0)
    if size is not None:
        count = int(np.asarray(size).reshape(-1)[0])
        if count < 1:
            raise node.fail(f"size must be positive, got {count}")
        check_constant_size(node, (count,), f"size {count}")
        n, denom = np.arange(count, dtype="float64"), float(count if periodic else count - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            phase = _TWO_PI * n / denom if denom else np.zeros_like(n)
        return const((a0 - a1 * np.cos(phase) + a2 * np.cos(2 * phase)).astype(dtype))
    f64 = "float64"
    count = rt.int64(node, 0, "size")
    count = rt.scalar(count) if node.ndim(0) else count
    n = _op.cast(_op.arange(scalar(0, "int64"), count, scalar(1, "int64"), dtype="int64"), f64)
    denom = _op.cast(count if periodic else _op.subtract(count, scalar(1, "int64")), f64)
    phase = _op.divide(_op.multiply(n, scalar(_TWO_PI, f64)), denom)
    out = _op.subtract(scalar(a0, f64), _op.multiply(scalar(a1, f64), _op.cos(phase)))
    if a2:
        out = _op.add(out, _op.multiply(scalar(a2, f64),
                                        _op.cos(_op.multiply(phase, scalar(2.0, f64)))))
    return _op.cast(out, dtype)


def hann_window(node: Node) -> RelayExpr:
    return _cosine_window(node, 0.5, 0.5)


def hamming_window(node: Node) -> RelayExpr:
    return _cosine_window(node, 25.0 / 46.0, 21.0 / 46.0)


def blackman_window(node: Node) -> RelayExpr:
    return _cosine_window(node, 0.42, 0.5, 0.08)


def _mel_edges(node: Node, bins: int, dft_len: int, rate: int, lower: float, upper: float
               ) -> np.ndarray:
    """The DFT bins of the filters' edges (``bins + 2``, spaced evenly in mel). As
    onnxruntime, the first and last must be bins of the (dft_length // 2 + 1)-row result;
    lower > upper is allowed (the edges descend and every filter is empty)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        low, high = (2595.0 * np.log10(1.0 + f / 700.0) for f in (lower, upper))
        mel = np.arange(bins + 2) * (high - low) / (bins + 2) + low
        hz = 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
        edges = np.floor((dft_len + 1) * hz / rate)
    rows = dft_len // 2 + 1
    for which, value, edge in (("lower", lower, edges[0]), ("upper", upper, edges[-1])):
        if not (np.isfinite(edge) and 0 <= edge < rows):
            raise node.fail(f"{which}_edge_hertz {value:g} falls outside the {rows} DFT bins "
                            f"of dft_length {dft_len} at sample_rate {rate} (edges from 0 "
                            f"to below {rate * rows / (dft_len + 1):g} Hz fit)")
    return edges.astype(np.int64)


def mel_weight_matrix(node: Node) -> RelayExpr:
    """Triangular mel filters (dft_length // 2 + 1, num_mel_bins), as ONNX's reference."""
    bins, dft_len, rate = (_known_int(node, i, w) for i, w in
                           enumerate(("num_mel_bins", "dft_length", "sample_rate")))
    lower, upper = (float(node.const_value(i, w).reshape(-1)[0]) for i, w in
                    ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")))
    if not (bins and dft_len and rate) or bins < 1 or dft_len < 1 or rate < 1:
        raise node.fail(f"num_mel_bins ({bins}), dft_length ({dft_len}) and sample_rate "
                        f"({rate}) must be positive")
    check_constant_size(node, (dft_len // 2 + 1, bins), "the mel filters")
    edges = _mel_edges(node, bins, dft_len, rate, lower, upper)
    out = np.zeros((dft_len // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            out[center, i] = 1.0
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return const(out.astype(_out_dtype(node)))
