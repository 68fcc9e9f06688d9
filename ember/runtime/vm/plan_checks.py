"""The checks a static plan makes before its kernels use what the shape phase computed.

A block's run-time size must lie in [what its static tensors need, the allocator's bound]; a
tensor of run-time shape must fit in its block; a reshape must keep the element count; the
parts of a concatenation made in place (``plan_concat``) must have the output's size in all
(else an error naming it: the parts would overlap other bytes).
:class:`Checks` holds those of one point of a run and the blocks they size; where every value
they read is an int64 of the plan's arena (the shape phase's checks, as a rule), a
:class:`VectorChecks` makes them over the arena read once, with precomputed indices. That form is
also what ``plan_native`` encodes as the check program C runs (its checked fallback).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InternalError
from .plan_walk import Check, Tensor

if TYPE_CHECKING:
    from .plan_concat import Concat
    from .static_plan import StaticPlan


class Checks:
    """The checks made at one point of a run, and the blocks they size. Where every value
    they read lives in the arena (the shape phase's checks, as a rule), they are vectorised:
    a few numpy operations whatever their number."""

    def __init__(self, plan: StaticPlan, checks: list[Check]) -> None:
        self.plan, self.checks = plan, checks
        self.sized = [c.item for c in checks if c.kind == "size"]
        self.fits = [c.item for c in checks if c.kind == "fit"]
        self.counts = [c.item for c in checks if c.kind == "count"]
        self.sums = [c.item for c in checks if c.kind == "sum"]
        self.vector = VectorChecks(plan, self) if _in_arena(plan, self) else None

    def run(self) -> bool:
        sizes = self.sizes()
        if sizes is None:
            return False
        self.place(sizes)
        return True

    def sizes(self) -> dict[int, int] | None:
        """This run's size of each block it sizes, if every check holds; else None."""
        if self.vector is not None:
            return self.vector.sizes()
        plan = self.plan
        sizes = {b.index: int(plan.value(b.size)[0]) for b in self.sized}
        for b in self.sized:
            if not b.min_bytes <= sizes[b.index] <= plan._allocator.max_block_bytes:
                return None
        for t in self.fits:
            dims = plan.value(t.shape)
            room = sizes.get(t.base.index, plan._size.get(t.base.index, t.base.nbytes))
            if (dims < 0).any() or t.offset + float(np.prod(dims, dtype=np.float64)) * \
                    t.dtype.numpy_dtype.itemsize > room:
                return None
        for src, out in self.counts:
            n = [np.prod(x.shape if x.static else plan.value(x.shape), dtype=np.float64)
                 for x in (src, out)]
            if n[0] != n[1] or (not out.static and (plan.value(out.shape) < 0).any()):
                return None
        for concat in self.sums:
            parts = [int(plan.value(p.size)[0]) for p in concat.parts]
            _sum_holds(concat, parts, int(plan.value(concat.out.size)[0]))
        return sizes

    def place(self, sizes: dict[int, int], seen: bool = False, take_results: bool = True
              ) -> None:
        """Result blocks taken for this run (if ``take_results``); other dynamic blocks grown
        if too small (not for sizes ``seen`` before: blocks never shrink)."""
        plan = self.plan
        plan._size.update(sizes)
        for b in self.sized:
            k = plan._result_index.get(b.index)
            if k is not None:
                if take_results:
                    plan._take_result(k, sizes[b.index])
            elif not seen and b.index not in plan._roots and \
                    sizes[b.index] > plan._capacity.get(b.index, -1):
                plan._grow(b, sizes[b.index])  # (a concatenation's part lies in its output)
        if plan._aliases:
            plan._realias()


class VectorChecks:
    """``Checks.sizes`` over the arena read once as Python ints: the arena index of every
    value read is gathered when the plan is made. (These are a few dozen small values:
    numpy operations on them cost ~1 us each, more than the arithmetic; Python ints are also
    exact where a product of extents overflows int64.)"""

    def __init__(self, plan: StaticPlan, checks: Checks) -> None:
        self.plan, self.blocks = plan, [b.index for b in checks.sized]
        self.size_at = [slot(plan, b.size) for b in checks.sized]
        self.mins = [b.min_bytes for b in checks.sized]
        position = {b: k for k, b in enumerate(self.blocks)}
        # fits: (arena indices of the shape, offset, item size, where the block's size is:
        # its position among those sized here, else -2 - the arena index of a size checked
        # earlier (a block sized by the shape phase, a tensor shaped from data), else -1 and
        # the block's static size)
        self.fits = [(_indices(plan, t.shape), t.offset, t.dtype.numpy_dtype.itemsize,
                      _room_at(plan, t, position), t.base.nbytes)
                     for t in checks.fits if t.ndim]
        # counts: per side, a constant element count or the arena indices of a run-time shape
        self.counts = [tuple(_count_side(plan, x) for x in pair) for pair in checks.counts]
        # sums: (the output's size, the parts', their concatenation), arena indices
        self.sums = [(slot(plan, c.out.size), [slot(plan, p.size) for p in c.parts], c)
                     for c in checks.sums]
        read = self.size_at + [i for f in self.fits for i in f[0]]
        read += [i for out, parts, _ in self.sums for i in [out, *parts]]
        read += [-2 - f[3] for f in self.fits if f[3] <= -2]
        read += [i for pair in self.counts for side in pair if type(side) is tuple
                 for i in side]
        self.end = max(read, default=-1) + 1

    def sizes(self) -> dict[int, int] | None:
        a = self.plan._arena_i64[:self.end].tolist()
        max_bytes = self.plan._allocator.max_block_bytes
        sizes = [a[i] for i in self.size_at]
        for size, least in zip(sizes, self.mins):
            if not least <= size <= max_bytes:
                return None
        for at, offset, item, pos, room in self.fits:
            n = _product(a, at)
            room = sizes[pos] if pos >= 0 else a[-2 - pos] if pos <= -2 else room
            if n is None or offset + n * item > room:
                return None
        for src, out in self.counts:
            n = [side if type(side) is int else _product(a, side) for side in (src, out)]
            if n[0] is None or n[1] is None or n[0] != n[1]:
                return None
        for out, parts, concat in self.sums:
            _sum_holds(concat, [a[i] for i in parts], a[out])
        return dict(zip(self.blocks, sizes))


def _sum_holds(concat: Concat, parts: list[int], out: int) -> None:
    """Raise unless the parts of ``concat`` (their sizes this run) fill its output exactly."""
    if sum(parts) != out:
        raise InternalError(
            f"VM plan: the parts of concatenation {concat.name} (call {concat.call}) have "
            f"{' + '.join(map(str, parts))} bytes, its output {out}: its shape functions "
            "disagree, and writing the parts in place would overlap other tensors")


def _room_at(plan: StaticPlan, t: Tensor, position: dict[int, int]) -> int:
    """Where the size of fitted tensor ``t``'s block is (``VectorChecks.fits``)."""
    if t.base.index in position:
        return position[t.base.index]
    if t.base.size is None:
        return -1
    first = slot(plan, t.base.size)
    assert first is not None, "_in_arena checked this"
    return -2 - first


def _indices(plan: StaticPlan, t: Tensor) -> tuple[int, ...]:
    """The arena indices of the int64 values of ``t`` (a shape held in the arena)."""
    first = slot(plan, t)
    assert first is not None, "_in_arena checked this"
    return tuple(range(first, first + t.shape[0]))


def _count_side(plan: StaticPlan, x: Tensor) -> int | tuple[int, ...]:
    """A reshape's side as its element count (static) or its shape's arena indices."""
    if x.static:
        return math.prod(x.shape)
    return _indices(plan, x.shape) if x.ndim else 1


def _product(a: list[int], at: tuple[int, ...]) -> int | None:
    """The product of the values at ``at``; None if one is negative."""
    n = 1
    for i in at:
        if a[i] < 0:
            return None
        n *= a[i]
    return n


def _in_arena(plan: StaticPlan, checks: Checks) -> bool:
    """Whether every value ``checks`` reads is an aligned int64 of the arena."""
    held = [b.size for b in checks.sized] + [t.shape for t in checks.fits]
    held += [t.base.size for t in checks.fits if t.base.size is not None]
    held += [x.shape for pair in checks.counts for x in pair if not x.static]
    held += [b.size for c in checks.sums for b in (c.out, *c.parts)]
    return bool(held) and all(slot(plan, t) is not None for t in held)


def slot(plan: StaticPlan, t: Tensor) -> int | None:
    """The index of ``t``'s first value in the arena's int64 view, None if not there."""
    where = plan._where.get(id(t.base))
    if where is None or (where + t.offset) % 8:
        return None
    return (where + t.offset) // 8


__all__ = ["Checks", "VectorChecks", "slot"]
