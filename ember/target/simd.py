"""Which SIMD instructions a CPU build may use: chosen from the target, ``$EMBER_MARCH``, or
the host, in that order.

Kernels pick their vector width and blocked layouts (``NCHW8c`` for AVX2, ``NCHW16c`` for
AVX-512) from :func:`simd_level`; the C compiler gets the matching ``-march`` from the same
choice, so a layout never disagrees with the instructions it was chosen for.
"""
from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SimdLevel:
    """One SIMD level: its name, vector register size and the CPU flags its code needs
    (``/proc/cpuinfo`` spelling)."""

    name: str
    vector_bytes: int
    features: tuple[str, ...]

    def lanes(self, dtype: str = "float32") -> int:
        """Elements of ``dtype`` in one vector register (1 for ``scalar``)."""
        bits = int("".join(ch for ch in dtype if ch.isdigit()) or 32)
        return max(1, self.vector_bytes * 8 // bits)


LEVELS = {
    "avx512": SimdLevel("avx512", 64, ("avx512f", "avx512bw", "avx512vl", "avx2", "fma")),
    "avx2": SimdLevel("avx2", 32, ("avx2", "fma")),
    "sse": SimdLevel("sse", 16, ("sse2",)),
    "neon": SimdLevel("neon", 16, ("asimd",)),
    "scalar": SimdLevel("scalar", 4, ()),
}

# -march / -mcpu names -> level. Unknown names fall back to the host only when they say
# "native"; anything else unknown is portable C (scalar), which is always safe.
_AVX512 = ("x86-64-v4 skylake-avx512 cascadelake cooperlake cannonlake icelake-client "
           "icelake-server tigerlake rocketlake sapphirerapids emeraldrapids graniterapids "
           "znver4 znver5")
_AVX2 = ("x86-64-v3 haswell broadwell skylake core-avx2 znver1 znver2 znver3 alderlake "
         "raptorlake meteorlake arrowlake lunarlake gracemont bdver4")
_SSE = "x86-64 x86-64-v2 nehalem westmere sandybridge ivybridge core2 silvermont goldmont"
_BY_MARCH = {**{n: "avx512" for n in _AVX512.split()}, **{n: "avx2" for n in _AVX2.split()},
             **{n: "sse" for n in _SSE.split()}}


def level_of_march(march: str) -> SimdLevel:
    """The level code compiled with ``-march=<march>`` (or ``-mcpu=<march>``) may use."""
    march = march.strip().lower()
    if march in ("", "native"):
        return host_level()
    if march in _BY_MARCH:
        return LEVELS[_BY_MARCH[march]]
    if march.startswith(("armv8", "armv9", "cortex-a", "neoverse", "apple-m")):
        return LEVELS["neon"]
    return LEVELS["scalar"]


@functools.cache
def host_features() -> frozenset[str]:
    """The host CPU's feature flags (empty when they cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    machine = platform.machine().lower()
    return frozenset({"asimd"}) if machine in ("arm64", "aarch64") else frozenset()


def host_level() -> SimdLevel:
    """The best level the host CPU runs."""
    have = host_features()
    for name in ("avx512", "avx2", "sse", "neon"):
        if set(LEVELS[name].features) <= have:
            return LEVELS[name]
    return LEVELS["scalar"]


def simd_level(target: Any = None) -> SimdLevel:
    """The level a build for ``target`` (a Target, a string, or None for the host) uses.

    Order: the target's ``-mcpu``/``-march``, then its ``-mattr`` (``+avx512f``, ``+avx2``),
    then ``$EMBER_MARCH``, then the host. A ``c`` target without ``-mcpu`` is portable C
    (scalar): Model Library Format and C-runtime builds run on CPUs we know nothing about."""
    from .target import Target

    if isinstance(target, str):
        target = Target(target)
    if target is not None:
        march = target.mcpu or str(target.attrs.get("march", ""))
        if march:
            return level_of_march(march)
        mattr = {a.lstrip("+").lower() for a in target.mattr if not a.startswith("-")}
        for name in ("avx512", "avx2"):
            if LEVELS[name].features[0] in mattr:
                return LEVELS[name]
        if target.kind.name == "c":
            return LEVELS["scalar"]
    env = os.environ.get("EMBER_MARCH", "").strip()
    return level_of_march(env) if env else host_level()
