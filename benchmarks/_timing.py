"""Interleaved timing: every runner, round by round, so that drift hits all of them alike.

A machine's speed drifts (other processes, frequency, thermal state). Timing system A for a
minute and then system B for a minute folds that drift into their ratio. Here each round runs
every runner once for a block of calls, in an order shuffled afresh each round (seeded), so
every runner sees every phase of the drift and, on average, follows every other runner alike.
(A rotation kept each runner behind the same one: in a list of cases [dynamic, static,
onnxruntime] x shapes, every dynamic build ran right after onnxruntime, whose 2-thread
workers still spun, and measured 1.3-2.3x slower than it runs.)

Per block: the thread count is set, one untimed call warms up (caches, thread pools woken from
sleep), then each call is timed on its own with ``time.perf_counter``. A short pause between
blocks lets the previous runner's worker threads stop spinning before the next one starts.
The block length comes from a calibration (a few calls per runner) so that every runner
gets about ``min_time`` seconds of timed calls in all, and at least one call per round.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from _systems import Runner

PAUSE_S = 0.005  # between blocks: ember pool and onnxruntime workers spin a little after work


@dataclass
class Timing:
    """Per-call seconds of one runner: every sample, and each round's median."""

    samples: list[float]
    round_medians: list[float]
    block: int

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.samples, q))

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def best_of(fn: Callable[[], object], repeat: int,
            clock: Callable[[], float] = time.perf_counter) -> float:
    """The shortest of ``repeat`` timed calls of ``fn`` (seconds of ``clock``), after one
    untimed call."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def calibrate(runner: Runner, budget_s: float = 0.05, max_calls: int = 50,
              clock: Callable[[], float] = time.perf_counter) -> float:
    """Median seconds of a few calls (after a warm-up call): at least 3 calls, and more
    while under ``budget_s`` in all (at most ``max_calls``)."""
    times: list[float] = []
    with runner.use_threads():
        runner.run()
        spent = 0.0
        while len(times) < 3 or (spent < budget_s and len(times) < max_calls):
            start = clock()
            runner.run()
            times.append(clock() - start)
            spent += times[-1]
    return statistics.median(times)


def block_sizes(estimates: Sequence[float], min_time: float, rounds: int) -> list[int]:
    """Calls per block so that ``rounds`` blocks take about ``min_time`` seconds."""
    return [max(1, math.ceil(min_time / rounds / max(t, 1e-9))) for t in estimates]


def _block(runner: Runner, calls: int, clock: Callable[[], float] = time.perf_counter
           ) -> list[float]:
    times = []
    run = runner.run
    with runner.use_threads():
        run()
        for _ in range(calls):
            start = clock()
            run()
            times.append(clock() - start)
    return times


def interleave(runners: Sequence[Runner], min_time: float, rounds: int,
               clock: Callable[[], float] = time.perf_counter) -> list[Timing]:
    """Time ``runners`` in ``rounds`` shuffled rounds (see the module docstring); ``clock``:
    ``time.thread_time`` counts the calling thread's CPU time (steadier on a loaded machine,
    but blind to worker threads)."""
    if rounds < 1 or min_time <= 0:
        raise ValueError(f"interleave: rounds must be >= 1 and min_time > 0, got {rounds}, "
                         f"{min_time}")
    sizes = block_sizes([calibrate(r, clock=clock) for r in runners], min_time, rounds)
    samples: list[list[float]] = [[] for _ in runners]
    medians: list[list[float]] = [[] for _ in runners]
    n = len(runners)
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        for i in (int(j) for j in rng.permutation(n)):
            times = _block(runners[i], sizes[i], clock)
            samples[i].extend(times)
            medians[i].append(statistics.median(times))
            time.sleep(PAUSE_S)
    return [Timing(s, m, b) for s, m, b in zip(samples, medians, sizes)]
