"""How a kernel call's work is split over the thread pool, measured per task (docs/profiling.md).

``EmberSplitRun`` (``csrc/backend.c``) makes one planned kernel call with profiling on for
the calling thread: each parallel launch the kernel makes records its task count and, per
task, the thread that ran it and the task's CPU time (``CLOCK_THREAD_CPUTIME_ID``). CPU time
is the task's own work whatever else the machine runs, so the split's evenness reads the same
on a loaded machine. ``simulate=N`` runs each launch as a job of N tasks, one after another
on the calling thread: how N threads would share the work, measured on a machine with fewer
cores without N threads fighting over them.

From a call's launches:

- ``imbalance``: over its launches of more than one task, the sum of each launch's longest
  task over the sum of its work per thread (1.0: an even split; 2.0: the critical path is
  twice the ideal one). Tasks that got no work count, as zero, and so do the threads of a
  launch that asked for fewer tasks than it had threads.
- ``serial_share``: the part of the call's CPU work that ran on one thread while the others
  had nothing to do: the caller's time outside launches plus launches of one task, over all
  of the work (every task's time plus the caller's time outside launches). At ``threads=1``
  everything is serial.
"""
from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import TVMError

MAX_THREADS = 64  # EMBER_POOL_MAX_THREADS of thread_pool.h
CAPACITY = 256  # launches recorded per kernel call; more are counted, not recorded


class SplitLaunchStruct(ctypes.Structure):
    """``EmberSplitLaunch`` of thread_pool.h."""

    _fields_ = [("num_task", ctypes.c_int32), ("requested", ctypes.c_int32),
                ("caller", ctypes.c_int32), ("threads", ctypes.c_int32),
                ("caller_cpu_ns", ctypes.c_int64), ("wall_ns", ctypes.c_int64),
                ("task_thread", ctypes.c_int32 * MAX_THREADS),
                ("task_cpu_ns", ctypes.c_int64 * MAX_THREADS)]


class SplitRecordStruct(ctypes.Structure):
    """``EmberSplitRecord`` of thread_pool.h."""

    _fields_ = [("kernel_cpu_ns", ctypes.c_int64), ("kernel_wall_ns", ctypes.c_int64),
                ("num_launches", ctypes.c_int32), ("capacity", ctypes.c_int32),
                ("simulate", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("launches", ctypes.POINTER(SplitLaunchStruct))]


@dataclass(frozen=True)
class LaunchSplit:
    """One parallel launch: per task (index = task id), the thread id that ran it and its
    CPU nanoseconds; ``caller`` is the launching thread's id, ``threads`` its thread count
    (a launch of fewer tasks leaves the rest idle)."""

    requested: int
    caller: int
    threads: int
    caller_cpu_ns: int
    wall_ns: int
    task_thread: tuple[int, ...]
    task_cpu_ns: tuple[int, ...]

    @property
    def num_task(self) -> int:
        return len(self.task_cpu_ns)

    def workers(self) -> dict[int, tuple[int, int]]:
        """thread id -> (tasks it ran, their CPU nanoseconds)."""
        out: dict[int, tuple[int, int]] = {}
        for thread, ns in zip(self.task_thread, self.task_cpu_ns):
            tasks, busy = out.get(thread, (0, 0))
            out[thread] = (tasks + 1, busy + ns)
        return out


@dataclass(frozen=True)
class KernelSplit:
    """The launches of one kernel call, and the caller's CPU and wall time of the whole call;
    ``dropped``: launches past the record's capacity (counted, not recorded)."""

    kernel_cpu_ns: int
    kernel_wall_ns: int
    launches: tuple[LaunchSplit, ...]
    dropped: int = 0


def typical(calls: Sequence[KernelSplit]) -> list[KernelSplit]:
    """Repeated calls of one kernel as one call of per-task medians, when their launches line
    up (the same count, each of the same task count); else the calls as they are. A task
    that the OS interrupts on a busy machine comes back with colder caches: the median keeps
    one such task from reading as imbalance."""
    first = calls[0] if calls else None
    if first is None or len(calls) < 3 or any(
            len(c.launches) != len(first.launches) or
            any(a.num_task != b.num_task for a, b in zip(c.launches, first.launches))
            for c in calls):
        return list(calls)

    def med(values: Sequence[int]) -> int:
        return sorted(values)[len(values) // 2]

    launches = tuple(
        dataclasses.replace(launch, caller_cpu_ns=med([c.launches[k].caller_cpu_ns for c in calls]),
                            task_cpu_ns=tuple(med([c.launches[k].task_cpu_ns[t] for c in calls])
                                              for t in range(launch.num_task)))
        for k, launch in enumerate(first.launches))
    return [KernelSplit(med([c.kernel_cpu_ns for c in calls]),
                        med([c.kernel_wall_ns for c in calls]), launches, first.dropped)]


def imbalance(calls: Sequence[KernelSplit]) -> float:
    """Sum of the longest task over sum of the work per thread, over the multi-task launches
    of ``calls`` (their per-task medians: ``typical``); 1.0 when none split."""
    longest = mean = 0.0
    for call in typical(calls):
        for launch in call.launches:
            if launch.num_task > 1:
                longest += max(launch.task_cpu_ns)
                mean += sum(launch.task_cpu_ns) / max(launch.num_task, launch.threads)
    return longest / mean if mean > 0 else 1.0


def serial_share(calls: Sequence[KernelSplit]) -> float:
    """The part of ``calls``' CPU work that ran on one thread (see the module docstring)."""
    serial = work = 0
    for call in typical(calls):
        outside = max(call.kernel_cpu_ns - sum(x.caller_cpu_ns for x in call.launches), 0)
        tasks = sum(sum(x.task_cpu_ns) for x in call.launches)
        serial += outside + sum(sum(x.task_cpu_ns) for x in call.launches if x.num_task == 1)
        work += outside + tasks
    return serial / work if work > 0 else 0.0


def task_count(calls: Sequence[KernelSplit]) -> int:
    """Tasks of all launches of ``calls``."""
    return sum(x.num_task for call in calls for x in call.launches)


class SplitProfiler:
    """Profiled calls (``run``) of planned calls (``PlannedCall`` table entries, by address)
    of one library; TVMError if the library predates ``EmberSplitRun``."""

    def __init__(self, lib: Any, capacity: int = CAPACITY) -> None:
        run = getattr(lib, "EmberSplitRun", None)
        size = getattr(lib, "EmberSplitLaunchSize", None)
        if run is None or size is None:
            raise TVMError(f"work split: {lib!r} has no EmberSplitRun (built before it existed)")
        size.argtypes, size.restype = [], ctypes.c_int
        if size() != ctypes.sizeof(SplitLaunchStruct):
            raise TVMError(f"work split: the library's EmberSplitLaunch is {size()} bytes, "
                           f"this runtime's mirror {ctypes.sizeof(SplitLaunchStruct)}")
        run.argtypes = [ctypes.c_void_p, ctypes.POINTER(SplitRecordStruct)]
        run.restype = ctypes.c_int
        self._run = run
        self._launches = (SplitLaunchStruct * capacity)()
        self._record = SplitRecordStruct(capacity=capacity,
                                         launches=ctypes.cast(self._launches,
                                                              ctypes.POINTER(SplitLaunchStruct)))

    @staticmethod
    def available(lib: Any) -> bool:
        return getattr(lib, "EmberSplitRun", None) is not None

    def run(self, call_address: int, simulate: int = 0) -> tuple[int, KernelSplit]:
        """(the call's status, its split) of the PlannedCall at ``call_address``. With
        ``simulate`` > 0 each launch runs its tasks one after another on this thread, as a
        job of ``simulate`` tasks: the split that many threads would get, measured without
        them competing for the cores. It runs them twice and records the second pass, each
        task after pushing this core's caches out (as if on a core of its own), so a kernel
        that updates a buffer in place leaves other values than a run would."""
        if isinstance(simulate, bool) or not isinstance(simulate, int) or not \
                0 <= simulate <= MAX_THREADS:
            raise ValueError(f"work split: simulate must be an int in 0..{MAX_THREADS}, got "
                             f"{simulate!r}")
        rec = self._record
        rec.simulate = simulate
        rc = self._run(call_address, ctypes.byref(rec))
        kept = min(rec.num_launches, rec.capacity)
        launches = tuple(_launch(self._launches[i]) for i in range(kept))
        return rc, KernelSplit(rec.kernel_cpu_ns, rec.kernel_wall_ns, launches,
                               rec.num_launches - kept)


def _launch(raw: SplitLaunchStruct) -> LaunchSplit:
    n = max(0, min(raw.num_task, MAX_THREADS))
    return LaunchSplit(raw.requested, raw.caller, raw.threads, raw.caller_cpu_ns, raw.wall_ns,
                       tuple(raw.task_thread[:n]), tuple(raw.task_cpu_ns[:n]))
