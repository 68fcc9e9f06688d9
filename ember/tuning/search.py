"""The measured tile search for one kernel call: the cost model's tiles and a small
neighbourhood around them, each timed on the harness and checked against the cost model's
output.

The search is coordinate descent: for each axis in turn (GEMM: ``mc``, ``kc``, threads on/off;
conv: the register tile ``rb`` x ``rw``, the loop order, the strip width, threads on/off;
depthwise conv: the strip width, threads on/off) the
values of that axis are tried with the other fields at the best tiles so far, and the axes are
gone over again while that finds better tiles (at most ``ROUNDS`` times). A candidate
replaces the best only when it is at least ``MIN_GAIN`` faster (timer noise would otherwise
pick a different tile each run), and only when its output equals the cost model's (allclose):
a tile that computes something else is never recorded. The search stops when its budget of
seconds is spent; the cost model's tiles are always measured.

Each time is the median of ``REPEAT`` runs after a warm-up call; a run makes as many calls as
fill about ``MIN_RUN_SECONDS``. The winner is timed once more against the cost model's tiles,
runs interleaved (:func:`confirm`), and kept only if it is still ``MIN_GAIN`` faster: the
machine's load may have changed while the search ran.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..topi.nn import conv2d_nchwc as conv_kernel
from ..topi.nn import gemm_kernel
from .harness import Workload

REPEAT = 5
MIN_RUN_SECONDS = 2e-3
MIN_GAIN = 0.03  # a candidate must be 3% faster than the best so far to replace it
ROUNDS = 3  # passes over the axes (another only when the last one found better tiles)


@dataclass(frozen=True)
class Outcome:
    """The search's result for one kernel call: the best tiles and their time, the cost
    model's tiles and time, how many candidates ran and how many gave a wrong output."""

    kernel: str
    geometry: tuple[int, ...]
    tiles: Any
    seconds: float
    model_tiles: Any
    model_seconds: float
    tried: int
    rejected: int

    @property
    def speedup(self) -> float:
        return self.model_seconds / self.seconds


def _calls_per_run(seconds: float) -> int:
    return max(1, min(10_000, math.ceil(MIN_RUN_SECONDS / max(seconds, 1e-9))))


def measure(work: Workload, tiles: Any) -> float:
    """Seconds per call with ``tiles``: warm-up, calibration, median of REPEAT runs; the
    output of the last call stays in ``work.output``."""
    number = _calls_per_run(work.run(tiles, 1))
    return statistics.median(work.run(tiles, number) for _ in range(REPEAT))


def confirm(work: Workload, best: Any, model: Any, hint: float) -> tuple[float, float]:
    """``(best's seconds, model's seconds)`` from REPEAT runs of each, interleaved: on a
    machine whose load changes during the search, the two compare under the same load."""
    number = _calls_per_run(hint)
    pairs = [(work.run(best, number), work.run(model, number)) for _ in range(REPEAT)]
    return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs))


def same_output(out: np.ndarray, ref: np.ndarray) -> bool:
    """Whether two outputs of one call agree up to float32 summation-order rounding."""
    scale = float(np.abs(ref).max()) if ref.size else 1.0
    return bool(np.allclose(out, ref, rtol=1e-4, atol=1e-5 * max(scale, 1.0)))


def search(work: Workload, budget: float, threads: int) -> Outcome:
    """The best tiles for ``work`` found within ``budget`` seconds (module docstring)."""
    deadline = time.perf_counter() + budget
    model = work.query.model
    model_seconds = measure(work, model)
    reference = work.output.copy()
    best, best_seconds = model, model_seconds
    seen, tried, rejected = {model}, 1, 0
    for _ in range(ROUNDS):
        start = best
        for axis in axes(work.query.kernel, work.query.geometry, work.query.level, threads):
            for change in axis:
                tiles = dataclasses.replace(best, **change)
                if tiles in seen or time.perf_counter() >= deadline:
                    continue
                seen.add(tiles)
                seconds = measure(work, tiles)
                tried += 1
                if not same_output(work.output, reference):
                    rejected += 1
                elif seconds < best_seconds * (1 - MIN_GAIN):
                    best, best_seconds = tiles, seconds
        if best == start:
            break
    if best != model:
        best_seconds, model_seconds = confirm(work, best, model, best_seconds)
        if best_seconds >= model_seconds * (1 - MIN_GAIN):
            best, best_seconds = model, model_seconds
    return Outcome(work.query.kernel, work.query.geometry, best, best_seconds, model,
                   model_seconds, tried, rejected)


def axes(kernel: str, geometry: tuple[int, ...], level: Any, threads: int
         ) -> Iterator[list[dict[str, Any]]]:
    """The search's axes for a kernel call, each a list of field changes."""
    if kernel == "sgemm":
        yield from _gemm_axes(*geometry, mr=gemm_kernel.register_rows(level), threads=threads)
    elif kernel == "conv2d_nchwc":
        yield from _conv_axes(conv_kernel.conv_of_key(geometry), level, threads)
    elif kernel == "depthwise_nchwc":
        yield from _split_axes(conv_kernel.conv_of_key(geometry), threads)


def _gemm_axes(batch: int, m: int, n: int, k: int, mr: int, threads: int
               ) -> Iterator[list[dict[str, Any]]]:
    rows = math.ceil(m / mr) * mr
    yield [{"mc": mc} for mc in sorted({min(rows, mr << s) for s in range(8)})]
    kcs = {k} | {kc for kc in (32, 64, 128, 192, 256, 384, 512) if kc < k}
    yield [{"kc": kc} for kc in sorted(kcs)]
    if threads > 1:
        yield [{"parallel": False}, {"parallel": True}]


def _conv_axes(geo: conv_kernel.ConvGeometry, level: Any, threads: int
               ) -> Iterator[list[dict[str, Any]]]:
    blocks = geo.oc // geo.lanes // geo.groups
    wide = level.name == "avx512"  # rb=2 tiles of 8 and 12 columns and quads (rb=4) exist
    # the widths the header instantiates per rb (any other width runs the next one below)
    widths = {1: (12, 8, 4, 2, 1), 2: (12, 8, 6, 4, 2, 1) if wide else (6, 4, 2, 1),
              4: conv_kernel.QUAD_WIDTHS}
    rbs = [rb for rb in (1, 2, 4) if rb <= blocks and (rb < 4 or wide)]
    tiles = [{"rb": rb, "rw": rw} for rb in rbs for rw in widths[rb] if rw <= max(geo.ow, 1)]
    if wide and conv_kernel.takes_pairs(geo):
        # AVX-512's pair tiles (an even rb: rb / 2 pairs of 8-lane blocks per group, up to
        # 4, each count with its own width; a group may end past an odd count of blocks,
        # as the cost model's 6 for 5): every group size, not only the 2 and 4 above
        pairs = -(-blocks // 2)
        tiles = [t for t in tiles if t["rb"] == 1] + [
            {"rb": 2 * per, "rw": conv_kernel.PAIR_WIDTHS[per]}
            for per in range(1, min(pairs, conv_kernel.PAIR_MAX_BLOCKS // 2) + 1)]
    yield tiles
    yield [{"order": 0}, {"order": 1}]
    yield from _split_axes(geo, threads)


def _split_axes(geo: conv_kernel.ConvGeometry, threads: int) -> Iterator[list[dict[str, Any]]]:
    ow = max(geo.ow, 1)
    strips = {ow, math.ceil(ow / 2), math.ceil(ow / 4)} | {s for s in (64, 128, 256, 512)
                                                          if s < ow}
    yield [{"strip": s} for s in sorted(strips)]
    if threads > 1:
        yield [{"threads": 0}, {"threads": 1}]
