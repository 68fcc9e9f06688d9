"""What a static plan reads from its walk: the result's blocks, the shape phase (the calls
that compute shapes from shapes, run first) and which checks it decides.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ndarray import NDArray
from .plan_walk import ArgShapes, Block, Call, Check, Tensor


def result_blocks(result: Any) -> dict[int, Tensor]:
    """Block index -> the result tensor it holds (one per block)."""
    fields = result.fields if type(result) is not Tensor else (result,)
    return {f.base.index: f for f in fields}


def shape_phase(calls: list[Call], blocks: list[Block], results: dict[int, Tensor]
                 ) -> tuple[set[int], list[Block]]:
    """(indices of the calls that may run first, the blocks they alone write): calls that
    read only constants, argument shapes and such blocks, and write only such blocks, where
    no two writes share bytes and, if a write's shape is a run-time one, every other reader
    of the block comes after its last writer
    (a value is also read where no call names it: by the checks, and by the kernels whose
    DLTensor shapes point at it, so it must stay until the run ends). Such calls compute
    shapes from shapes; running them first changes nothing any call sees."""
    writers: dict[int, list[int]] = {}
    readers: dict[int, list[int]] = {}
    written: dict[int, list[tuple[int, int]]] = {}  # block -> byte ranges written
    sized: set[int] = set()  # blocks written through a run-time shape (bytes unknown here)
    for k, call in enumerate(calls):
        split = len(call.args) - call.outputs
        for pos, t in enumerate(call.args):
            if type(t.base) is Block:
                (writers if pos >= split else readers).setdefault(t.base.index, []).append(k)
                if pos >= split and t.static:
                    end = t.offset + int(np.prod(t.shape, dtype=np.int64)) * \
                        t.dtype.numpy_dtype.itemsize
                    written.setdefault(t.base.index, []).append((t.offset, end))
                elif pos >= split:
                    sized.add(t.base.index)
    candidates = {b.index for b in blocks if b.size is None and b.index not in results
                  and b.index in writers and not _overlap(written.get(b.index, []))}
    while True:
        hoisted = {k for k, call in enumerate(calls) if _reads_writes_only(call, candidates)}
        # A kernel left in place may read such a block between its writers (a slice's ends
        # derived from shapes, read by the slice): where every byte has one static writer,
        # it reads the value it would have read in program order.
        keep = {i for i in candidates
                if all(w in hoisted for w in writers[i])
                and (i not in sized or
                     all(r in hoisted or r > max(writers[i]) for r in readers.get(i, ())))}
        if keep == candidates:
            return hoisted, [b for b in blocks if b.index in keep]
        candidates = keep


def _overlap(ranges: list[tuple[int, int]]) -> bool:
    """Whether two of the byte ranges ``[start, end)`` share a byte (a range written twice
    counts: its first value would not last)."""
    ranges = sorted(ranges)
    return any(b[0] < a[1] for a, b in zip(ranges, ranges[1:]))


def _reads_writes_only(call: Call, candidates: set[int]) -> bool:
    """Whether ``call`` reads only constants, argument shapes and ``candidates``' static
    tensors, and writes only the latter."""
    split = len(call.args) - call.outputs
    for pos, t in enumerate(call.args):
        base = t.base
        if pos < split and (type(base) is ArgShapes or type(base) is NDArray):
            continue
        if type(base) is not Block or base.index not in candidates or not t.static:
            return False
    return True


def sources_in(check: Check, early: set[int]) -> bool:
    """Whether every value ``check`` reads is known after the shape phase."""
    if check.kind == "size":
        tensors = [check.item.size]
    elif check.kind == "fit":
        tensors = [check.item.shape] + ([check.item.base.size] if check.item.base.size
                                        is not None else [])
    else:
        tensors = [x.shape for x in check.item if not x.static]
    return all(id(t.base) in early or type(t.base) is NDArray for t in tensors)


__all__ = ["result_blocks", "shape_phase", "sources_in"]
