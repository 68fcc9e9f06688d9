"""How many CPUs this process may use: its affinity mask, capped by a cgroup CPU quota.

The parallel compiles, the context pools and (in C, csrc/thread_pool.h) the thread pool size
themselves by it: in a container started with ``--cpus=2`` on a 64-CPU host, the affinity mask
still holds 64 CPUs, and 64 threads there take turns on 2.
"""
from __future__ import annotations

import os
from pathlib import Path

CGROUP_ROOT = "/sys/fs/cgroup"


def cgroup_cpu_limit(root: str | os.PathLike = CGROUP_ROOT) -> int:
    """The CPUs a cgroup CPU quota allows this process (rounded up), 0 when there is none:
    ``cpu.max`` (cgroup v2: ``max 100000`` or ``<quota> <period>``), else
    ``cpu/cpu.cfs_quota_us`` over ``cpu/cpu.cfs_period_us`` (v1; quota -1: none). A container
    started with ``--cpus=2`` on a 64-CPU host has all 64 in its affinity mask; 64 threads there
    take turns on 2 CPUs. The native thread pool (csrc/thread_pool.h) reads the same files."""
    def numbers(path: Path) -> list[str]:
        try:
            return path.read_text().split()
        except (OSError, UnicodeDecodeError):
            return []

    v2 = numbers(Path(root, "cpu.max"))
    fields = v2[:2] if v2 else numbers(Path(root, "cpu", "cpu.cfs_quota_us"))[:1] + numbers(
        Path(root, "cpu", "cpu.cfs_period_us"))[:1]
    try:
        quota, period = (int(x) for x in fields)
    except ValueError:  # "max", missing or unreadable: no quota
        return 0
    return -(-quota // period) if quota > 0 and period > 0 else 0


def usable_cpus() -> int:
    """The logical CPUs this process may run on (its affinity mask), at most what a cgroup CPU
    quota allows."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    return within_quota(n or os.cpu_count() or 1)


def within_quota(n: int) -> int:
    """``n`` CPUs (or cores), at most what a cgroup CPU quota allows."""
    limit = cgroup_cpu_limit()
    return min(n, limit) if limit > 0 else n
