"""Which blocks of run-time size a plan may keep in one storage: those never live together.

The compiler shares bytes only between tensors of static shape (``ManifestAlloc``'s first-fit
arena); every tensor of symbolic shape gets a storage block of its own, so a plan grew one
buffer per intermediate. A CNN with a run-time height and width then worked over every
intermediate's bytes at once (squeezenet/hw at 80x72: 38 blocks, 1.7 MB, against the static
build's 9 storages, 0.73 MB, with a 512 KiB L2), and its memory-bound kernels (concats,
pools) ran up to 2x their static build's time.

Here the plan's dynamic blocks are partitioned by lifetime (the first to the last kernel call
that names one of its tensors, in the order the plan runs them): blocks whose lifetimes do not
overlap share a *slot*, one storage grown to the largest size any of them needs (sizes are
known only per run; the storage never shrinks, as a block's never did). Left out, each with
storage of its own: result blocks (taken per run), blocks the shape phase touches, and blocks
holding a value that a run reads outside the kernel calls (a size or shape computed by a
kernel from data, which a check reads later).

A slot is as large as its largest member, at every position of the run: where sizes differ
(a detector's 1/2, 1/4 ... 1/32 maps), the slots held several times the bytes live at once.
So the shared blocks are placed by :func:`packed_offsets` instead, at offsets in one storage,
as a static build's arena places its tensors (the largest first, each at the lowest offset
free over its lifetime), for the sizes of the signature that made them grow: a Paddle-style
text detector at 480x640 touched 108 MB of slots a run (its static build's arena: 51 MB),
and its memory-bound kernels ran 20-70% slower than the static build's same kernels.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .plan_walk import Block, Call, Tensor


def lifetimes(calls: Sequence[Call], order: Sequence[int], blocks: Iterable[Block],
              excluded: set[int], shape_reads: Iterable[Any],
              roots: dict[int, int] | None = None) -> dict[int, list[int]]:
    """Block index -> [first, last] position (in ``order``) of the kernel calls naming it,
    for the ``blocks`` that may share storage: those not in ``excluded`` (indices) nor
    holding one of ``shape_reads``, the tensors a run reads outside the calls (run-time
    shapes and sizes). ``roots``: the parts of concatenations made in place -> the block
    holding them (``plan_concat``): a call naming a part names that block, which lives as
    long as any of its parts."""
    roots = roots or {}
    candidates = {b.index for b in blocks if b.index not in excluded}
    candidates -= {t.base.index for t in shape_reads if type(t.base) is Block}
    span: dict[int, list[int]] = {}
    for pos, k in enumerate(order):
        for t in calls[k].args:
            if type(t.base) is not Block:
                continue
            index = roots.get(t.base.index, t.base.index)
            if index in candidates:
                first_last = span.setdefault(index, [pos, pos])
                first_last[1] = pos
    return span


def packed_offsets(span: dict[int, list[int]], sizes: dict[int, int], align: int = 64
                   ) -> tuple[dict[int, int], int]:
    """(block index -> byte offset, total bytes): the blocks of ``span`` (their lifetimes,
    :func:`lifetimes`) of ``sizes`` bytes in one storage, no two that are live together
    overlapping; the largest placed first, each at the lowest ``align``-ed offset free over
    its lifetime (the static arena's greedy-by-size rule)."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    offsets: dict[int, int] = {}
    for index in sorted(span, key=lambda i: (-sizes[i], span[i][0], i)):
        first, last = span[index]
        nbytes = -(-max(sizes[index], 1) // align) * align
        offset = 0
        for start, end, f, t in sorted(placed):
            if t < first or last < f:  # never live together: may overlap
                continue
            if offset + nbytes <= start:
                break
            offset = max(offset, end)
        placed.append((offset, offset + nbytes, first, last))
        offsets[index] = offset
    return offsets, max((end for _, end, _, _ in placed), default=0)


def shared_slots(calls: Sequence[Call], order: Sequence[int], blocks: Iterable[Block],
                 excluded: set[int], shape_reads: Iterable[Any],
                 roots: dict[int, int] | None = None) -> list[list[int]]:
    """The slots (lists of block indices, in lifetime order) of two blocks or more, for the
    ``blocks`` not in ``excluded`` (indices), over the kernel calls run in ``order``.
    ``shape_reads``: the tensors a run reads outside the calls (run-time shapes and sizes):
    a block holding one keeps storage of its own. ``roots``: as for :func:`lifetimes`."""
    span = lifetimes(calls, order, blocks, excluded, shape_reads, roots)
    # interval partitioning: each block, by start, joins the slot that freed up earliest
    # (strictly before it starts: a call reading one block and writing another keeps both)
    slots: list[tuple[int, list[int]]] = []  # (last call of the slot so far, its blocks)
    for index, (start, end) in sorted(span.items(), key=lambda kv: (kv[1][0], kv[0])):
        free = [j for j, (last, _) in enumerate(slots) if last < start]
        if free:
            j = min(free, key=lambda j: slots[j][0])
            slots[j] = (end, slots[j][1] + [index])
        else:
            slots.append((end, [index]))
    return [members for _, members in slots if len(members) > 1]


def shape_tensors(calls: Iterable[Call], blocks: Iterable[Block]) -> list[Tensor]:
    """The run-time shape and size tensors of the calls' tensors and of the blocks (what a
    run reads outside the kernel calls, besides the arguments)."""
    found = [t.shape for c in calls for t in c.args if type(t.shape) is not tuple]
    return found + [b.size for b in blocks if b.size is not None]


__all__ = ["lifetimes", "packed_offsets", "shape_tensors", "shared_slots"]
