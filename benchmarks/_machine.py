"""What a benchmark ran on: CPU, the SIMD level ember compiles for, versions, and a peak.

The peak is numpy's float32 matrix product (``A @ B``, which calls the sgemm of the BLAS
numpy ships, OpenBLAS in the PyPI wheels) on square ``n x n`` matrices, with the BLAS limited
to ``threads`` workers by threadpoolctl: the best of several calls, as 2 * n^3 / seconds. It
is a practical peak (what a tuned library reaches on this machine right now, under the same
load as the models), not the datasheet's FMA throughput.
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

import ember
from ember.contrib import cc

REPO = Path(__file__).resolve().parents[1]

# Preprocessor macro -> SIMD feature name, most capable first within each family.
_SIMD_MACROS = (("__AVX512F__", "avx512f"), ("__AVX512VNNI__", "avx512vnni"),
                ("__AVX2__", "avx2"), ("__AVX__", "avx"), ("__FMA__", "fma"),
                ("__SSE4_2__", "sse4.2"), ("__ARM_NEON", "neon"), ("__ARM_FEATURE_SVE", "sve"))


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo, else platform)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model", "Hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def simd_level() -> dict[str, Any]:
    """The SIMD features ember's kernels are compiled for: the ``-march`` of ember's compiler
    flags (``-march=native`` or ``$EMBER_MARCH``), and the features the compiler enables for
    it (its predefined macros), e.g. {"march": "native", "features": "avx2+fma"}."""
    flags = cc.default_flags()
    march = next((f for f in flags if f.startswith("-march=")), "")
    argv = [*shlex.split(cc.find_cc()), *([march] if march else []), "-dM", "-E", "-x", "c",
            os.devnull]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    macros = set(proc.stdout.split())
    found = [name for macro, name in _SIMD_MACROS if macro in macros]
    # avx512f implies avx2 and avx; keep the headline plus fma (or vnni) for the reader
    if "avx512f" in found:
        found = [f for f in found if f not in ("avx2", "avx", "sse4.2")]
    elif "avx2" in found:
        found = [f for f in found if f not in ("avx", "sse4.2")]
    return {"march": march.removeprefix("-march=") or "(compiler default)",
            "features": "+".join(found) or "scalar", "compiler": cc.find_cc()}


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--",
                                "ember"], capture_output=True, text=True,
                               check=False).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def versions() -> dict[str, str]:
    """Versions of ember (its git commit and where it was imported from), onnxruntime, onnx,
    numpy, Python, and OpenVINO where it is installed."""
    import onnx
    import onnxruntime

    out = {"ember": ember.__version__, "ember_commit": _git_commit(),
           "ember_path": str(Path(ember.__file__).resolve().parent),
           "onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
           "numpy": np.__version__, "python": platform.python_version()}
    try:
        import openvino
    except ImportError:
        return out
    return {**out, "openvino": openvino.__version__}


def sgemm_peak(threads: int, n: int = 1024, min_time: float = 0.3) -> float:
    """GFLOP/s of numpy's float32 n x n x n matrix product on ``threads`` BLAS threads: the
    best call over at least ``min_time`` seconds (and at least 3 calls)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), np.float32)
    best, spent, calls = float("inf"), 0.0, 0
    with threadpool_limits(limits=threads, user_api="blas"):
        np.matmul(a, b, out=out)  # warm up: pages touched, BLAS threads started
        while calls < 3 or spent < min_time:
            start = time.perf_counter()
            np.matmul(a, b, out=out)
            elapsed = time.perf_counter() - start
            best, spent, calls = min(best, elapsed), spent + elapsed, calls + 1
    return 2 * n**3 / best / 1e9


def blas_name() -> str:
    """The BLAS library numpy's matmul calls (as threadpoolctl reports it)."""
    from threadpoolctl import threadpool_info

    for info in threadpool_info():
        if info.get("user_api") == "blas":
            return f"{info.get('internal_api')} {info.get('version')}"
    return "unknown BLAS"
