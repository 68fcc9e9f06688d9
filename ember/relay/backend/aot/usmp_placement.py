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
        for p, i in enumerate(self.order):
            self.pos[i] = p
        self.pool_of, self.offsets = [0] * n, [0] * n
        # used[p]: bytes per pool after the first p buffers of the order are placed
        self.used = [[0] * len(limits) for _ in range(n + 1)]
        self.placed = 0  # buffers of the order placed; < n when one fits nowhere
        self.replace_from(0)

    @property
    def failed(self) -> int | None:
        """The buffer that fits in no pool (its index), or None."""
        return None if self.placed == len(self.order) else self.order[self.placed]

    @property
    def cost(self) -> float:
        """Bytes of all pools together; infinite when a buffer fits nowhere."""
        return float("inf") if self.failed is not None else float(sum(self.used[-1]))

    def _fit(self, i: int) -> tuple[int, int] | None:
        """(pool, offset) for buffer ``i`` given the buffers before it in the order."""
        size, p = self.sizes[i], self.pos[i]
        busy: list[list[tuple[int, int]]] = [[] for _ in self.limits]
        for j in self.conflicts[i]:
            if self.pos[j] < p:
                busy[self.pool_of[j]].append((self.offsets[j], self.offsets[j] + self.sizes[j]))
        for k, limit in enumerate(self.limits):
            offset = 0
            for lo, hi in sorted(busy[k]):
                if offset + size <= lo:
                    break
                offset = max(offset, align_up(hi, self.alignment))
            if limit < 0 or offset + size <= limit:
                return k, offset
        return None

    def replace_from(self, start: int, give_up_above: float = float("inf")) -> bool:
        """Place the buffers at positions ``start``... again; False (and the tail left
        unplaced) once the pools together pass ``give_up_above`` bytes or a buffer fits
        nowhere."""
        for p in range(start, len(self.order)):
            i = self.order[p]
            where = self._fit(i)
            if where is None:
                self.placed = p
                return False
            k, offset = where
            self.pool_of[i], self.offsets[i] = k, offset
            used = list(self.used[p])
            used[k] = max(used[k], align_up(offset + self.sizes[i], self.alignment))
            self.used[p + 1] = used
            if sum(used) > give_up_above:
                self.placed = p
                return False
        self.placed = len(self.order)
        return True

    def try_swap(self, a: int, b: int, best: float) -> bool:
        """Swap positions ``a`` and ``b`` of the order and re-place; keep it (True) when the
        pools do not grow past ``best``, else restore the placement as it was."""
        if a == b:
            return self.cost <= best
        a, b = min(a, b), max(a, b)
        tail = self.order[a:]
        saved = ([self.pool_of[i] for i in tail], [self.offsets[i] for i in tail],
                 self.used[a + 1:], self.placed)
        self._swap(a, b)
        if self.replace_from(a, best) and self.cost <= best:
            return True
        self._swap(a, b)
        for i, k, off in zip(tail, saved[0], saved[1], strict=True):
            self.pool_of[i], self.offsets[i] = k, off
        self.used[a + 1:], self.placed = saved[2], saved[3]
        return False

    def _swap(self, a: int, b: int) -> None:
        order = self.order
        order[a], order[b] = order[b], order[a]
        self.pos[order[a]], self.pos[order[b]] = a, b


def hill_climb(placement: Placement, target: int, steps: int = HILL_CLIMB_STEPS) -> Placement:
    """Swap two buffers of the order (seeded: a model always gets the same plan), keep the
    swap when the pools do not grow; stop at ``target`` bytes (the lower bound)."""
    rng = random.Random(0)
    n = len(placement.order)
    best = placement.cost
    for _ in range(steps):
        if best <= target or n < 2:
            break
        a, b = rng.randrange(n), rng.randrange(n)
        if placement.try_swap(a, b, best):
            best = placement.cost
    return placement
