"""The CPUs this process may use: the affinity mask capped by a cgroup CPU quota (v2 cpu.max,
v1 cfs quota/period), read by the Python side and by the native thread pool alike."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ember.runtime import cpus
from ember.runtime.module import CSourceModule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ffi_testlib import requires_cc  # noqa: E402


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


CASES = [
    ({"cpu.max": "200000 100000\n"}, 2),            # v2: 2 CPUs
    ({"cpu.max": "150000 100000\n"}, 2),            # 1.5 CPUs: rounded up
    ({"cpu.max": "50000 100000\n"}, 1),
    ({"cpu.max": "max 100000\n"}, 0),               # v2, no quota
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),  # v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0),  # v1, none
    ({"cpu/cpu.cfs_quota_us": "400000\n"}, 0),      # no period: unreadable
    ({"cpu.max": "lots 100000\n"}, 0),              # garbage
    ({"cpu.max": "100000 0\n"}, 0),                 # a zero period
    ({"cpu.max": ""}, 0),                           # empty: as missing, then no v1 files
    ({}, 0),                                        # a host without cgroup files
]


@pytest.mark.parametrize("files, want", CASES)
def test_cgroup_cpu_limit(tmp_path: Path, files: dict[str, str], want: int) -> None:
    assert cpus.cgroup_cpu_limit(_tree(tmp_path, files)) == want


@requires_cc
def test_the_native_pool_reads_the_same_files(tmp_path: Path) -> None:
    """thread_pool.h's reader, compiled on its own, agrees with the Python one on every case."""
    here = Path(__file__).resolve().parents[2] / "ember" / "runtime" / "csrc"
    # the header's text itself, not an #include of it: the build cache keys on the source
    lib = CSourceModule("#define _GNU_SOURCE 1\n" + (here / "thread_pool.h").read_text()
                        + "\nTVM_DLL int limit_of(const char* root) "
                        "{ return ember_cgroup_cpu_limit(root); }\n")
    import ctypes

    limit_of = lib["limit_of"]._owner._lib.limit_of
    limit_of.argtypes = [ctypes.c_char_p]
    for i, (files, want) in enumerate(CASES):
        root = _tree(tmp_path / str(i), files)
        root.mkdir(exist_ok=True)
        assert limit_of(str(root).encode()) == want, files
    huge = _tree(tmp_path / "huge", {"cpu.max": "9223372036854775807 1\n"})
    assert limit_of(str(huge).encode()) == 64  # no overflow: capped at the pool's most threads


def test_usable_cpus_takes_the_quota_under_the_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    mask = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda root=cpus.CGROUP_ROOT: 0)
    assert cpus.usable_cpus() == mask
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda root=cpus.CGROUP_ROOT: 1)
    assert cpus.usable_cpus() == 1
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda root=cpus.CGROUP_ROOT: 10_000)
    assert cpus.usable_cpus() == mask
