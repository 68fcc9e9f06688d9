"""What a static plan reads from its walk: the result's blocks, the shape phase (the calls
that compute shapes from shapes, run first), the value phase (the calls that compute values
from shapes and constants, run once per signature) and which checks it decides.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ndarray import NDArray
from .plan_walk import Arg, ArgShapes, Block, Call, Check, Tensor


class ShapeOnly:
    """Argument ``index`` handed to a value-phase kernel that never reads its bytes (only its
    shape): its DLTensor's data points at the plan's arena, not at the argument, so the call
    does not depend on where this run's argument lives."""

    __slots__ = ("device", "index")

    def __init__(self, arg: Arg) -> None:
        self.index, self.device = arg.index, arg.device


def result_blocks(result: Any) -> dict[int, Tensor]:
    """Block index -> the result tensor it holds (one per block)."""
    fields = result.fields if type(result) is not Tensor else (result,)
    return {f.base.index: f for f in fields}


class Early:
    """What is known once the shape phase ran: the argument shapes, the blocks all of whose
    writers it runs (``full``: any tensor in them), and the byte ranges it writes in blocks
    that later calls write too (``partial``: block index -> ranges; ManifestAlloc keeps the
    shape functions' results side by side in one storage, and the shape functions after a
    size computed from data write there as well)."""

    __slots__ = ("full", "partial")

    def __init__(self, full: set[int], partial: dict[int, list[tuple[int, int]]]) -> None:
        self.full, self.partial = full, partial

    def holds(self, t: Tensor) -> bool:
        """Whether tensor ``t``'s value is known after the shape phase."""
        base = t.base
        if type(base) is ArgShapes:
            return True
        if type(base) is not Block:
            return False
        if base.index in self.full:
            return True
        ranges = self.partial.get(base.index)
        if not ranges or not t.static:
            return False
        end = t.offset + _nbytes(t)
        return any(lo <= t.offset and end <= hi for lo, hi in ranges)


def shape_phase(calls: list[Call], blocks: list[Block], results: dict[int, Tensor]
                 ) -> tuple[set[int], list[Block], Early]:
    """(indices of the calls that may run first, the blocks they write, what is known after
    them): calls that read only constants, argument shapes and bytes that such calls alone
    write, and write only such bytes, in blocks where every write has a static shape and no
    two writes share bytes (each byte has one writer; a value is also read where no call
    names it: by the checks, and by the kernels whose DLTensor shapes point at it, so it must
    stay until the run ends). Such calls compute shapes from shapes; running them first
    changes nothing any call sees. A block's bytes that later calls write (the shape
    functions after a kernel that computes a size from data) stay theirs: the block is then
    known in part (``Early.partial``)."""
    writer: dict[tuple[int, int, int], int] = {}  # (block, start, end) -> the call writing it
    ranges: dict[int, list[tuple[int, int]]] = {}
    sized: set[int] = set()  # blocks written through a run-time shape (bytes unknown here)
    for k, call in enumerate(calls):
        for t in call.args[len(call.args) - call.outputs:]:
            if type(t.base) is not Block:
                continue
            if t.static:
                span = (t.offset, t.offset + _nbytes(t))
                ranges.setdefault(t.base.index, []).append(span)
                writer[(t.base.index, *span)] = k
            else:
                sized.add(t.base.index)
    usable = {b.index for b in blocks if b.size is None and b.index not in results
              and b.index in ranges and b.index not in sized and not _overlap(ranges[b.index])}
    candidates = {r for r in writer if r[0] in usable}
    while True:
        hoisted = {k for k, call in enumerate(calls)
                   if _reads_writes_only(call, candidates, ranges)}
        keep = {r for r in candidates if writer[r] in hoisted}
        if keep == candidates:
            break
        candidates = keep
    held: dict[int, list[tuple[int, int]]] = {}
    for index, lo, hi in sorted(candidates):
        held.setdefault(index, []).append((lo, hi))
    full = {i for i, spans in held.items() if len(spans) == len(ranges[i])}
    early = Early(full, {i: spans for i, spans in held.items() if i not in full})
    return hoisted, [b for b in blocks if b.index in held], early


def value_phase(calls: list[Call], blocks: list[Block], results: dict[int, Tensor],
                shape_calls: set[int], early: Early, arena: set[int],
                value_kernels: dict[int, tuple[int, ...]]) -> tuple[list[int], set[int]]:
    """(the calls that may run once per signature, in order; the blocks they alone write):
    calls of a kernel in ``value_kernels`` (pure: ``relay/backend/vm/value_kernels.py``) that
    read only constants, argument shapes (an argument at a position the kernel reads only for
    its shape), what the shape phase computed (``early``) and such blocks, every tensor of a
    shape known after the shape phase, and write only such blocks (never one of the arena's,
    ``arena``: their indices). A block
    qualifies when it is no result, its size is known after the shape phase, and its bytes
    keep one value for the whole run: one write, or static writes that share no byte.
    Their values then depend only on the signature: a run at the signature they were made
    for reads what it would compute."""
    writers: dict[int, list[int]] = {}
    written: dict[int, list[tuple[int, int]]] = {}
    sized: set[int] = set()
    for k, call in enumerate(calls):
        split = len(call.args) - call.outputs
        for t in call.args[split:]:
            if type(t.base) is not Block:
                continue
            writers.setdefault(t.base.index, []).append(k)
            if t.static:
                end = t.offset + int(np.prod(t.shape, dtype=np.int64)) * \
                    t.dtype.numpy_dtype.itemsize
                written.setdefault(t.base.index, []).append((t.offset, end))
            else:
                sized.add(t.base.index)
    candidates = {
        b.index for b in blocks
        if b.index not in results and b.index not in arena and b.index in writers
        and (b.size is None or _known(b.size, early))
        and (len(writers[b.index]) == 1 if b.index in sized
             else not _overlap(written.get(b.index, [])))}
    todo = [k for k, call in enumerate(calls)
            if k not in shape_calls and call.kernel in value_kernels]
    while True:
        hoisted = [k for k in todo
                   if _reads_shapes_only(calls[k], candidates, early,
                                         value_kernels[calls[k].kernel])]
        keep = {i for i in candidates if all(w in hoisted for w in writers[i])}
        if keep == candidates:
            return hoisted, keep
        candidates = keep


def _known(t: Tensor, early: Early) -> bool:
    """Whether int64 tensor ``t`` (a shape or a size) is known after the shape phase."""
    return type(t.base) is NDArray or early.holds(t)


def _reads_shapes_only(call: Call, blocks: set[int], early: Early,
                       shape_only: tuple[int, ...]) -> bool:
    """Whether ``call`` reads only constants, ``blocks``, what the shape phase computed,
    argument shapes and arguments at positions in ``shape_only``, writes only ``blocks``,
    every shape known early."""
    split = len(call.args) - call.outputs
    for pos, t in enumerate(call.args):
        if not t.static and not _known(t.shape, early):
            return False
        base = t.base
        if pos < split and (type(base) is NDArray or type(base) is ArgShapes or
                            type(base) is Arg and pos in shape_only or early.holds(t)):
            continue
        if type(base) is not Block or base.index not in blocks:
            return False
    return True


def shape_only_args(call: Call, shape_only: tuple[int, ...]) -> Call:
    """``call`` with each argument at a position in ``shape_only`` handed as its shape alone
    (``ShapeOnly``)."""
    args = [t._replace(base=ShapeOnly(t.base)) if type(t.base) is Arg and pos in shape_only
            else t for pos, t in enumerate(call.args)]
    return call._replace(args=args)


def _overlap(ranges: list[tuple[int, int]]) -> bool:
    """Whether two of the byte ranges ``[start, end)`` share a byte (a range written twice
    counts: its first value would not last)."""
    ranges = sorted(ranges)
    return any(b[0] < a[1] for a, b in zip(ranges, ranges[1:]))


def _reads_writes_only(call: Call, candidates: set[tuple[int, int, int]],
                       ranges: dict[int, list[tuple[int, int]]]) -> bool:
    """Whether ``call`` reads only constants, argument shapes and static tensors inside the
    ``candidates`` (byte ranges: block, start, end), and writes only the latter."""
    split = len(call.args) - call.outputs
    for pos, t in enumerate(call.args):
        base = t.base
        if pos < split and (type(base) is ArgShapes or type(base) is NDArray):
            continue
        if type(base) is not Block or not t.static:
            return False
        start, end = t.offset, t.offset + _nbytes(t)
        if not any(lo <= start and end <= hi and (base.index, lo, hi) in candidates
                   for lo, hi in ranges.get(base.index, ())):
            return False
    return True


def _nbytes(t: Tensor) -> int:
    """The bytes of static tensor ``t``."""
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.numpy_dtype.itemsize


def sources_in(check: Check, early: Early) -> bool:
    """Whether every value ``check`` reads is known after the shape phase."""
    if check.kind == "size":
        tensors = [check.item.size]
    elif check.kind == "fit":
        tensors = [check.item.shape] + ([check.item.base.size] if check.item.base.size
                                        is not None else [])
    elif check.kind == "sum":
        tensors = [b.size for b in (check.item.out, *check.item.parts)]
    else:
        tensors = [x.shape for x in check.item if not x.static]
    return all(type(t.base) is NDArray or early.holds(t) for t in tensors)


__all__ = ["Early", "ShapeOnly", "result_blocks", "shape_only_args", "shape_phase", "sources_in",
           "value_phase"]
