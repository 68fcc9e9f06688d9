"""Memory leaks: a small model run 100,000 times through each executor (graph, debug, AOT packed
and C interface, VM module interface and VirtualMachine.invoke), each iteration setting all
three inputs and reading the output back, must leave the resident set size flat; so must
creating and freeing NDArrays and calling PackedFuncs (compiled code, Python callbacks called
from C, functions looked up by C) in a loop.

Measure: RSS from ``/proc/self/statm`` after a warm-up of 5,000 iterations (pools, caches and
allocator arenas filled) and after the 100,000 more, each after ``gc.collect()``. Tolerance:
less than 2 MiB of growth. A leak of one small object per iteration (a 56-byte ctypes array,
a handle table entry, an NDArray view: 50 to 500 bytes) would add 5 to 50 MB over 100,000
iterations, far above 2 MiB; what legitimately moves RSS without a leak is the allocator
keeping a few pages more (measured here: 0 KiB in every case). The handle table of the
C bridge must also end with exactly the entries it started with.

The 100,000-iteration runs are slow (VM iterations cost ~100 us): marked ``slow``. A default-run
test checks the handle table and Python object counts over 1,000 iterations.
"""
from __future__ import annotations

import gc
import os
import shutil
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember
from ember.runtime import _bridge, dso, loaders
from ember.runtime.module import CSourceModule
from ember.runtime.vm import VirtualMachine
from ember.testing import find_c_compiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _executor_fuzz import factory, reference  # noqa: E402
from _ffi_testlib import C_SOURCE  # noqa: E402

pytestmark = [pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found"),
              pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                 reason="needs /proc/self/statm (Linux)")]
WARMUP, ITERATIONS, TOLERANCE = 5_000, 100_000, 2 << 20
A = np.arange(6, dtype="float32").reshape(2, 3)
B = np.array([1, 2, 3], "float32")
C = np.array([[1, 0, 2], [3, 1, 1]], "int32")
WANT = reference({"a": A, "b": B, "c": C})


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _executor_step(kind: str) -> Callable[[], Any]:
    if kind == "debug":
        m = factory("graph").debug_create("default", ember.cpu(0))

        def run() -> None:
            m.run(number=1, repeat=1, min_repeat_ms=0, display=False)
    elif kind == "vm-invoke":
        vm = VirtualMachine(factory("vm").get_executor(), ember.cpu(0))
        return lambda: vm.invoke("main", A, B, C).numpy()
    else:
        m = factory(kind)["default"](ember.cpu(0))
        run = m.run

    def step() -> np.ndarray:
        m.set_input("a", A)
        m.set_input("b", B)
        m.set_input("c", C)
        run()
        return m.get_output(0).numpy()
    return step


@pytest.fixture(scope="module")
def kernels() -> Any:
    return CSourceModule(C_SOURCE)


def _ffi_steps(kernels: Any) -> dict[str, Callable[[], Any]]:
    x, out = ember.nd.array(np.ones(64, "float32")), ember.nd.empty((64,), "float32")
    ember.register_func("testing.leak_callback", lambda *args: len(args), override=True)
    callback = ember.get_global_func("testing.leak_callback")
    add, call_cb, call_global = kernels["add_f32"], kernels["call_cb"], kernels["call_global"]
    return {
        "nd.array": lambda: ember.nd.array(A),
        "nd.empty": lambda: ember.nd.empty((32, 32), "float32"),
        "compiled call": lambda: add(x, x, out),
        "python callback from C": lambda: call_cb(callback, 1, 2.5, "s", x),
        "lambda callback from C": lambda: call_cb(lambda: 1),
        "C looks a function up": lambda: call_global("testing.leak_callback", 1),
    }


EXECUTORS = ["graph", "debug", "aot-packed", "aot-c", "vm", "vm-invoke"]
FFI = ["nd.array", "nd.empty", "compiled call", "python callback from C",
       "lambda callback from C", "C looks a function up"]


def _growth(step: Callable[[], Any], warmup: int, iterations: int) -> tuple[int, int]:
    """(RSS growth in bytes, handle table growth) over ``iterations`` after ``warmup``."""
    for _ in range(warmup):
        step()
    gc.collect()
    before, handles = rss(), len(_bridge._HANDLES)
    for _ in range(iterations):
        step()
    gc.collect()
    return rss() - before, len(_bridge._HANDLES) - handles


@pytest.mark.slow
@pytest.mark.parametrize("kind", EXECUTORS)
def test_executors_do_not_leak(kind):
    step = _executor_step(kind)
    np.testing.assert_array_equal(step(), WANT)
    grown, handles = _growth(step, WARMUP, ITERATIONS)
    assert handles == 0, f"{kind}: {handles} handles left in the table"
    assert grown < TOLERANCE, f"{kind}: RSS grew by {grown / 2**20:.2f} MiB over {ITERATIONS} runs"
    np.testing.assert_array_equal(step(), WANT)


@pytest.mark.slow
@pytest.mark.parametrize("name", FFI)
def test_arrays_and_packed_calls_do_not_leak(kernels, name):
    grown, handles = _growth(_ffi_steps(kernels)[name], WARMUP, ITERATIONS)
    assert handles == 0, f"{name}: {handles} handles left in the table"
    assert grown < TOLERANCE, f"{name}: RSS grew by {grown / 2**20:.2f} MiB"


def _objects() -> int:
    gc.collect()
    return len(gc.get_objects())


@pytest.mark.parametrize("kind", EXECUTORS)
def test_no_objects_or_handles_accumulate(kind):
    """The quick check of the default run: Python objects and handles stay flat."""
    step = _executor_step(kind)
    for _ in range(200):
        step()
    before, handles = _objects(), len(_bridge._HANDLES)
    for _ in range(1_000):
        step()
    assert len(_bridge._HANDLES) == handles
    assert _objects() - before < 50, f"{kind}: Python objects accumulate"  # 1,000 if per run


def test_loading_a_library_again_and_again_does_not_leak(tmp_path):
    """A loaded library is unloaded with its last module: loading one exported model 100 times
    (each dropped after one run) keeps RSS within 8 MiB and the handle table as it was. Before,
    every load was a private copy that stayed mapped (about 0.5 MiB per load of a small MLP
    with its weights: 50 MiB here). ``test_load_forever.py`` runs thousands of cycles."""
    from ember.relay.testing import mlp

    mod, params = mlp.get_workload(batch_size=1)
    path = str(tmp_path / "mlp.so")
    ember.relay.build(mod, "llvm", params=params).export_library(path)
    x = np.random.default_rng(0).random((1, 1, 28, 28), dtype="float32")

    def load_and_run() -> np.ndarray:
        m = ember.contrib.graph_executor.GraphModule(
            ember.runtime.load_module(path)["default"](ember.cpu(0)))
        m.set_input("data", x)
        m.run()
        return m.get_output(0).numpy()

    want = load_and_run()
    for _ in range(10):
        load_and_run()
    gc.collect()
    handles, before = len(_bridge._HANDLES), rss()
    for _ in range(100):
        np.testing.assert_array_equal(load_and_run(), want)
    gc.collect()
    assert rss() - before < 8 << 20
    assert len(_bridge._HANDLES) == handles


def test_functions_found_by_compiled_code_do_not_keep_a_library_loaded(tmp_path):
    """Compiled code's call_packed lookups (``TVMBackendGetFuncFromEnv``) are cached per module
    in the handle table. A strong entry for one of the module's own functions (which holds the
    module) kept module and library loaded for good, and left the handles behind: three per
    load here. The entries now go with the module."""
    path = str(tmp_path / "ffi.so")
    shutil.copyfile(CSourceModule(C_SOURCE).compile(), path)
    ember.register_func("testing.leak_env", lambda *args: 7, override=True)

    def load_and_call() -> None:
        mod = ember.runtime.load_module(path)
        assert mod["call_global"]("testing.leak_env") == 7  # the registry's
        assert mod["call_global"]("nop") is None  # the module's own
        assert mod["call_global"]("nop") is None  # cached

    load_and_call()
    gc.collect()
    handles, libraries, opened = len(_bridge._HANDLES), len(loaders._LIBRARIES), open_libraries()
    for _ in range(200):
        load_and_call()
    gc.collect()
    assert len(_bridge._HANDLES) == handles
    assert (len(loaders._LIBRARIES), open_libraries()) == (libraries, opened)


def test_a_cached_lookup_outlives_the_module_only_as_an_error(tmp_path):
    """A function of a library keeps its module, so its lookups stay valid while it can run;
    a stale handle (kept by C past its module) is an error naming the handle, not a crash."""
    path = str(tmp_path / "ffi.so")
    shutil.copyfile(CSourceModule(C_SOURCE).compile(), path)
    call_global = ember.runtime.load_module(path)["call_global"]
    gc.collect()
    assert call_global("nop") is None  # the module lives on in its function
    handle = _bridge.new_handle(ember.runtime.load_module(path)["nop"], weak=True)
    gc.collect()
    with pytest.raises(ember.TVMError, match=rf"invalid function handle {handle}: the function "
                                             "it named was freed"):
        _bridge.lookup_handle(handle, "function")
    _bridge.release_handle(handle)


def open_libraries() -> int:
    return dso.library_stats()["open"]
