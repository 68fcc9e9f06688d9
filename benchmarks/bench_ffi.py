"""Per-call cost of the FFI: Python -> compiled C, and compiled C -> Python.

    python benchmarks/bench_ffi.py [--number N] [--repeat R] [--json PATH]

Prints a table of microseconds per call (best of R repeats of N calls; the defaults, many
short repeats, make the figures stable on a shared machine) and writes the same
figures as JSON (default bench_results/ffi.json in the cache directory). Cases:

- ``c_nop``: a compiled PackedFunc with no arguments, called from Python;
- ``c_3_ndarrays``: a compiled PackedFunc taking 3 NDArrays (it checks their type codes and
  ndim, as generated code does), called from Python; target < 2 us;
- ``py_from_c``: a Python function with no arguments called from C (C loops N times);
- ``py_from_c_int``: the same with one int argument and an int result;
- ``py_from_py``: a registered Python PackedFunc called from Python (for reference);
- ``ctypes_floor``: the bare ctypes call of the same no-op C function with preallocated
  arrays, the floor any ctypes-based FFI pays.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import open_results, results_path  # noqa: E402
import ember  # noqa: E402
from ember.runtime.module import CSourceModule  # noqa: E402

C_SOURCE = r"""
#include "ember/c_backend_api.h"

TVM_DLL int nop(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  return 0;
}

TVM_DLL int check3(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  int i;
  if (n != 3) { TVMPackedFuncSetLastError("check3: expected 3 arguments"); return -1; }
  for (i = 0; i < 3; ++i) {
    if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
      TVMPackedFuncSetLastError("check3: expected tensors");
      return -1;
    }
    if (((DLTensor*)args[i].v_handle)->ndim != 1) {
      TVMPackedFuncSetLastError("check3: expected ndim 1");
      return -1;
    }
  }
  return 0;
}

/* call_n(f, count[, x]): call f() (or f(x)) count times */
TVM_DLL int call_n(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  int64_t i, count = args[1].v_int64;
  for (i = 0; i < count; ++i) {
    TVMValue r;
    int rc;
    if (TVMFuncCall(args[0].v_handle, args + 2, codes + 2, n - 2, &r, &rc) != 0) return -1;
  }
  return 0;
}
"""


def best_us(run: Callable[[int], float], number: int, repeat: int) -> float:
    """Best (smallest) per-call time in microseconds over ``repeat`` runs of ``number`` calls."""
    return min(run(number) for _ in range(repeat)) / number * 1e6


def loop(f: Callable[..., Any], *args: Any) -> Callable[[int], float]:
    def run(number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            f(*args)
        return time.perf_counter() - start

    return run


def c_loop(call_n: Callable[..., Any], f: Callable[..., Any],
           *extra: Any) -> Callable[[int], float]:
    def run(number: int) -> float:
        start = time.perf_counter()
        call_n(f, number, *extra)
        return time.perf_counter() - start

    return run


def ctypes_floor(mod: Any) -> Callable[[int], float]:
    cfn = mod["nop"]._cfn
    vals, codes = (ctypes.c_int64 * 8)(), (ctypes.c_int * 8)()
    ret, ret_code = (ctypes.c_int64 * 1)(), (ctypes.c_int * 1)()
    return loop(cfn, vals, codes, 0, ret, ret_code, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Many short repeats: the best of them filters out preemption on a busy machine.
    parser.add_argument("--number", type=int, default=5_000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=200, help="repeats (the best is kept)")
    default_json = results_path("ffi.json")
    parser.add_argument("--json", default=str(default_json), help="where to write results")
    opts = parser.parse_args()

    mod = CSourceModule(C_SOURCE)
    arrays = [ember.nd.array(np.zeros(16, "float32")) for _ in range(3)]
    py_nop = ember.register_func("bench_ffi.nop", lambda: None, override=True)
    py_inc = ember.register_func("bench_ffi.inc", lambda x: x + 1, override=True)
    packed_nop = ember.get_global_func("bench_ffi.nop")
    cases = {
        "c_nop": loop(mod["nop"]),
        "c_3_ndarrays": loop(mod["check3"], *arrays),
        "py_from_c": c_loop(mod["call_n"], py_nop),
        "py_from_c_int": c_loop(mod["call_n"], py_inc, 1),
        "py_from_py": loop(packed_nop),
        "ctypes_floor": ctypes_floor(mod),
    }
    for run in cases.values():  # warm up
        run(1000)
    results = {name: best_us(run, opts.number, opts.repeat) for name, run in cases.items()}

    print(f"{'case':<16} {'us/call':>9}")
    for name, us in results.items():
        note = "  (target < 2 us)" if name == "c_3_ndarrays" else ""
        print(f"{name:<16} {us:>9.3f}{note}")
    os.makedirs(os.path.dirname(os.path.abspath(opts.json)), exist_ok=True)
    with open_results(opts.json) as f:
        json.dump({"benchmark": "ffi", "unit": "us_per_call", "number": opts.number,
                   "repeat": opts.repeat, "python": platform.python_version(),
                   "machine": platform.machine(), "processor": platform.processor(),
                   "results": results}, f, indent=2)
    print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
