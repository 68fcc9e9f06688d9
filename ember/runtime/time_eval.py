"""Timing of PackedFuncs: ``Module.time_evaluator`` and its BenchmarkResult."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence


class BenchmarkResult:
    """Timings of ``repeat`` runs, each the mean over ``number`` calls, in seconds."""

    def __init__(self, results: Sequence[float]) -> None:
        self.results = tuple(float(r) for r in results)
        if not self.results:
            raise ValueError("BenchmarkResult: no results")
        self.mean = statistics.fmean(self.results)
        self.median = statistics.median(self.results)
        self.std = statistics.pstdev(self.results)
        self.min = min(self.results)
        self.max = max(self.results)

    def __repr__(self) -> str:
        return (f"BenchmarkResult(mean={self.mean:.3e}s, median={self.median:.3e}s, "
                f"std={self.std:.3e}s, min={self.min:.3e}s, max={self.max:.3e}s, "
                f"repeat={len(self.results)})")

    def __str__(self) -> str:
        ms = [x * 1e3 for x in (self.mean, self.median, self.max, self.min, self.std)]
        return ("Execution time summary:\n"
                f"{'mean (ms)':>10} {'median (ms)':>12} {'max (ms)':>10} {'min (ms)':>10} "
                f"{'std (ms)':>10}\n"
                + " ".join(f"{v:{w}.4f}" for v, w in zip(ms, (10, 12, 10, 10, 10))))


def _python_loop(func: Callable[..., Any], args: tuple[Any, ...]) -> Callable[[int], float]:
    def run(number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            func(*args)
        return time.perf_counter() - start

    return run


def time_evaluator(func: Callable[..., Any], dev: Any = None, number: int = 10, repeat: int = 1,
                   min_repeat_ms: int = 0, cooldown_interval_ms: int = 0,
                   repeats_to_cooldown: int = 1) -> Callable[..., BenchmarkResult]:
    """A function ``f(*args) -> BenchmarkResult`` timing ``func``.

    Each of ``repeat`` measurements calls ``func`` ``number`` times (compiled functions in a
    C loop, so the figures exclude Python overhead) and records the mean; when a measurement
    takes less than ``min_repeat_ms``, ``number`` grows and it is taken again.
    """
    if number < 1 or repeat < 1:
        raise ValueError(f"time_evaluator: number and repeat must be >= 1, got {number}, {repeat}")

    def evaluate(*args: Any) -> BenchmarkResult:
        make_loop = getattr(func, "time_loop", None)
        run = (make_loop(args) if make_loop else None) or _python_loop(func, args)
        func(*args)  # warm up (and surface argument errors with the normal message)
        results = []
        count = number
        for r in range(repeat):
            while True:
                seconds = run(count)
                if seconds * 1e3 >= min_repeat_ms or count >= 1 << 30:
                    break
                # Aim past min_repeat_ms, at least doubling so the loop ends quickly.
                count = max(count * 2, int(count * min_repeat_ms / max(seconds * 1e3, 1e-3)) + 1)
            results.append(seconds / count)
            if cooldown_interval_ms > 0 and (r + 1) % max(repeats_to_cooldown, 1) == 0:
                time.sleep(cooldown_interval_ms / 1e3)
        if dev is not None and hasattr(dev, "sync"):
            dev.sync()
        return BenchmarkResult(results)

    return evaluate
