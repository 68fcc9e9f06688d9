"""How many threads a compiled model's kernels run on.

Compiled kernels run their parallel loops through ``TVMBackendParallelLaunch``
(``csrc/backend.c``) on ember's thread pool (``csrc/thread_pool.h``): one pool per process,
shared by every loaded library, whose calling thread takes tasks too. A launch uses the
*calling thread's* count, which starts at ``EMBER_NUM_THREADS``, else ``OMP_NUM_THREADS``,
else the CPUs the process may run on. ember makes the count a property of a model: every
library exports ``EmberSetNumThreads``, and :class:`ThreadControl` sets it for a run, so two
models (or two Python threads) can use different counts: ``use`` around a run, restoring it
after; ``ensure`` before a run, leaving it set (a compiled model's call: no C call at all when
this thread's count in that library is already right). While one
thread's launch holds the pool, another thread's launches run on that thread alone, so
callers that bring their own threads do not multiply the workers.

The default count is :func:`default_num_threads`: ``EMBER_NUM_THREADS`` if set, else the
physical cores this process may run on (hyper-threads share a core's vector units, which
the kernels keep busy).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from .cpus import within_quota
from .module import CSourceModule, Module

ENV_VAR = "EMBER_NUM_THREADS"


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (Linux topology; elsewhere, or
    when it cannot be read, the logical CPU count), at most what a cgroup CPU quota allows."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cores = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topo.joinpath("physical_package_id").read_text().strip(),
                       topo.joinpath("core_id").read_text().strip()))
        except OSError:
            cores = set()
            break
    return within_quota(len(cores) or len(cpus) or os.cpu_count() or 1)


def default_num_threads() -> int:
    """``EMBER_NUM_THREADS`` (a positive int) if set, else :func:`physical_cores`. Raises
    ValueError naming the variable when it is set to anything else."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return physical_cores()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{ENV_VAR} must be a positive integer, got {raw!r}")
    return value


def check_num_threads(threads: object, what: str = "threads") -> int:
    """``threads`` as a positive int, else TypeError/ValueError naming ``what``."""
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"{what} must be a positive int, got {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"{what} must be a positive int, got {threads}")
    return threads


def _setters(module: Module) -> list[tuple[Callable[[int], int], threading.local]]:
    """``EmberSetNumThreads`` of each compiled library in ``module``'s import tree, with the
    library's record of what each Python thread set last (``.count``; the C count is per
    thread and per library, so the record lives and dies with the library's module)."""
    from .loaders import DSOModule

    found = []
    for mod in module._walk():
        lib = mod._compiled() if isinstance(mod, CSourceModule) else mod
        handle = getattr(lib, "_lib", None) if isinstance(lib, DSOModule) else None
        fn = getattr(handle, "EmberSetNumThreads", None) if handle is not None else None
        if fn is not None:  # libraries from before the symbol existed keep their default
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            found.append((fn, vars(lib).setdefault("_thread_counts", threading.local())))
    return found


def pool_workers() -> int:
    """Worker threads the process's pool has started so far (they are created on first need
    and live as long as the process); 0 before any library with a pool was loaded."""
    from .dso import pool_owner

    owner = pool_owner()
    fn = getattr(owner, "EmberPoolNumWorkers", None) if owner is not None else None
    if fn is None:
        return 0
    fn.argtypes, fn.restype = [], ctypes.c_int
    return int(fn())


class ThreadControl:
    """The thread count of one model's kernels: ``with control.use(4): run()`` runs on 4
    threads (this Python thread's setting in each library, restored on exit)."""

    def __init__(self, module: Module) -> None:
        self._module = module  # keeps the libraries whose functions the setters are loaded
        self._setters = _setters(module)

    @property
    def library_count(self) -> int:
        """How many compiled libraries (each with its own per-thread count) the model has."""
        return len(self._setters)

    @property
    def available(self) -> bool:
        """Whether the libraries can be told (they export ``EmberSetNumThreads``)."""
        return bool(self._setters)

    @contextlib.contextmanager
    def use(self, threads: int) -> Iterator[None]:
        before = [self._set(fn, counts, threads) for fn, counts in self._setters]
        try:
            yield
        finally:
            for (fn, counts), count in zip(reversed(self._setters), reversed(before)):
                self._set(fn, counts, count)

    def ensure(self, threads: int) -> None:
        """Set this thread's count to ``threads`` in each library, and leave it so; skips the
        C call where this thread's last setting was already ``threads``."""
        for fn, counts in self._setters:
            if getattr(counts, "count", 0) != threads:
                self._set(fn, counts, threads)

    @staticmethod
    def _set(fn: Callable[[int], int], counts: threading.local, threads: int) -> int:
        before = fn(threads)
        counts.count = threads if threads > 0 else before
        return before

    def current(self) -> int | None:
        """The count this Python thread's next parallel launch would use (None if unknown)."""
        return self._setters[0][0](0) if self._setters else None
