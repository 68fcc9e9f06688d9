"""USMP placement: buffers put in pools in a given order, and hill climbing over that order.

``Placement`` holds one placement of every buffer (pool and byte offset) for an order. Each
buffer, in turn, goes to the first pool (in the candidate order) where it fits at the lowest
offset that overlaps none of the buffers placed before it in that pool and alive at the same
time. The buffers alive together are found once, by an interval sweep (``conflict_lists``), so
placing one buffer looks at its own conflicts only: O(c log c) for c conflicts, not a scan of
every placed buffer. A swap of two positions of the order re-places from the earlier one only
(the buffers before it keep their places) and stops as soon as the pools outgrow the best plan
so far; a rejected swap restores the saved tail. One hill-climbing step is thus about
``n * c log c`` at worst and usually far less, where the old planner re-placed every buffer
against every other (``n^2`` per step).
"""
from __future__ import annotations

import heapq
import random
from collections.abc import Sequence

HILL_CLIMB_STEPS = 1500


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def conflict_lists(intervals: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Per buffer, the others alive at some same step (inclusive intervals), by a sweep over
    the starts: a buffer conflicts with every earlier-starting one that has not ended."""
    out: list[list[int]] = [[] for _ in intervals]
    active: list[int] = []
    for i in sorted(range(len(intervals)), key=lambda b: intervals[b][0]):
        start = intervals[i][0]
        active = [j for j in active if intervals[j][1] >= start]
        for j in active:
            out[i].append(j)
            out[j].append(i)
        active.append(i)
    return out


class Placement:
    """A placement of buffers (``sizes``, alive over ``intervals``) in pools of ``limits``
    bytes (-1: no limit), pools tried in list order, for a given buffer order."""

    def __init__(self, order: Sequence[int], sizes: Sequence[int],
                 intervals: Sequence[tuple[int, int]], limits: Sequence[int], alignment: int,
                 conflicts: list[list[int]] | None = None) -> None:
        n = len(sizes)
        self.sizes, self.limits, self.alignment = sizes, list(limits), alignment
        self.conflicts = conflict_lists(intervals) if conflicts is None else conflicts
        self.order = list(order)
        self.pos = [0] * n
        self.pool_of, self.offsets, self.ends = [0] * n, [0] * n, [0] * n
        self.failed: int | None = None  # a buffer that fits in no pool (then the rest unplaced)
        self.place_all()

    def place_all(self) -> None:
        """Place every buffer in the order (a first fit each)."""
        for p, i in enumerate(self.order):
            self.pos[i] = p
        self.failed = None
        for i in self.order:
            where = self._fit(i)
            if where is None:
                self.failed = i
                return
            self._set(i, where)

    @property
    def used(self) -> list[int]:
        """Bytes per pool (the highest aligned end of a buffer placed in it)."""
        out = [0] * len(self.limits)
        for k, end in zip(self.pool_of, self.ends, strict=True):
            if end > out[k]:
                out[k] = end
        return out

    @property
    def cost(self) -> float:
        """Bytes of all pools together; infinite when a buffer fits nowhere."""
        return float("inf") if self.failed is not None else float(sum(self.used))

    def _set(self, i: int, where: tuple[int, int]) -> None:
        self.pool_of[i], self.offsets[i] = where
        self.ends[i] = align_up(where[1] + self.sizes[i], self.alignment)

    def _fit(self, i: int) -> tuple[int, int] | None:
        """(pool, offset) for buffer ``i`` given the buffers before it in the order."""
        size, p = self.sizes[i], self.pos[i]
        pos, pool_of, offsets, ends = self.pos, self.pool_of, self.offsets, self.ends
        earlier = [j for j in self.conflicts[i] if pos[j] < p]
        for k, limit in enumerate(self.limits):
            offset = 0
            # the ends are aligned already: the first gap that holds ``size`` is the offset
            for lo, hi in sorted([(offsets[j], ends[j]) for j in earlier if pool_of[j] == k]):
                if offset + size <= lo:
                    break
                if hi > offset:
                    offset = hi
            if limit < 0 or offset + size <= limit:
                return k, offset
        return None

    def try_swap(self, a: int, b: int, best: float) -> bool:
        """Swap positions ``a`` and ``b`` of the order and re-place what that changes; keep
        it (True) when the pools do not grow past ``best``, else restore the placement.

        Only buffers whose first fit may change are placed again, in order: the two swapped,
        those between them that the swapped ones held back or now land on, and the later
        conflicts that a moved buffer's old or new bytes reach (``_moves``)."""
        if self.failed is not None:
            raise ValueError("try_swap needs a complete placement")
        a, b = min(a, b), max(a, b)
        x, y = self.order[a], self.order[b]
        self._swap(a, b)
        # x now comes after the buffers between: those its region held back are dirty
        x_at = (self.pool_of[x], self.offsets[x])
        dirty = {a, b} | {self.pos[j] for j in self.conflicts[x]
                          if a < self.pos[j] < b and self._moves(j, x_at, (-1, 0), 0)}
        heap = sorted(dirty)
        changed: list[tuple[int, int, int]] = []  # (buffer, old pool, old offset)
        ok = True
        while heap:
            q = heapq.heappop(heap)
            i = self.order[q]
            where = self._fit(i)
            if where is None or (where[1] + self.sizes[i] > best):
                ok = False
                break
            old = (self.pool_of[i], self.offsets[i])
            if q == a:  # y now comes before the buffers between: those it lands on
                for j in self.conflicts[y]:
                    pj = self.pos[j]
                    if (a < pj < b and pj not in dirty
                            and self._moves(j, (len(self.limits), 0), where, self.sizes[y])):
                        dirty.add(pj)
                        heapq.heappush(heap, pj)
            if where != old:
                changed.append((i, *old))
                self._set(i, where)
                for j in self.conflicts[i]:
                    if (self.pos[j] > q and self.pos[j] not in dirty
                            and self._moves(j, old, where, self.sizes[i])):
                        dirty.add(self.pos[j])
                        heapq.heappush(heap, self.pos[j])
        if ok and self.cost <= best:
            return True
        for i, k, off in reversed(changed):
            self._set(i, (k, off))
        self._swap(a, b)
        return False

    def _moves(self, j: int, old: tuple[int, int], new: tuple[int, int], size: int) -> bool:
        """Whether a conflict of ``j`` placed before it, moving from ``old`` to ``new``
        (pool, offset; ``size`` bytes), can change ``j``'s first fit. Freed bytes matter below
        ``j`` in its pool, or in an earlier pool (which may now hold ``j``); taken bytes only
        where they overlap ``j`` (every gap below ``j`` was too small for it already)."""
        k = self.pool_of[j]
        if old[0] < k or (old[0] == k and old[1] < self.offsets[j]):
            return True
        return new[0] == k and new[1] < self.ends[j] and new[1] + size > self.offsets[j]

    def _swap(self, a: int, b: int) -> None:
        order = self.order
        order[a], order[b] = order[b], order[a]
        self.pos[order[a]], self.pos[order[b]] = a, b


def hill_climb(placement: Placement, target: int, steps: int = HILL_CLIMB_STEPS) -> Placement:
    """Swap two buffers of the order (seeded: a model always gets the same plan), keep the
    swap when the pools do not grow; stop at ``target`` bytes (the lower bound). While no
    order fits the pools, every swap is kept and the whole order placed again."""
    rng = random.Random(0)
    n = len(placement.order)
    best = placement.cost
    for _ in range(steps):
        if best <= target or n < 2:
            break
        a, b = rng.randrange(n), rng.randrange(n)
        if placement.failed is not None:
            placement._swap(a, b)
            placement.place_all()
            best = placement.cost
        elif placement.try_swap(a, b, best):
            best = placement.cost
    return placement
