"""The CPU features a library's code needs, and the check that the host has them.

Every shared library ember builds carries a record of the instruction-set features its code
was compiled for (the C compiler's own predefined macros for its ``-march``, translated to
``/proc/cpuinfo`` names), as a string in its read-only data::

    EMBER-CPU/1 arch=<compiler flags, comma-separated> features=<cpuinfo names, comma-separated>

``check_library_cpu`` finds the record in the file (before ``dlopen``: a library's
constructors may already use the instructions) and refuses a library whose features the host
lacks, naming them and how to rebuild, instead of letting it die with an illegal instruction.
A library without a record (older ember) is loaded as before. The native runtime
(``ember/runtime/native/src/library.c``) runs the same check in C.
"""
from __future__ import annotations

import functools
import mmap
import os
import platform

from .errors import CpuFeatureError

RECORD_MAGIC = b"EMBER-CPU/1 "

# The compiler's predefined macro -> the /proc/cpuinfo name of the feature it stands for.
# Only these features are recorded; the native runtime knows the same names.
MACRO_FEATURES = {
    "__SSE2__": "sse2", "__SSE3__": "pni", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4_1",
    "__SSE4_2__": "sse4_2", "__POPCNT__": "popcnt", "__AVX__": "avx", "__AVX2__": "avx2",
    "__FMA__": "fma", "__F16C__": "f16c", "__BMI__": "bmi1", "__BMI2__": "bmi2",
    "__LZCNT__": "abm", "__MOVBE__": "movbe", "__AVX512F__": "avx512f",
    "__AVX512CD__": "avx512cd", "__AVX512BW__": "avx512bw", "__AVX512DQ__": "avx512dq",
    "__AVX512VL__": "avx512vl", "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BF16__": "avx512_bf16", "__AVX512FP16__": "avx512_fp16",
    "__AVX512VBMI__": "avx512vbmi", "__AVX512IFMA__": "avx512ifma", "__AVXVNNI__": "avx_vnni",
    "__ARM_NEON": "asimd", "__ARM_FEATURE_SVE": "sve", "__ARM_FEATURE_DOTPROD": "asimddp",
    "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC": "asimdhp",
}
_MAX_RECORD = 4096


@functools.cache
def host_features() -> frozenset[str]:
    """The host CPU's feature flags, ``/proc/cpuinfo`` spelling (empty when unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    machine = platform.machine().lower()
    return frozenset({"asimd"}) if machine in ("arm64", "aarch64") else frozenset()


_CACHE_SYSFS = "/sys/devices/system/cpu/cpu0/cache"
_SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_cache_size(text: str) -> int | None:
    """Bytes of a sysfs cache ``size`` (``"1024K"``, ``"32M"``, ``"512"``); None if unreadable."""
    text = text.strip().upper()
    unit = _SIZE_UNITS.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in _SIZE_UNITS else text
    return int(digits) * unit if digits.isdigit() and int(digits) > 0 else None


@functools.cache
def host_cache_bytes(root: str = _CACHE_SYSFS) -> dict[int, int]:
    """The host's data caches as ``{level: bytes}`` (level 1's data cache, level 2, level 3:
    one instance each, as sysfs lists them for CPU 0); empty where sysfs does not say (then
    the kernels' planners keep their defaults). A heuristic's input only: a library built here
    for another machine still runs there."""
    sizes: dict[int, int] = {}
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return sizes
    for entry in entries:
        if not entry.startswith("index"):
            continue
        fields = {}
        for name in ("level", "type", "size"):
            try:
                with open(os.path.join(root, entry, name)) as f:
                    fields[name] = f.read().strip()
            except OSError:
                break
        size = parse_cache_size(fields.get("size", ""))
        if (size is None or not fields.get("level", "").isdigit()
                or fields.get("type") not in ("Data", "Unified")):
            continue
        sizes[int(fields["level"])] = max(size, sizes.get(int(fields["level"]), 0))
    return sizes


@functools.cache
def host_cpu_name() -> str:
    """The host CPU's model name (``model name`` of ``/proc/cpuinfo``; on ARM the implementer
    and part numbers), else the machine's architecture."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, colon, value = line.partition(":")
                if colon:
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if fields.get("model name"):
        return fields["model name"]
    if fields.get("CPU part"):
        return f"{platform.machine()} implementer {fields.get('CPU implementer', '?')} part " \
               f"{fields['CPU part']}"
    return platform.machine() or "unknown"


def features_of_macros(macros: str) -> list[str]:
    """The recorded features of a compiler's ``-dM -E`` output (sorted)."""
    defined = {line.split()[1] for line in macros.splitlines()
               if line.startswith("#define ") and len(line.split()) > 1}
    return sorted({name for macro, name in MACRO_FEATURES.items() if macro in defined})


def record_source(arch_flags: list[str], features: list[str]) -> str:
    """The C of a library's feature record (a separate translation unit of the library)."""
    text = (RECORD_MAGIC.decode() + f"arch={','.join(arch_flags) or 'default'} "
            f"features={','.join(features)}")
    if '"' in text or "\\" in text:
        raise ValueError(f"CPU feature record {text!r} has characters C strings cannot hold")
    # static: a library linked from parts holds several records (loaders read them all)
    return ("/* Generated by ember: the CPU features this library's code needs; loaders check "
            "them\n   before running any of it (ember/runtime/cpu_features.py). */\n"
            "#if defined(__GNUC__)\n__attribute__((used))\n#endif\n"
            f'static const char ember_cpu_record[] = "{text}";\n')


def read_record(path: str) -> dict[str, str] | None:
    """The record of the library at ``path`` (fields ``arch`` and ``features``), or None if
    it has none. A library linked from parts with several records needs all their features."""
    records = []
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            start = data.find(RECORD_MAGIC)
            while start >= 0:
                end = data.find(b"\0", start, start + _MAX_RECORD)
                end = end if end >= 0 else start + _MAX_RECORD
                text = data[start + len(RECORD_MAGIC):end].decode("ascii", "replace")
                records.append(dict(f.split("=", 1) for f in text.split() if "=" in f))
                start = data.find(RECORD_MAGIC, end)
    if not records:
        return None
    features = {f for r in records for f in r.get("features", "").split(",") if f}
    return {"arch": " ".join(sorted({r.get("arch", "?") for r in records})),
            "features": ",".join(sorted(features))}


def missing_features(record: dict[str, str], have: frozenset[str] | None = None
                     ) -> list[str]:
    """Features ``record`` needs that the host (or ``have``) lacks; none when the host's
    features cannot be read (nothing to check against)."""
    have = host_features() if have is None else have
    if not have:
        return []
    needed = [f for f in record.get("features", "").split(",") if f]
    return [f for f in needed if f not in have]


def check_library_cpu(path: str) -> None:
    """CpuFeatureError if the library at ``path`` needs CPU features this machine lacks."""
    record = read_record(path)
    if record is None:
        return
    missing = missing_features(record)
    if missing:
        raise CpuFeatureError(cpu_error_message(path, record.get("arch", "?"), missing))


def cpu_error_message(path: str, arch: str, missing: list[str]) -> str:
    """The refusal: what is missing, what the library was built for, how to rebuild."""
    return (f"{path}: this library was compiled for a CPU with {', '.join(missing)} "
            f"(compiler flags {arch.replace(',', ' ')}), which this machine does not have; "
            "running it would crash with an illegal instruction. Rebuild it for this machine: "
            "target 'llvm' (the host CPU), a -mcpu this CPU runs (e.g. 'llvm -mcpu=haswell'), "
            "or EMBER_MARCH=x86-64-v3 (AVX2) / x86-64-v2 (SSE) with a target without -mcpu")
