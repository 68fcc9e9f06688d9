"""Shared constants and helpers of the C runtime tests (imported by conftest and tests)."""
from __future__ import annotations

import ctypes
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ember.micro import get_crt_include_dirs, get_standalone_crt_dir
from ember.runtime._abi import TVMBackendPackedCFunc, TVMValue

CRT_DIR = Path(get_standalone_crt_dir())
CORE_SOURCES = sorted(CRT_DIR.glob("src/*/*.c"))
HOST_PLATFORM = CRT_DIR / "platform" / "host" / "platform.c"
STRICT = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2"]


def include_flags() -> list[str]:
    return [f"-I{d}" for d in get_crt_include_dirs()]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run a build command; fail the test with the command line and stderr if it fails."""
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        pytest.fail(f"command failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stderr}")
    return proc


def error_codes() -> dict[str, int]:
    """kTvmError* name -> value, read from error_codes.h (so tests follow the header)."""
    text = (CRT_DIR / "include" / "ember" / "crt" / "error_codes.h").read_text()
    cats = {m[1]: int(m[2]) for m in re.finditer(r"(kTvmErrorCategory\w+) = (\d+)", text)}
    codes = {m[1]: (cats[m[2]] << 8) | int(m[3]) for m in re.finditer(
        r"(kTvmError\w+) = EMBER_CRT_ERROR\((kTvmErrorCategory\w+), (\d+)\)", text)}
    return {"kTvmErrorNoError": 0, **codes}


class StackAllocator(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("size", ctypes.c_size_t), ("top", ctypes.c_size_t),
                ("peak", ctypes.c_size_t), ("live", ctypes.c_uint32)]


class StackAllocatorStats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("used", ctypes.c_size_t), ("peak", ctypes.c_size_t),
                ("live", ctypes.c_uint32)]


class FuncEntry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("func", TVMBackendPackedCFunc)]


class FuncRegistry(ctypes.Structure):
    _fields_ = [("module_name", ctypes.c_char_p), ("funcs", ctypes.POINTER(FuncEntry)),
                ("num_funcs", ctypes.c_uint32)]


ParallelLambda = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "ember_stack_allocator_init": (ctypes.c_int, [ctypes.POINTER(StackAllocator),
                                                  ctypes.c_void_p, ctypes.c_size_t]),
    "ember_stack_allocator_alloc": (ctypes.c_int, [ctypes.POINTER(StackAllocator),
                                                   ctypes.c_uint64,
                                                   ctypes.POINTER(ctypes.c_void_p)]),
    "ember_stack_allocator_free": (ctypes.c_int, [ctypes.POINTER(StackAllocator),
                                                  ctypes.c_void_p]),
    "ember_stack_allocator_available": (ctypes.c_size_t, [ctypes.POINTER(StackAllocator)]),
    "ember_stack_allocator_stats": (StackAllocatorStats, [ctypes.POINTER(StackAllocator)]),
    "ember_stack_allocator_reset": (None, [ctypes.POINTER(StackAllocator)]),
    "ember_stack_allocator_release_to": (ctypes.c_int, [ctypes.POINTER(StackAllocator),
                                                        StackAllocatorStats]),
    "ember_crt_init": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t]),
    "ember_crt_workspace_stats": (StackAllocatorStats, []),
    "ember_crt_workspace_reset": (None, []),
    "ember_crt_workspace_release_to": (ctypes.c_int, [StackAllocatorStats]),
    "ember_crt_register_func_registry": (ctypes.c_int, [ctypes.POINTER(FuncRegistry)]),
    "ember_crt_clear_func_registries": (None, []),
    "ember_crt_last_error_code": (ctypes.c_int, []),
    "ember_crt_error_name": (ctypes.c_char_p, [ctypes.c_int]),
    "TVMGetLastError": (ctypes.c_char_p, []),
    "TVMPackedFuncSetLastError": (None, [ctypes.c_char_p]),
    "TVMAPISetLastError": (None, [ctypes.c_char_p]),
    "TVMBackendAllocWorkspace": (ctypes.c_void_p, [ctypes.c_int, ctypes.c_int, ctypes.c_uint64,
                                                   ctypes.c_int, ctypes.c_int]),
    "TVMBackendFreeWorkspace": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]),
    "TVMBackendGetFuncFromEnv": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p,
                                                ctypes.POINTER(ctypes.c_void_p)]),
    "TVMFuncGetGlobal": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "TVMFuncFree": (ctypes.c_int, [ctypes.c_void_p]),
    "TVMFuncCall": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(TVMValue),
                                   ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                   ctypes.POINTER(TVMValue), ctypes.POINTER(ctypes.c_int)]),
    "TVMBackendParallelLaunch": (ctypes.c_int, [ParallelLambda, ctypes.c_void_p, ctypes.c_int]),
}


def bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare the C signatures of the runtime's functions on lib (idempotent)."""
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def last_error(lib: ctypes.CDLL) -> tuple[str, str]:
    """(name of the last error code, last error message)."""
    return (lib.ember_crt_error_name(lib.ember_crt_last_error_code()).decode(),
            lib.TVMGetLastError().decode())
