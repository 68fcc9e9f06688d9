"""The runtime's C API through ctypes: the workspace arena (ember_crt_init,
TVMBackendAllocWorkspace/FreeWorkspace), the function registry (registration checks, lookup,
TVMFuncCall and its checks), errors (codes, messages, truncation) and parallel launch."""
from __future__ import annotations

import ctypes
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.runtime._abi import TVMBackendPackedCFunc, TVMValue

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _crt_testlib import FuncEntry, FuncRegistry, ParallelLambda, bind, error_codes, last_error

E = error_codes()
KEEP: list[object] = []  # buffers and callbacks the library may still point to


@pytest.fixture(scope="module")
def lib(crt_shared):
    return bind(crt_shared())


def _fresh(lib: ctypes.CDLL) -> ctypes.CDLL:
    """lib with an empty registry and a fresh 4 KiB arena."""
    lib.ember_crt_clear_func_registries()
    lib.ember_crt_workspace_reset()
    pool = ctypes.create_string_buffer(4096)
    KEEP.append(pool)
    assert lib.ember_crt_init(pool, 4096) == 0
    return lib


@pytest.fixture
def crt(lib):
    return _fresh(lib)


def _registry(name: bytes, entries: list[tuple[bytes | None, object]]) -> FuncRegistry:
    arr = (FuncEntry * max(len(entries), 1))()
    for i, (fname, fn) in enumerate(entries):
        arr[i].name = fname
        arr[i].func = fn if fn is not None else TVMBackendPackedCFunc()
    reg = FuncRegistry(name, ctypes.cast(arr, ctypes.POINTER(FuncEntry)), len(entries))
    KEEP.append((arr, reg, entries))
    return reg


def _packed(fn) -> TVMBackendPackedCFunc:
    cb = TVMBackendPackedCFunc(fn)
    KEEP.append(cb)
    return cb


def _call(lib, handle, ints: list[int]) -> tuple[int, int, int]:
    """TVMFuncCall(handle, ints...) -> (rc, ret value, ret code)."""
    args = (TVMValue * max(len(ints), 1))()
    codes = (ctypes.c_int * max(len(ints), 1))()
    for i, v in enumerate(ints):
        args[i].v_int64 = v
    ret, ret_code = TVMValue(), ctypes.c_int(-1)
    rc = lib.TVMFuncCall(handle, args, codes, len(ints), ctypes.byref(ret), ctypes.byref(ret_code))
    return rc, ret.v_int64, ret_code.value


def _lookup(lib, name: bytes) -> tuple[int, int | None]:
    out = ctypes.c_void_p(12345)
    rc = lib.TVMBackendGetFuncFromEnv(None, name, ctypes.byref(out))
    return rc, out.value


# ---- workspace --------------------------------------------------------------------------

def test_init_rejects_bad_pools(crt):
    assert crt.ember_crt_init(None, 100) == E["kTvmErrorWorkspaceInvalidPool"]
    assert last_error(crt) == ("kTvmErrorWorkspaceInvalidPool",
                               ("ember_crt_init: the pool must be non-NULL and hold at least one "
                                "block (alignment 64 plus a header); got 100 bytes at NULL"))
    tiny = ctypes.create_string_buffer(16)
    assert crt.ember_crt_init(tiny, 16) == E["kTvmErrorWorkspaceInvalidPool"]
    # the previous arena is kept after a refused init
    assert crt.ember_crt_workspace_stats().size > 4000


def test_reset_recovers_from_a_failed_run(crt):
    a = crt.TVMBackendAllocWorkspace(1, 0, 100, 2, 32)
    b = crt.TVMBackendAllocWorkspace(1, 0, 100, 2, 32)
    assert a and b and crt.ember_crt_workspace_stats().live == 2
    pool = ctypes.create_string_buffer(1024)
    KEEP.append(pool)
    assert crt.ember_crt_init(pool, 1024) == E["kTvmErrorWorkspaceBusy"]
    crt.ember_crt_workspace_reset()  # the run failed before freeing: drop both blocks
    assert crt.ember_crt_workspace_stats().live == 0
    assert crt.TVMBackendFreeWorkspace(1, 0, b) == E["kTvmErrorWorkspaceFreeInvalid"]
    assert crt.ember_crt_init(pool, 1024) == 0 and last_error(crt) == ("kTvmErrorNoError", "")


def test_release_to_keeps_the_blocks_below_the_mark(crt):
    keep = crt.TVMBackendAllocWorkspace(1, 0, 64, 2, 32)
    mark = crt.ember_crt_workspace_stats()
    assert crt.TVMBackendAllocWorkspace(1, 0, 100, 2, 32)  # a failed run's leftovers
    assert crt.ember_crt_workspace_release_to(mark) == 0
    assert crt.ember_crt_workspace_stats().live == 1
    assert crt.TVMBackendFreeWorkspace(1, 0, keep) == 0
    assert crt.ember_crt_workspace_release_to(mark) == E["kTvmErrorGenericInvalidArgument"]
    code, message = last_error(crt)
    assert code == "kTvmErrorGenericInvalidArgument" and "is not below the arena's state" in message


@settings(max_examples=40, deadline=None)
@given(nbytes=st.one_of(st.integers(0, 5000), st.integers(0, 2**64 - 1)))
def test_alloc_succeeds_exactly_when_the_request_fits(lib, nbytes):
    crt = _fresh(lib)
    first = crt.TVMBackendAllocWorkspace(1, 0, 1000, 2, 32)
    before = crt.ember_crt_workspace_stats()
    fits = nbytes <= before.size - ((before.used + 24 + 63) // 64 * 64) - 4
    ptr = crt.TVMBackendAllocWorkspace(1, 0, nbytes, 2, 32)
    if fits:
        assert ptr and ptr % 64 == 0
        assert crt.TVMBackendFreeWorkspace(1, 0, ptr) == 0
    else:
        assert ptr is None
        code, msg = last_error(crt)
        assert code == "kTvmErrorWorkspaceExhausted"
        assert msg.startswith(f"TVMBackendAllocWorkspace: workspace arena exhausted: requested "
                              f"{nbytes} bytes, ")
        assert crt.ember_crt_workspace_stats().used == before.used
    assert crt.TVMBackendFreeWorkspace(1, 0, first) == 0


def test_free_of_null_is_a_no_op_and_devices_are_checked(crt):
    assert crt.TVMBackendFreeWorkspace(1, 0, None) == 0
    assert crt.TVMBackendFreeWorkspace(2, 3, None) == E["kTvmErrorWorkspaceUnsupportedDevice"]
    assert last_error(crt)[1] == ("TVMBackendFreeWorkspace: device type 2 (id 3) is not "
                                  "supported; the C runtime allocates on the CPU (type 1) only")


# ---- registry ---------------------------------------------------------------------------

def _ok(args, codes, n, ret, ret_code, handle):
    return 0


@pytest.mark.parametrize("entries, message", [
    ([(b"a", _ok), (None, _ok)], "'m' entry 1: the name is NULL"),
    ([(b"a", None)], "'m' entry 0: the function pointer is NULL"),
    ([(b"x" * 128, _ok)], "'m' entry 0: the name is longer than EMBER_CRT_MAX_NAME_LENGTH"),
])
def test_invalid_registries_are_refused(crt, entries, message):
    reg = _registry(b"m", [(n, _packed(f) if f else None) for n, f in entries])
    assert crt.ember_crt_register_func_registry(ctypes.byref(reg)) == \
        E["kTvmErrorFunctionRegistryInvalid"]
    assert last_error(crt)[1] == f"ember_crt_register_func_registry: {message}"
    assert _lookup(crt, b"a") == (E["kTvmErrorFunctionNameNotFound"], None)


def test_registry_checks_duplicates_null_and_capacity(crt):
    ok = _packed(_ok)
    dup = _registry(b"d", [(b"f", ok), (b"g", ok), (b"f", ok)])
    assert crt.ember_crt_register_func_registry(ctypes.byref(dup)) == \
        E["kTvmErrorFunctionRegistryDuplicate"]
    assert last_error(crt)[1] == "ember_crt_register_func_registry: 'd' has two functions " \
                                 "named 'f'"
    assert crt.ember_crt_register_func_registry(None) == E["kTvmErrorFunctionRegistryInvalid"]
    nulls = FuncRegistry(b"n", None, 3)
    assert crt.ember_crt_register_func_registry(ctypes.byref(nulls)) == \
        E["kTvmErrorFunctionRegistryInvalid"]
    regs = [_registry(b"r%d" % i, [(b"f%d" % i, ok)]) for i in range(5)]
    for reg in regs[:4]:
        assert crt.ember_crt_register_func_registry(ctypes.byref(reg)) == 0
    assert crt.ember_crt_register_func_registry(ctypes.byref(regs[0])) == 0  # again: no-op
    assert crt.ember_crt_register_func_registry(ctypes.byref(regs[4])) == \
        E["kTvmErrorFunctionRegistryFull"]
    assert "cannot add 'r4': all 4 slots are taken" in last_error(crt)[1]
    assert _lookup(crt, b"f3")[0] == 0 and _lookup(crt, b"f4")[0] != 0


def test_lookup_and_call_through_the_registry(crt):
    def add(args, codes, n, ret, ret_code, handle):
        ret[0].v_int64 = sum(args[i].v_int64 for i in range(n))
        ret_code[0] = 0  # kTVMArgInt
        return 0

    reg = _registry(b"model", [(b"ops.noop", _packed(_ok)), (b"ops.add", _packed(add))])
    assert crt.ember_crt_register_func_registry(ctypes.byref(reg)) == 0
    rc, handle = _lookup(crt, b"ops.add")
    out = ctypes.c_void_p()
    assert rc == 0 and crt.TVMFuncGetGlobal(b"ops.add", ctypes.byref(out)) == 0
    assert out.value == handle
    assert _call(crt, handle, [2, 3, 4]) == (0, 9, 0)
    assert _call(crt, _lookup(crt, b"ops.noop")[1], []) == (0, 0, 4)  # ret code kTVMNullptr
    assert crt.TVMFuncFree(handle) == 0
    assert _lookup(crt, b"ops.ad") == (E["kTvmErrorFunctionNameNotFound"], None)
    assert last_error(crt)[1] == ("TVMBackendGetFuncFromEnv: no function named 'ops.ad' among "
                                  "the 2 functions of 1 registered registry(ies)")
    assert crt.TVMBackendGetFuncFromEnv(None, None, ctypes.byref(out)) == \
        E["kTvmErrorGenericInvalidArgument"]


def test_call_refuses_bad_handles_and_argument_lists(crt):
    reg = _registry(b"model", [(b"f", _packed(_ok)), (b"g", _packed(_ok))])
    assert crt.ember_crt_register_func_registry(ctypes.byref(reg)) == 0
    handle = _lookup(crt, b"g")[1]
    bogus = ctypes.c_int64(0)
    for bad in (None, ctypes.addressof(bogus), handle + 1, handle + ctypes.sizeof(FuncEntry)):
        assert _call(crt, bad, [])[0] == E["kTvmErrorFunctionHandleInvalid"]
    assert "the handle is not a function of a registered registry" in last_error(crt)[1]
    assert _call(crt, handle, [0] * 65)[0] == E["kTvmErrorFunctionCallNumArgs"]
    assert last_error(crt)[1] == ("TVMFuncCall: 'g': bad argument list (65 arguments; at most "
                                  "EMBER_CRT_MAX_ARGS = 64, arrays non-NULL)")
    assert crt.TVMFuncCall(handle, None, None, 1, None, None) == E["kTvmErrorFunctionCallNumArgs"]
    assert crt.TVMFuncCall(handle, None, None, 0, None, None) == 0  # no return slots: fine
    crt.ember_crt_clear_func_registries()
    assert _call(crt, handle, [])[0] == E["kTvmErrorFunctionHandleInvalid"]


@settings(max_examples=25, deadline=None)
@given(rc=st.integers(-2**31, 2**31 - 1).filter(bool), says_why=st.booleans())
def test_a_failing_callee_is_reported(lib, rc, says_why):
    crt = _fresh(lib)

    def fail(args, codes, n, ret, ret_code, handle):
        if says_why:
            crt.TVMPackedFuncSetLastError(b"fail: input 0 is negative")
        return rc

    crt.TVMAPISetLastError(b"an old message")
    reg = _registry(b"model", [(b"fail", _packed(fail))])
    assert crt.ember_crt_register_func_registry(ctypes.byref(reg)) == 0
    assert _call(crt, _lookup(crt, b"fail")[1], [1])[0] == rc
    if says_why:
        assert last_error(crt) == ("kTvmErrorFunctionReportedError", "fail: input 0 is negative")
    else:
        why = f"TVMFuncCall: 'fail' returned {rc} without setting an error message"
        assert last_error(crt) == ("kTvmErrorFunctionCallFailed", why)


# ---- errors and parallel launch ---------------------------------------------------------

def test_messages_are_kept_truncated_and_cleared(crt):
    crt.TVMPackedFuncSetLastError(b"x" * 1000)
    assert last_error(crt) == ("kTvmErrorFunctionReportedError", "x" * 255)
    crt.TVMAPISetLastError(None)
    assert last_error(crt) == ("kTvmErrorNoError", "")
    crt.TVMAPISetLastError(b"y")
    crt.TVMPackedFuncSetLastError(b"")
    assert last_error(crt) == ("kTvmErrorNoError", "")


def test_every_code_has_its_name(crt):
    assert {crt.ember_crt_error_name(v).decode(): v for v in E.values()} == E
    assert crt.ember_crt_error_name(12345) == b"kTvmErrorUnknown"


class _GroupEnv(ctypes.Structure):
    _fields_ = [("sync_handle", ctypes.c_void_p), ("num_task", ctypes.c_int32)]


def test_parallel_launch_runs_one_task(crt):
    seen = []

    def task(task_id, penv, cdata):
        num_task = ctypes.cast(penv, ctypes.POINTER(_GroupEnv)).contents.num_task
        seen.append((task_id, num_task, cdata))
        return 0

    cb = ParallelLambda(task)
    assert crt.TVMBackendParallelLaunch(cb, 77, 8) == 0 and seen == [(0, 1, 77)]
    assert crt.TVMBackendParallelLaunch(ParallelLambda(lambda t, p, c: 5), None, 0) == \
        E["kTvmErrorFunctionParallelTaskFailed"]
    assert last_error(crt)[1] == ("TVMBackendParallelLaunch: the task returned 5 without "
                                  "setting an error message")
    assert crt.TVMBackendParallelLaunch(ParallelLambda(), None, 0) == \
        E["kTvmErrorGenericInvalidArgument"]
