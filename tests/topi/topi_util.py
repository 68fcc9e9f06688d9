"""Helpers for topi tests (``from topi_util import ...``): schedule, build, run, compare."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ember
from ember import te, tir, topi
from ember.contrib import cc

_MODULES: dict[str, Any] = {}


def _need_cc() -> None:
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")


def c_compiler() -> str:
    """The C compiler's path (skips the test when there is none)."""
    compiler = cc.get_cc()
    if compiler is None:
        pytest.skip("no C compiler found")
    return compiler


def host_has(feature: str) -> bool:
    """Whether this machine's CPU has ``feature`` (e.g. "avx2", "avx512f")."""
    from ember.target.simd import host_features

    return feature in host_features()


# SIMD levels a C harness is compiled at (-march, or gemm_simd.h's portable C99 path) and the
# CPU feature a level needs to run here
HARNESS_LEVELS = {"avx512": ["-march=x86-64-v4"], "avx2": ["-march=x86-64-v3"],
                  "sse2": ["-march=x86-64-v2"], "portable": ["-DEMBER_KERNELS_PORTABLE"]}
HARNESS_FEATURE = {"avx512": "avx512f", "avx2": "avx2"}
HARNESS_STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-ffp-contract=fast"]


def harness_library(source: Path, level: str, out_dir: Path) -> Any:
    """The C harness ``source`` (which includes kernel headers) compiled warning-free at SIMD
    ``level`` (a key of :data:`HARNESS_LEVELS`) into ``out_dir`` and loaded with ctypes; the
    test is skipped when this machine cannot run that level (after compiling: the code must
    build everywhere)."""
    import ctypes
    import subprocess

    include = Path(ember.__file__).parent / "include"
    out = out_dir / f"{source.stem}_{level}.so"
    cmd = [c_compiler(), *HARNESS_STRICT, *HARNESS_LEVELS[level], "-fPIC", "-shared", "-I",
           str(include), str(source), "-o", str(out), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    if level in HARNESS_FEATURE and not host_has(HARNESS_FEATURE[level]):
        pytest.skip(f"compiled for {level}; the host cannot run it")
    return ctypes.CDLL(str(out))


def build_funcs(funcs: dict[str, tuple[Any, list]]) -> Any:
    """One module from ``{name: (schedule, args)}`` (one C file, one compile)."""
    _need_cc()
    prims = [te.lower(s, args, name) for name, (s, args) in funcs.items()]
    mod = tir.build(prims)
    return mod


def run_kernel(outs: Any, inputs: Sequence[te.Tensor], arrays: Sequence[np.ndarray],
               schedule: Callable | None = None, name: str = "kernel",
               out_shapes: Sequence[Sequence[int]] | None = None) -> list[np.ndarray]:
    """Schedule ``outs`` (auto_schedule by default), build, run on ``arrays``; the outputs."""
    _need_cc()
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    s = (schedule or topi.auto_schedule)(outs)
    func = te.lower(s, list(inputs) + outs, name)
    key = str(func)
    mod = _MODULES.get(key)
    if mod is None:
        mod = _MODULES[key] = tir.build(func)
    shapes = out_shapes or [[int(d) for d in o.shape] for o in outs]
    nd_out = [ember.nd.empty(sh, o.dtype) for sh, o in zip(shapes, outs)]
    mod[name](*[ember.nd.array(a) for a in arrays], *nd_out)
    return [o.numpy() for o in nd_out]


def check(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5
          ) -> None:
    """Compare with numpy: exact for ints/bools, tolerances for floats; shapes must match."""
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def rand(shape: Sequence[int], dtype: str = "float32", seed: int = 0, lo: float = -2.0,
         hi: float = 2.0) -> np.ndarray:
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    if dtype.startswith("int") or dtype.startswith("uint"):
        return rng.integers(int(lo) if lo > -100 else -5, 6, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    return rng.uniform(lo, hi, size=shape).astype(dtype)
