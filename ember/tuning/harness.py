"""The measuring harness: ember's GEMM and conv kernels in one small C library per CPU choice.

The kernels take their tiles as run-time arguments, so one compile of the harness serves every
candidate: ``ember_tune_sgemm``, ``ember_tune_conv2d_nchwc_x{4,8,16}`` and
``ember_tune_depthwise_nchwc_x{4,8,16}`` call the kernel
``number`` times with the tiles given and return the mean time of one call (the loop runs in C,
so small kernels are not timed together with ctypes' call overhead). The harness is a library
per part, built when a workload first needs it: the GEMM, and the conv and depthwise kernels of
one lane count (a build for AVX2 uses 8 and 4 lanes, never 16). A part is a small timing unit
that links the kernels' objects (``tir/kernel_objects.py``): the objects model libraries link,
cached by content and flags, so the harness times exactly the code a model runs and compiles
nothing a model build of the same CPU choice has compiled. Each is built by the project's
compiler driver (``contrib/cc.py``, cached under ``$EMBER_CACHE_DIR/lib``; sources under
``$EMBER_CACHE_DIR/tuning/harness``) with the instruction-set flags of the build being tuned,
and runs on its own thread pool (``EmberSetNumThreads``, set on every part).

A :class:`Workload` holds random inputs for one kernel call (numpy, float32, the layouts of
the kernel headers: a packed B for GEMM, NCHW[L]c for conv) and runs it with given tiles.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..contrib import cc
from ..runtime.cache import atomic_write, cache_dir, content_hash
from ..runtime.errors import TVMError
from ..target.simd import CpuChoice, host_features
from ..tir.kernel_objects import object_sources
from ..topi.nn import conv2d_nchwc as conv_kernel
from ..topi.nn import gemm_kernel
from ..topi.tile_records import Query

# Each part declares the kernels it calls (ember/kernels/linkage.h) and links their kernel
# objects: the very objects (cached by content and flags) that model libraries link.
_PROLOGUE = r"""/* ember's tile-search harness (ember/tuning/harness.py): time kernel calls. */
#define _POSIX_C_SOURCE 199309L
#include <time.h>
#define EMBER_KERNELS_LINKED 1
"""
_NOW = r"""
static double ember_tune_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
"""
_SGEMM = r"""
/* g: batch M N K a_bs lda b_bs b_ks b_ns b_nr c_bs ldc; t: mc kc parallel */
int ember_tune_sgemm(const float* a, const float* b, float* c, const int32_t* g,
                     const int32_t* t, int32_t number, double* seconds) {
  int32_t i, rc = 0;
  double start = ember_tune_now();
  for (i = 0; i < number && rc == 0; ++i) {
    rc = ember_sgemm(g[0], g[1], g[2], g[3], a, g[4], g[5], b, g[6], g[7], g[8], g[9], c, g[10],
                     g[11], 1.0f, 0, c, 0, c, 0, 0.0f, 0.0f, 0, 0.0f, 0.0f, t[0], t[1], t[2],
                     1, 0, 0, 0);
  }
  *seconds = (ember_tune_now() - start) / (number > 0 ? number : 1);
  return rc;
}
"""
_GEMM = r"""#include "ember/kernels/gemm.h"
""" + _NOW + _SGEMM
_CONV = r"""
/* g: the 17 size arguments of ember_conv2d_nchwc_x<L>; t: rb rw strip order threads */
#define EMBER_TUNE_CONV(L)                                                                    \
  int ember_tune_conv2d_nchwc_x##L(const float* in, const float* w, const float* bias,        \
                                   float* out, const int32_t* g, const int32_t* t,            \
                                   int32_t number, double* seconds) {                        \
    int32_t i, rc = 0;                                                                        \
    double start = ember_tune_now();                                                          \
    for (i = 0; i < number && rc == 0; ++i) {                                                 \
      rc = ember_conv2d_nchwc_x##L(in, w, bias, out, out, g[0], g[1], g[2], g[3], g[4], g[5], \
                                   g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], \
                                   g[15], g[16], 0, 0.0f, 0.0f, 0, t[0], t[1], t[2], t[3],    \
                                   t[4]);                                                     \
    }                                                                                         \
    *seconds = (ember_tune_now() - start) / (number > 0 ? number : 1);                        \
    return rc;                                                                                \
  }

/* g: the 14 size arguments of ember_depthwise_nchwc_x<L>; t: strip threads */
#define EMBER_TUNE_DW(L)                                                                      \
  int ember_tune_depthwise_nchwc_x##L(const float* in, const float* w, const float* bias,     \
                                      float* out, const int32_t* g, const int32_t* t,         \
                                      int32_t number, double* seconds) {                     \
    int32_t i, rc = 0;                                                                        \
    double start = ember_tune_now();                                                          \
    for (i = 0; i < number && rc == 0; ++i) {                                                 \
      rc = ember_depthwise_nchwc_x##L(in, w, bias, out, out, g[0], g[1], g[2], g[3], g[4],    \
                                      g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],      \
                                      g[13], 0, 0.0f, 0.0f, 0, t[0], t[1]);                   \
    }                                                                                         \
    *seconds = (ember_tune_now() - start) / (number > 0 ? number : 1);                        \
    return rc;                                                                                \
  }
"""


def _part_sources(part: str) -> list[tuple[str, str]]:
    """(file name, C) of one harness part: "gemm", or a lane count's conv and depthwise
    ("x8"): the timing unit, then the kernel objects it links."""
    if part == "gemm":
        return [("harness_gemm.c", _PROLOGUE + _GEMM)] + object_sources(
            [("ember/kernels/gemm.h", "ember_sgemm")])
    lanes = int(part[1:])
    unit = (_PROLOGUE + '#include "ember/kernels/conv_nchwc.h"\n' + _NOW + _CONV
            + f"EMBER_TUNE_CONV({lanes})\nEMBER_TUNE_DW({lanes})\n")
    header = "ember/kernels/conv_nchwc.h"
    return [(f"harness_{part}.c", unit)] + object_sources(
        [(header, f"ember_conv2d_nchwc_x{lanes}"), (header, f"ember_depthwise_nchwc_x{lanes}")])


_F32P = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
_I32P = np.ctypeslib.ndpointer(np.int32, flags="C_CONTIGUOUS")
_DOUBLEP = ctypes.POINTER(ctypes.c_double)


class Harness:
    """The harness library built for ``choice`` (its instruction-set flags), loaded.

    Raises TVMError when this CPU cannot run code of ``choice``'s SIMD level (measuring
    needs the kernels to run here), CompileError/CompilerNotFoundError from the build."""

    def __init__(self, choice: CpuChoice) -> None:
        missing = sorted(set(choice.level.features) - host_features())
        if missing:
            raise TVMError(f"ember tune: kernels for {choice.level.name} cannot run on this CPU "
                           f"(it lacks {', '.join(missing)}); tune on the machine you build for")
        self.choice = choice
        self._parts: dict[str, ctypes.CDLL] = {}
        self._threads: int | None = None
        self.path: Path = self._load("gemm")  # the GEMM part: what every tuned model has

    def _load(self, part: str) -> Path:
        """Build (or find cached) and load harness part ``part``; its library's path."""
        sources = []
        for name, text in _part_sources(part):
            src = cache_dir("tuning", "harness") / f"{content_hash(text)}_{name}"
            if not src.exists():
                atomic_write(src, text.encode())
            sources.append(src)
        path = cc.build_shared(sources, options=list(self.choice.arch_flags))
        lib = ctypes.CDLL(str(path))
        names = ["ember_tune_sgemm"] if part == "gemm" else [
            f"ember_tune_{kind}_{part}" for kind in ("conv2d_nchwc", "depthwise_nchwc")]
        for name in names:
            fn = getattr(lib, name)
            inputs = 2 if name == "ember_tune_sgemm" else 3
            fn.argtypes = [_F32P] * (inputs + 1) + [_I32P, _I32P, ctypes.c_int32, _DOUBLEP]
            fn.restype = ctypes.c_int32
        lib.EmberSetNumThreads.argtypes = [ctypes.c_int]
        if self._threads is not None:
            lib.EmberSetNumThreads(self._threads)
        self._parts[part] = lib
        return path

    def _entry(self, name: str) -> Any:
        """Kernel entry point ``name`` (``ember_tune_sgemm``, ``ember_tune_conv2d_nchwc_x8``),
        its part built on first use."""
        part = "gemm" if name == "ember_tune_sgemm" else name.rsplit("_", 1)[-1]
        if part not in self._parts:
            if part != "gemm" and int(part[1:]) not in conv_kernel.LANES:
                raise TVMError(f"ember tune: no harness kernel {name!r} (lane counts "
                               f"{conv_kernel.LANES})")
            self._load(part)
        return getattr(self._parts[part], name)

    def set_threads(self, threads: int) -> None:
        """The thread count a parallel kernel runs on from now on (every part's pool)."""
        self._threads = int(threads)
        for lib in self._parts.values():
            lib.EmberSetNumThreads(self._threads)

    def call(self, name: str, arrays: list[np.ndarray], sizes: np.ndarray, tiles: list[int],
             number: int) -> float:
        """Run kernel entry point ``name`` ``number`` times; seconds per call."""
        seconds = ctypes.c_double()
        rc = self._entry(name)(*arrays, sizes, np.asarray(tiles, np.int32), number,
                               ctypes.byref(seconds))
        if rc != 0:
            raise TVMError(f"ember tune: {name} failed with tiles {tiles} (status {rc})")
        return seconds.value


@dataclass
class Workload:
    """One kernel call with random inputs: ``run(tiles, number)`` times it and leaves the
    result in ``output``."""

    query: Query
    harness: Harness
    entry: str
    arrays: list[np.ndarray]  # the inputs, then the output
    sizes: np.ndarray

    @property
    def output(self) -> np.ndarray:
        return self.arrays[-1]

    def run(self, tiles: Any, number: int = 1) -> float:
        """Seconds per call of the kernel with ``tiles`` (a GemmTiles or ConvTiles)."""
        values = {"sgemm": lambda: [tiles.mc, tiles.kc, int(tiles.parallel)],
                  "conv2d_nchwc": lambda: [tiles.rb, tiles.rw, tiles.strip, tiles.order,
                                           tiles.threads],
                  "depthwise_nchwc": lambda: [tiles.strip, tiles.threads]}[self.query.kernel]()
        self.output.fill(np.nan)  # a candidate that skips part of the output cannot pass
        return self.harness.call(self.entry, self.arrays, self.sizes, values, number)


def workload(query: Query, harness: Harness, seed: int = 0) -> Workload:
    """The workload of ``query`` (a kernel call ``ember tune`` found) on ``harness``."""
    rng = np.random.default_rng(seed)

    def rand(*shape: int) -> np.ndarray:
        return rng.uniform(-1.0, 1.0, shape).astype(np.float32)

    if query.kernel == "sgemm":
        batch, m, n, k = query.geometry
        nr = gemm_kernel.panel_width(query.level)
        panels = math.ceil(n / nr)
        sizes = [batch, m, n, k, m * k, k, panels * k * nr, nr, 1, nr, m * n, n]
        arrays = [rand(batch, m, k), rand(batch, panels, k, nr), rand(batch, m, n)]
        return Workload(query, harness, "ember_tune_sgemm", arrays, np.asarray(sizes, np.int32))
    if query.kernel in ("conv2d_nchwc", "depthwise_nchwc"):
        geo = conv_kernel.conv_of_key(query.geometry)
        cb, lanes = geo.in_block, geo.lanes
        depthwise = query.kernel == "depthwise_nchwc"  # weight [C/L, KH, KW, L]
        arrays = [rand(geo.n, geo.ic // cb, geo.h, geo.w, cb),
                  rand(geo.oc // lanes, 1 if depthwise else geo.ic // geo.groups // cb, geo.kh,
                       geo.kw, 1 if depthwise else cb, lanes),
                  rand(geo.oc), rand(geo.n, geo.oc // lanes, geo.oh, geo.ow, lanes)]
        sizes = (conv_kernel.depthwise_sizes if depthwise else conv_kernel.call_sizes)(geo)
        return Workload(query, harness, f"ember_tune_{query.kernel}_x{lanes}", arrays,
                        np.asarray(sizes, np.int32))
    raise TVMError(f"ember tune: no harness for kernel {query.kernel!r}")
