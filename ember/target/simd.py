"""Which SIMD instructions a CPU build may use: chosen from the target, ``$EMBER_MARCH``, or
the host, in that order.

Kernels pick their vector width and blocked layouts (``NCHW8c`` for AVX2, ``NCHW16c`` for
AVX-512) from :func:`simd_level`; the C compiler gets the matching ``-march`` from the same
choice, so a layout never disagrees with the instructions it was chosen for.
"""
from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from typing import Any

from ..runtime import cpu_features


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


def host_features() -> frozenset[str]:
    """The host CPU's feature flags (``/proc/cpuinfo`` spelling; empty when unreadable)."""
    return cpu_features.host_features()


def host_level() -> SimdLevel:
    """The best level the host CPU runs."""
    have = host_features()
    for name in ("avx512", "avx2", "sse", "neon"):
        if set(LEVELS[name].features) <= have:
            return LEVELS[name]
    return LEVELS["scalar"]


@dataclass(frozen=True)
class CpuChoice:
    """The CPU a build compiles for, decided once for both sides: the kernels' layouts and
    vector widths (``level``) and the C compiler's instruction set (``arch_flags``).

    ``arch_flags`` are the compiler flags (``-march=skylake-avx512``, ``-mavx2``; none: the
    compiler's default, portable code); ``source`` says who decided: ``"target"`` (its
    ``-mcpu``/``-mattr``), ``"EMBER_MARCH"``, ``"host"`` (``-march=native``) or
    ``"portable"`` (a ``c`` target without ``-mcpu``: the architecture's baseline,
    ``-march=x86-64``)."""

    arch_flags: tuple[str, ...]
    level: SimdLevel
    source: str

    @property
    def key(self) -> str:
        """What a build cache key needs of this choice."""
        return f"{self.level.name}:{' '.join(self.arch_flags)}"


_FEATURE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_ARM_CPU_PREFIXES = ("cortex-", "neoverse", "apple-", "thunderx", "a64fx")


def _march_flag(name: str) -> str:
    # GCC and Clang name ARM cores with -mcpu, architectures (and x86 CPUs) with -march.
    return f"-mcpu={name}" if name.startswith(_ARM_CPU_PREFIXES) else f"-march={name}"


def _mattr_flags(mattr: tuple[str, ...]) -> tuple[tuple[str, ...], set[str], set[str]]:
    """``-mattr=+avx2,-avx512f`` -> (("-mavx2", "-mno-avx512f"), added, removed)."""
    flags, added, removed = [], set(), set()
    for attr in mattr:
        name = attr.lstrip("+-").lower()
        if not _FEATURE_NAME.match(name):
            raise ValueError(f"target -mattr: {attr!r} is not a CPU feature name (+avx2, -fma)")
        if attr.startswith("-"):
            flags.append(f"-mno-{name}")
            removed.add(name)
        else:
            flags.append(f"-m{name}")
            added.add(name)
    return tuple(flags), added, removed


def _adjust(level: SimdLevel, added: set[str], removed: set[str]) -> SimdLevel:
    """``level`` raised by features -mattr adds, lowered past features it removes."""
    for name in ("avx512", "avx2"):
        if LEVELS[name].features[0] in added and LEVELS[name].vector_bytes > level.vector_bytes:
            level = LEVELS[name]
    order = ("avx512", "avx2", "sse", "scalar")
    while level.name in order[:-1] and removed & set(level.features):
        level = LEVELS[order[order.index(level.name) + 1]]
    return level


def _generic_level() -> SimdLevel:
    """The level of the compiler's default -march on this machine (x86-64: SSE2)."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i686", "i386"):
        return LEVELS["sse"]
    return LEVELS["neon"] if machine in ("arm64", "aarch64") else LEVELS["scalar"]


def _baseline_flags() -> tuple[str, ...]:
    """The compiler flags of the architecture's baseline CPU (portable code), spelled out so
    that neither ``$EMBER_MARCH`` nor ``-march=native`` replaces them."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return ("-march=x86-64",)
    return ("-march=armv8-a",) if machine in ("arm64", "aarch64") else ()


def cpu_choice(target: Any = None) -> CpuChoice:
    """The CPU a build for ``target`` (a Target, a string, or None) compiles for.

    Order: the target's ``-mcpu``/``-march`` (plus its ``-mattr``), then its ``-mattr``
    alone (on the compiler's default CPU), then ``$EMBER_MARCH``, then the host
    (``-march=native``). A ``c`` target without them is portable C (scalar, the compiler's
    default CPU): Model Library Format and C-runtime builds run on CPUs we know nothing about.
    ``simd_level`` and the C compiler driver both read this, so layouts and instructions
    agree."""
    from .target import Target

    if isinstance(target, str):
        target = Target(target)
    if target is not None:
        mattr_flags, added, removed = _mattr_flags(target.mattr)
        march = target.mcpu or str(target.attrs.get("march", ""))
        is_c = target.kind.name == "c"
        if march:
            level = _adjust(level_of_march(march), added, removed)
            # A c target's -mcpu may name a microcontroller: the host compiler gets it only
            # when it is a SIMD CPU we know (its code runs here).
            known = march.lower() in _BY_MARCH or level.name == "neon" or march == "native"
            flags = (_march_flag(march),) if known or not is_c else _baseline_flags()
            return CpuChoice(flags + mattr_flags, level, "target")
        if mattr_flags:
            base = LEVELS["scalar"] if is_c else _generic_level()
            return CpuChoice(_baseline_flags() + mattr_flags, _adjust(base, added, removed),
                             "target")
        if is_c:
            return CpuChoice(_baseline_flags(), LEVELS["scalar"], "portable")
    env = os.environ.get("EMBER_MARCH", "").strip()
    if env and env != "native":
        return CpuChoice((_march_flag(env),), level_of_march(env), "EMBER_MARCH")
    return CpuChoice(("-march=native",), host_level(), "host")


def simd_level(target: Any = None) -> SimdLevel:
    """The level a build for ``target`` (a Target, a string, or None for the host) uses:
    ``cpu_choice(target).level`` (see there for the order)."""
    return cpu_choice(target).level
