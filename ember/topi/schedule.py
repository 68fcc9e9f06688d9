"""Schedule templates by pattern: injective, reduction, and the anchor templates' dispatcher.

- injective: inline every non-output injective stage; per output, fuse the outer axes into one
  parallel loop (when the tensor is big enough to pay for threads) and vectorise the last axis
  (with the axes before it when its rows are no multiple of the vector width and the reads
  stay contiguous: ``_contiguous_tail``); a stage that transposes runs the axis its input is
  contiguous along just outside the vector loop (``loop_order``).
- reduction: inline injective producers; each reduction at root, parallel over its fused outer
  (non-reduced) axes, reduction loops inside (contiguous ones fused into one row);
  elementwise consumers as injective outputs.
- anchors (dense, conv2d, batch_matmul, pools...): the op's own template, registered by tag,
  which also fuses a following elementwise/broadcast chain into its output loops.
"""
from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..runtime.dtype import DataType
from ..te import tensor as te
from ..te.schedule import Schedule, Stage, create_schedule
from ..te.reader_loads import reader_loads
from ..te.piecewise import piece_source
from ..tir.expr import FloorDiv, FloorMod, IntImm, ProducerLoad
from ..tir.functor import post_order
from ..tir.op import const
from ..tir.simd_reduce import row_stride
from ..tir.symbolic_steps import contiguous_steps
from .broadcast import BROADCAST, ELEMWISE, INJECTIVE
from .loop_order import TransposeOrder, static_numel, transpose_order

PARALLEL_MIN = 16384  # elements: below this a parallel region costs more than it saves
VECTOR_MIN = 4
FUSABLE = (ELEMWISE, BROADCAST)
# tag -> template(s, anchor_op, output_op or None)
ANCHORS: dict[str, Callable[[Schedule, Any, Any], None]] = {}


def register_anchor(tag: str) -> Callable:
    """Decorator: the schedule template for stages tagged ``tag``."""

    def deco(fn: Callable) -> Callable:
        ANCHORS[tag] = fn
        return fn
    return deco


PARALLEL_WORK = 1 << 18  # multiply-adds: below this one thread is faster than waking others


def work_of(op: Any) -> int:
    """Output elements x reduction length of a compute op (static dims; else large)."""
    n = _numel(op)
    if n is None:
        return PARALLEL_WORK
    for r in getattr(op, "reduce_axis", []):
        n *= r.dom.extent.value if isinstance(r.dom.extent, IntImm) else 64
    return n


def maybe_parallel(st: Stage, iv: Any, work: int) -> None:
    """Mark ``iv`` parallel when ``work`` is big enough to pay for waking threads."""
    if work >= PARALLEL_WORK:
        st.parallel(iv)


@functools.cache
def vector_bytes() -> int:
    """SIMD register width of the host in bytes (64 with AVX-512, else 32).

    ``EMBER_VECTOR_BYTES`` overrides it (tile choices, hence generated C, depend on it).
    """
    if os.environ.get("EMBER_VECTOR_BYTES"):
        return int(os.environ["EMBER_VECTOR_BYTES"])
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return 32
    return 64 if " avx512f" in flags else 32


def max_tile_rows(row_floats: int) -> int:
    """The most rows of ``row_floats`` float32 accumulators that the register file holds (16
    of 32 AVX-512 registers, 12 of 16 AVX2 ones): the tile of a run-time extent, whose last
    tile is guarded (``te.lower`` versions a tile computed inside its reader, so only the
    last one tests its columns)."""
    regs_per_row = max(1, row_floats * 4 // vector_bytes())
    return (16 if vector_bytes() == 64 else 12) // regs_per_row


def tile_rows(extent: int, row_floats: int) -> int:
    """Rows of a register tile whose rows are ``row_floats`` float32 accumulators wide.

    The largest divisor of ``extent`` (>= 4) that keeps the accumulators within the register
    file (16 of 32 AVX-512 registers, 12 of 16 AVX2 ones); else 4 with a guarded tail.
    """
    budget = max_tile_rows(row_floats)
    if extent <= budget and extent < 4:
        return extent
    for d in range(min(budget, extent), 3, -1):
        if extent % d == 0:
            return d
    return min(4, extent)


def _outs(outs: Any) -> list[te.Tensor]:
    return list(outs) if isinstance(outs, (list, tuple)) else [outs]


def _numel(t_or_op: Any) -> int | None:
    return static_numel(t_or_op.output(0).shape if hasattr(t_or_op, "output") else t_or_op.shape)


def is_injective(op: Any) -> bool:
    return isinstance(op, te.ComputeOp) and not op.reduce_axis and (
        op.tag in (ELEMWISE, BROADCAST, INJECTIVE, "") or op.tag.endswith("_unpack"))


def inline_injective(s: Schedule, keep: Sequence[Any] = ()) -> None:
    """Inline every injective compute stage except outputs, ``keep`` and the inputs of extern
    stages (a C kernel reads its operands from buffers)."""
    out_ids = {id(op) for op in s.outputs} | {id(op) for op in keep} | {
        id(t.op) for st in s.stages if isinstance(st.op, te.ExternOp) for t in st.op.inputs}
    for st in s.stages:
        if id(st.op) not in out_ids and is_injective(st.op):
            st.compute_inline()


def schedule_loops(st: Stage, vector_last: bool = True, sch: Schedule | None = None) -> Any:
    """Fuse all spatial axes but the last into one loop, parallel if big; vectorise the last
    (split by the block it reads memory in, when ``sch`` shows one: ``_inner_block``), merged
    with the axes before it when its rows leave scalar tails (``_contiguous_tail``).

    Returns the outermost loop.
    """
    axes = list(st.op.axis)
    if not axes:
        return None
    numel = _numel(st.op)
    big = numel is None or numel >= PARALLEL_MIN
    lanes = max(1, vector_bytes() // DataType(st.op.output(0).dtype).itemsize)
    merged = _contiguous_tail(sch, st.op, lanes) if sch is not None else 1
    if merged > 1:  # rows too short for whole vectors: one longer contiguous vector loop
        axes = axes[:-merged] + [st.fuse(*axes[-merged:])]
    last = axes[-1]
    if len(axes) == 1:
        ext = axes[0].dom.extent if merged == 1 else const(numel) if numel else None
        if big and (not isinstance(ext, IntImm) or ext.value >= 2 * 256):
            outer, inner = st.split(last, 256)
            st.parallel(outer)
            st.vectorize(inner)
            return outer
        if vector_last:
            st.vectorize(last)
        return last
    order = transpose_order(sch, st.op, lanes) if sch is not None and merged == 1 else None
    if order is not None:
        return _transposed_loops(st, order, big, vector_last)
    outer = _fusable(axes[:-1])
    block = _inner_block(sch, st, last) if sch is not None and merged == 1 else 0
    if _symbolic_head(outer):
        # a run-time batch before static axes: its own loop, the static ones fused inside
        # (their index splits by constants over a range the simplifier knows, and a piece of
        # a concat is then one contiguous run per batch item, not a division chain per
        # vector: SqueezeNet's fire concats at a ? batch ran 2-5x its static build's). The
        # C generator still runs the pair as one launch (codegen_parallel.collapsed_nest).
        outer = _fusable(outer[1:])
    fused = st.fuse(*outer) if len(outer) > 1 else outer[0]
    if big:
        st.parallel(fused)
    short = merged == 1 and isinstance(last.dom.extent, IntImm) and \
        last.dom.extent.value < VECTOR_MIN
    if block:
        last = st.split(last, block)[1]
    if vector_last and not short:
        st.vectorize(last)
    return fused


MERGE_MAX = 1024  # elements: a merged vector loop this long leaves tails on 1/64 of the work


def _contiguous_tail(sch: Schedule, op: Any, lanes: int) -> int:
    """How many trailing axes of the injective root stage ``op`` to run as one vector loop
    (1: the last alone). A last axis of static extent that is not a multiple of ``lanes``
    leaves a scalar tail per row (a (1, 256, 7, 7) tanh was all tail: 4.9x onnxruntime's
    time); the axes before it merge into its loop while every load from memory stays
    contiguous (stride 1) or invariant (stride 0) in the merged index, which keeps the loads
    plain vectors, while the merged extent is still not a multiple of ``lanes`` or stays
    within ``MERGE_MAX`` elements (all axes merged: the stage is one flat loop). Piecewise
    stages (a concatenation) keep their loops: their pieces split an axis.

    A last axis of run-time extent (a width or a sequence length) may leave a tail on any
    row, so the axes before it merge while the loads stay contiguous or invariant alone
    (``contiguous_steps``; the simplifier then folds ``(c * h + f // w) * w + f % w`` to
    ``c * h * w + f``): the tail comes once per merged run, not once per row (the width-37
    OCR classifier's (1, C, H, ?) maps ran rows of 10 floats, all tail)."""
    axes = list(op.axis)
    if len(axes) < 2 or piece_source(sch, op) is not None:
        return 1
    last = axes[-1].dom.extent
    static = isinstance(last, IntImm)
    if static and last.value % lanes == 0:
        return 1
    loads = reader_loads(sch, op)
    if loads is None:
        return 1
    loads = [(t, idx) for t, idx in loads if sch[t.op].attach_type != "inline"]
    merged, size = 1, last.value if static else 0
    while merged < len(axes):
        ext = axes[-merged - 1].dom.extent
        if static and not (isinstance(ext, IntImm)
                           and (size % lanes or size * ext.value <= MERGE_MAX)):
            break
        if not all(_contiguous_in(t, idx, axes[-merged - 1:]) for t, idx in loads):
            break
        merged += 1
        size = size * ext.value if static else 0
    return merged


def _contiguous_in(t: te.Tensor, idx: list[Any], group: list[Any]) -> bool:
    """Whether ``t`` read at ``idx`` is contiguous (or invariant) along the axes ``group``
    fused into one index (outermost first): its flat index is affine in
    each with constant steps, the last's 0 or 1, each other's the next one's times that
    one's extent (a reshape's ``i // 40`` is not affine: it stays out)."""
    flat: Any = const(0)
    for i, d in zip(idx, t.shape):
        flat = flat * d + i
    # an axis of extent 1 (squeezed or expanded) adds nothing to the fused index
    group = [iv for iv in group if not (isinstance(iv.dom.extent, IntImm)
                                        and iv.dom.extent.value == 1)] or group[-1:]
    if not all(isinstance(iv.dom.extent, IntImm) for iv in group):
        return contiguous_steps(flat, [(iv.var, iv.dom.extent) for iv in group])
    steps = [row_stride(flat, iv.var) for iv in group]
    if any(st is None for st in steps) or steps[-1] not in (0, 1):
        return False
    return all(steps[k] == steps[k + 1] * group[k + 1].dom.extent.value
               for k in range(len(group) - 1))


def _transposed_loops(st: Stage, order: TransposeOrder, big: bool, vector_last: bool) -> Any:
    """The loops of a stage that transposes (``loop_order``): the last axis (its tile)
    vectorised, axis ``order.axis`` just outside it, the other axes (and the last axis'
    tiles) outside those, the leading ones fused into the parallel loop."""
    axes = list(st.op.axis)
    k, last = axes[order.axis], axes[-1]
    rest = axes[:order.axis] + axes[order.axis + 1:-1]
    extents = [a.dom.extent for a in rest]
    if order.tile is not None:
        last_outer, last = st.split(last, order.tile)
        rest.append(last_outer)
        extents.append(const(-(-axes[-1].dom.extent.value // order.tile)))
    st.reorder(*rest, k, last)
    # ``k`` may join the parallel loop too (its iterations stay consecutive in a task)
    outer = _fusable([*rest, k], [*extents, k.dom.extent])
    fused = st.fuse(*outer) if len(outer) > 1 else outer[0]
    if big:
        st.parallel(fused)
    ext = axes[-1].dom.extent
    short = order.tile is None and isinstance(ext, IntImm) and ext.value < VECTOR_MIN
    if vector_last and not short:
        st.vectorize(last)
    return fused


def _inner_block(sch: Schedule, st: Stage, last: Any) -> int:
    """The block ``B`` to split the last axis by, so that the vector loop is contiguous: a
    stage that reads memory at ``last // B`` or ``last % B`` (through its inlined stages: a
    blocked NCHW8c map read as tokens, ``x[c // 8, hw, c % 8]``, whose lanes change block
    every 8 channels) gets an inner loop of ``B`` where both are plain (``o`` and ``i``);
    0 when no such ``B`` divides the axis's static extent."""
    ext = last.dom.extent
    if not isinstance(ext, IntImm) or not _divides_by_constants(sch, st.op):
        return 0
    loads = reader_loads(sch, st.op) or ()
    blocks = {n.b.value for t, idx in loads if sch[t.op].attach_type != "inline"
              for i in idx for n in post_order(i)
              if isinstance(n, (FloorDiv, FloorMod)) and isinstance(n.b, IntImm)
              and any(v is last.var for v in post_order(n.a))}
    fits = [b for b in blocks if VECTOR_MIN <= b < ext.value and ext.value % b == 0]
    return fits[0] if len(fits) == 1 else 0


def _divides_by_constants(sch: Schedule, op: Any) -> bool:
    # Whether ``op`` or a stage inlined into it divides by a constant anywhere: a cheap
    # look (each body once, nothing substituted) that spares most kernels the full walk.
    stack, seen = [op], {id(op)}
    while stack:
        cur = stack.pop()
        for n in (n for b in getattr(cur, "body", ()) for n in post_order(b)):
            if isinstance(n, (FloorDiv, FloorMod)) and isinstance(n.b, IntImm):
                return True
            if isinstance(n, ProducerLoad):
                t = sch.current(n.producer)
                if id(t.op) not in seen and sch[t.op].attach_type == "inline":
                    seen.add(id(t.op))
                    stack.append(t.op)
    return False


FUSED_ENOUGH = 1024  # iterations of the fused parallel loop that split evenly over threads


def _symbolic_head(axes: list[Any]) -> bool:
    """Whether the loops to fuse start with one of a run-time extent followed by static ones
    whose product is worth a parallel loop of their own (at least 2 iterations)."""
    if len(axes) < 2 or isinstance(axes[0].dom.extent, IntImm):
        return False
    return all(isinstance(a.dom.extent, IntImm) for a in axes[1:]) and \
        math.prod(a.dom.extent.value for a in axes[1:]) >= 2


def _fusable(axes: list[Any], extents: list[Any] | None = None) -> list[Any]:
    """The leading ``axes`` to fuse into one loop: up to the first one (after the first) of a
    run-time extent, and no further once the fused loop has ``FUSED_ENOUGH`` iterations.
    Splitting a fused index again costs a division by each inner extent per iteration, by a
    constant (a multiply) when static, a real division when it is not: the head-split
    transposes of a transformer with a run-time sequence length ran 2x slower fused than as
    nested loops (whose indices need no division); a blocked (1, 8, 320, 320, 8) map with all
    four outer axes fused paid six divisions per 8-float vector (DBNet's transposed-conv
    interleave and 2x nearest upsampling: about 2x the time of the same copy with the
    columns as a nested loop). A narrow parallel loop stopped by a run-time axis shares out
    with that axis' loop all the same: the C generator collapses the pair into one launch
    (codegen_parallel.collapsed_nest)."""
    extents = extents or [a.dom.extent for a in axes]  # (a split's loops have no dom)
    n, fused = 1, extents[0].value if isinstance(extents[0], IntImm) else 0  # 0: not known
    while n < len(axes) and isinstance(extents[n], IntImm) and fused < FUSED_ENOUGH:
        fused = fused * extents[n].value if fused else 0
        n += 1
    return axes[:n]


def schedule_injective(outs: Any) -> Schedule:
    """Inline producers, parallelise the outer loop and vectorise the inner one of each output."""
    outs = _outs(outs)
    s = create_schedule([o.op for o in outs])
    inline_injective(s)
    for st in list(s.stages):  # (a reduction split over threads adds a stage it schedules)
        if st.attach_type == "root" and isinstance(st.op, te.ComputeOp):
            schedule_root(st, s)
    return s


def schedule_reduce_stage(st: Stage, sch: Schedule | None = None) -> None:
    """Parallel over the fused outer axes of a reduction; reduction loops stay inside, the
    trailing ones fused into one when the stage reads memory contiguously along them (a max
    over a whole (64, 56, 56) map is one row of 200704 for the C emitter's vector
    reduction, not 3584 rows of 56: ``simd_reduce``)."""
    axes = list(st.op.axis)
    numel = _numel(st.op)
    red = 1
    for r in st.op.reduce_axis:
        red *= r.dom.extent.value if isinstance(r.dom.extent, IntImm) else 64
    if sch is not None and _split_over_threads(sch, st):
        return
    merged = _contiguous_reduction(sch, st.op) if sch is not None else 1
    if merged > 1:
        st.fuse(*list(st.op.reduce_axis)[-merged:])
    if not axes:
        return
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    if numel is None or (numel > 1 and numel * red >= PARALLEL_WORK):
        st.parallel(fused)


SPLIT_MIN = 1 << 18  # elements of a reduction row worth splitting over threads
SPLIT_OUTPUTS = 4  # at most this many rows: more run in parallel as they are
SPLIT_CHUNKS = 16  # partial results of a split row (fixed: results do not depend on threads)


def _split_over_threads(sch: Schedule, st: Stage) -> bool:
    """Split a reduction of at most ``SPLIT_OUTPUTS`` long rows (a max or sum over a whole
    map) over threads: ``rfactor`` over the outer part of its first reduce axis of at least
    ``SPLIT_CHUNKS`` (split by the largest divisor up to that, at least 4: no guard) gives
    that many partial results computed in parallel, which the stage then reduces. Static
    single-value reductions only; the partial stage is scheduled here. Returns whether it
    split."""
    op = st.op
    numel = _numel(op)
    red = op.body[0] if len(op.body) == 1 else None
    if numel is None or numel > SPLIT_OUTPUTS or getattr(red, "init", True) or \
            not all(isinstance(r.dom.extent, IntImm) for r in op.reduce_axis) or \
            math.prod(r.dom.extent.value for r in op.reduce_axis) < SPLIT_MIN:
        return False
    for r in op.reduce_axis:
        ext = r.dom.extent.value
        chunks = next((d for d in range(min(SPLIT_CHUNKS, ext), 3, -1) if ext % d == 0), 0)
        if chunks:
            break
    else:
        return False
    outer, _ = st.split(r, nparts=chunks)
    partial = sch.rfactor(op.output(0), outer)
    schedule_reduce_stage(sch[partial], sch)  # the stage itself: serial over the partials
    return True


def _contiguous_reduction(sch: Schedule, op: Any) -> int:
    """How many trailing reduction axes of ``op`` to fuse: while every load from memory
    stays contiguous or invariant in their fused index (static extents only)."""
    raxes = list(op.reduce_axis)
    loads = reader_loads(sch, op) if len(raxes) > 1 else None
    if loads is None or not all(isinstance(r.dom.extent, IntImm) for r in raxes):
        return 1
    loads = [(t, idx) for t, idx in loads if sch[t.op].attach_type != "inline"]
    merged = 1
    while merged < len(raxes) and all(
            _contiguous_in(t, idx, raxes[-merged - 1:]) for t, idx in loads):
        merged += 1
    return merged


def schedule_root(st: Stage, sch: Schedule | None = None) -> None:
    """The default schedule of a stage computed at root: a reduction's or plain loops'."""
    if st.op.reduce_axis:
        schedule_reduce_stage(st, sch)
    else:
        schedule_loops(st, sch=sch)


def schedule_reduce(outs: Any) -> Schedule:
    """Schedule for graphs whose heavy part is a reduction (see module docstring)."""
    return schedule_injective(outs)


def _anchor_stage(s: Schedule) -> Stage | None:
    for st in s.stages:
        if st.op.tag in ANCHORS:
            return st
    return None


def fusable_chain(s: Schedule, anchor_out: Any, out_op: Any) -> bool:
    """True when ``out_op`` is ``anchor_out`` or an elementwise/broadcast chain over it with
    the same shape (so the anchor's tiling applies to the output loops)."""
    if out_op is anchor_out:
        return True
    if not isinstance(out_op, te.ComputeOp) or out_op.reduce_axis:
        return False
    a_shape = [str(d) for d in anchor_out.output(0).shape]
    if [str(d) for d in out_op.output(0).shape] != a_shape:
        return False
    seen, stack = set(), [out_op]
    while stack:
        op = stack.pop()
        if op is anchor_out or id(op) in seen:
            continue
        seen.add(id(op))
        if not isinstance(op, te.ComputeOp):
            continue
        if op.tag not in FUSABLE and op is not out_op:
            if op.tag.endswith("_unpack"):
                continue
            return False
        if op.tag not in FUSABLE and op.tag != "":
            return False
        stack.extend(t.op for t in op.input_tensors)
    return True


def auto_schedule(outs: Any) -> Schedule:
    """The schedule for a fused group: the anchor's template if there is one, else by pattern."""
    outs = _outs(outs)
    s = create_schedule([o.op for o in outs])
    anchor = _anchor_stage(s)
    if anchor is None:
        return schedule_injective(outs)
    ANCHORS[anchor.op.tag](s, anchor.op, outs[0].op if len(outs) == 1 else None)
    for st in s.stages:  # anything the template left at root without a schedule
        if st.attach_type == "root" and isinstance(st.op, te.ComputeOp) and not (
                st.relations or st.iter_var_attrs):
            schedule_root(st, s)
    return s
