"""Loop order of injective stages that transpose: the input's contiguous axis next to the
vector loop.

The injective schedule fuses an output's outer axes into one loop and vectorises its last
axis. When a large input is not contiguous along that last axis (an NHWC -> NCHW transpose:
the output's rows of W read the input every C floats), each vector lane loads from its own
cache line, and with the outer axes fused in output order the next iteration moves to
other lines: an NHWC -> NCHW copy of a (1, 80, 80, 64) map ran at 1.9x onnxruntime's time,
its reads coming from L2. :func:`transpose_order` finds, from the strides at which the
stage's large inputs are read, the output axis ``k`` they are contiguous along, and the
schedule runs ``k`` just outside the vector loop: the lines one vector loop gathers then
serve the next iterations of ``k`` (16 floats a line) from L1, and the writes stay
contiguous rows. A last axis too long for its lines to stay in L1 is tiled outside ``k``
(the cache-blocked transpose).

Strided loads (a C compiler builds the vector from scalar loads) cost less than strided
stores (scalar stores from the vector's lanes): running ``k`` innermost instead, reads
contiguous and writes strided, measured 1.5x slower on an NCHW -> NHWC copy (AVX-512) and no
faster on YOLO's detect decode, whose per-element sigmoid vectorises either way.

The stride of an output axis in a load is the change of the load's flat index when that axis
goes from 0 to 1 (the others 0): inlined reshapes read at ``i // 40`` and ``i % 40`` count
the stride of their first step. A stage whose last axis is (nearly) contiguous in some large
input, or whose ``k`` already is the axis just outside its last, keeps its plain schedule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..te.piecewise import piece_source, pieces_of
from ..te.reader_loads import reader_loads
from ..tir import op as _op
from ..tir.expr import IntImm, PrimExpr
from ..tir.functor import substitute
from ..tir.simplify import simplify

# elements: reads further apart than this along the last axis reorder the loops. At 16 (a
# line per element: an NCHW16c map copied back to NCHW) the lines come in order and the
# prefetcher streams them: yolov8n's head unblocking, reordered, ran 0.64-0.76x onnxruntime's
# time against 0.43x in output order (an isolated (1, 4, 6400, 16) copy ran faster reordered)
STRIDE_MIN = 16
DOMINANT = 8  # an input counts when it holds at least 1/DOMINANT of the output's elements
GATHER_LINES = 256  # cache lines one vector loop may gather and reuse from L1 (16 KiB)


@dataclass(frozen=True)
class TransposeOrder:
    """Run output axis ``axis`` just outside the last one, the last in tiles of ``tile``
    (None: whole)."""

    axis: int
    tile: int | None


def transpose_order(sch: Any, op: Any, lanes: int) -> TransposeOrder | None:
    """How to order the loops of the injective root stage ``op`` of ``sch`` so that the lines
    its large inputs are gathered from are reused (``lanes``: elements of a SIMD register);
    None to keep the plain order."""
    axes = list(op.axis)
    if len(axes) < 2:
        return None
    k = _transposes(sch, op, axes)
    if k is None:
        return None
    tile = _last_tile(axes[-1].dom.extent, lanes, _piece_bounds(sch, op, len(axes) - 1))
    if k == len(axes) - 2 and tile is None:
        return None  # already just outside the last axis
    return TransposeOrder(k, tile)


def _transposes(sch: Any, op: Any, axes: list[Any]) -> int | None:
    """The output axis (not the last) along which a large input is contiguous, when no
    large input is (nearly) contiguous along the last; else None."""
    loads = _dominant_loads(sch, op)
    if not loads:
        return None
    strides = [_strides(t, idx, axes) for t, idx in loads]
    last = len(axes) - 1
    if any(s[last] is not None and abs(s[last]) <= STRIDE_MIN for s in strides):
        return None  # some large input is read (nearly) in the output's order: keep it
    ks = [k for k in range(last) if any(s[k] == 1 for s in strides)
          and not (isinstance(axes[k].dom.extent, IntImm) and axes[k].dom.extent.value < 2)]
    return ks[-1] if ks else None


def _last_tile(ext: Any, lanes: int, bounds: list[int]) -> int | None:
    """The tile of a last axis of extent ``ext`` whose gathered lines stay in L1: None when
    all of it fits (or its extent is known only at run time); else the largest multiple of
    ``lanes`` within ``GATHER_LINES`` that divides it and the ``bounds`` of the pieces along
    it (no tail tests), or ``GATHER_LINES`` (a tested tail)."""
    if not isinstance(ext, IntImm) or ext.value <= GATHER_LINES:
        return None
    fits = [t for t in range(lanes, GATHER_LINES + 1, lanes)
            if all(b % t == 0 for b in (ext.value, *bounds))]
    return max(fits) if fits and max(fits) >= GATHER_LINES // 4 else GATHER_LINES


def _piece_bounds(sch: Any, op: Any, axis: int) -> list[int]:
    # where the pieces of a piecewise stage that ``op`` is lowered by start and end along
    # its ``axis`` (te/piecewise.py); each piece gets the stage's loops over its own box
    split = piece_source(sch, op)
    if split is None or split.axis != axis:
        return []
    pieces = pieces_of(split.source)
    return [b.value // split.factor for b in (*pieces.offsets, *pieces.extents)
            if isinstance(b, IntImm)]


def _dominant_loads(sch: Any, op: Any) -> list[tuple[Any, list[PrimExpr]]]:
    # The loads from memory (not of inlined stages) of tensors large next to the output;
    # a run-time size counts as large.
    out_n = static_numel(op.output(0).shape)
    seen, out = set(), []
    for t, idx in reader_loads(sch, op) or ():
        if sch[t.op].attach_type == "inline":
            continue
        n = static_numel(t.shape)
        if out_n is not None and n is not None and n * DOMINANT < out_n:
            continue
        key = (id(t), *map(str, idx))
        if key not in seen:
            seen.add(key)
            out.append((t, idx))
    return out


def _strides(t: Any, idx: list[PrimExpr], axes: list[Any]) -> list[int | None]:
    """Per output axis, the step of ``t``'s flat index from 0 to 1 of that axis (None where
    it is not a constant: a run-time size)."""
    flat: PrimExpr = _op.const(0)
    for i, d in zip(idx, t.shape):
        flat = flat * d + i
    zero = {iv.var: _op.const(0) for iv in axes}
    base = simplify(substitute(flat, zero))
    out: list[int | None] = []
    for iv in axes:
        step = simplify(substitute(flat, {**zero, iv.var: _op.const(1)}) - base)
        out.append(step.value if isinstance(step, IntImm) else None)
    return out


def static_numel(shape: Any) -> int | None:
    """The element count of ``shape``, None when an extent is not a constant."""
    n = 1
    for d in shape:
        if not isinstance(d, IntImm):
            return None
        n *= d.value
    return n
