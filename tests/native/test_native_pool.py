"""The native runtime's thread pool (TVMBackendParallelLaunch for code linked into a program,
EmberSetNumThreads), driven through ctypes: every task once, errors come back, thread count."""
from __future__ import annotations

import ctypes

from _native_testlib import compiler

from ember.runtime import native


class GroupEnv(ctypes.Structure):
    _fields_ = [("sync_handle", ctypes.c_void_p), ("num_task", ctypes.c_int32)]


LAMBDA = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(GroupEnv), ctypes.c_void_p)


def _runtime() -> ctypes.CDLL:
    compiler()
    lib = ctypes.CDLL(str(native.library_path()))
    lib.EmberSetNumThreads.argtypes, lib.EmberSetNumThreads.restype = [ctypes.c_int], ctypes.c_int
    lib.TVMBackendParallelLaunch.argtypes = [LAMBDA, ctypes.c_void_p, ctypes.c_int]
    lib.TVMBackendParallelLaunch.restype = ctypes.c_int
    lib.TVMGetLastError.restype = ctypes.c_char_p
    lib.TVMAPISetLastError.argtypes = [ctypes.c_char_p]
    return lib


def test_native_launch_runs_every_task_once_and_reports_errors():
    lib = _runtime()
    for threads in (1, 2, 3):
        lib.EmberSetNumThreads(threads)
        assert lib.EmberSetNumThreads(0) == threads
        seen: list[tuple[int, int]] = []

        def task(i, penv, _cdata, seen=seen):
            seen.append((i, penv.contents.num_task))
            return 0

        assert lib.TVMBackendParallelLaunch(LAMBDA(task), None, 0) == 0
        assert sorted(seen) == [(i, threads) for i in range(threads)]

        def failing(i, penv, _cdata):
            if i == penv.contents.num_task - 1:
                lib.TVMAPISetLastError(f"task {i} broke".encode())
                return -1
            return 0

        assert lib.TVMBackendParallelLaunch(LAMBDA(failing), None, 0) != 0
        assert lib.TVMGetLastError().decode() == f"task {threads - 1} broke"
