"""Which C compiler ember runs and with which flags: discovery (``$CC``, then cc, gcc, clang),
the optional flags each compiler accepts (probed once, recorded under the cache directory), the
instruction-set flags of a build and the CPU features they allow. ``ember.contrib.cc`` builds
with them; this module runs the compiler only to probe it.
"""
from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..runtime import cpu_features
from ..runtime.cache import atomic_write, cache_dir, content_hash, touch
from ..runtime.errors import CompileError, CompilerNotFoundError

_PKG = Path(__file__).resolve().parents[1]
INCLUDE_DIR = _PKG / "include"
_CANDIDATES = ("cc", "gcc", "clang")
# Flags used when the compiler accepts them (probed once per compiler, result cached on disk).
# -fno-tree-loop-if-convert: GCC 12's if-conversion builds all-zero masks for masked loads in
# short constant-trip loops (a concatenate of (2, 2) and (3, 2) read zeros for the second input).
# -fno-math-errno: a libm call that may set errno (sqrtf of a row's mean square) cannot be hoisted
# out of a vector loop; generated code never reads errno, and the results stay IEEE.
# -march=native is probed too; the -march actually used comes from cpu_choice (see above).
_OPTIONAL_FLAGS = ("-march=native", "-fopenmp", "-Wl,-Bsymbolic", "-fno-tree-loop-if-convert",
                   "-fno-math-errno")
_PROBE_SRC = {"-fopenmp": "#include <omp.h>\nint f(void) { return omp_get_max_threads(); }\n"}

_ABI_TAG = "ember-cc-2"
# Options that choose the instruction set (a target's -mcpu/-mattr, passed as compile options).
_ARCH_PREFIXES = ("-march=", "-mcpu=")

def _resolve(cmd: str) -> list[str] | None:
    """argv for a compiler command such as 'gcc' or 'ccache clang', or None if not found."""
    argv = shlex.split(cmd)
    if not argv:
        return None
    exe = shutil.which(argv[0])
    return [exe, *argv[1:]] if exe else None


def _compiler_argv(cc: str | None = None) -> list[str]:
    """The compiler to use: ``cc`` if given, else $CC, then cc, gcc, clang on PATH."""
    if cc is not None:
        argv = _resolve(cc)
        if argv is None:
            raise CompilerNotFoundError(f"C compiler {cc!r} not found; install one, e.g. "
                                        "apt-get install gcc")
        return argv
    tried = []
    env_cc = os.environ.get("CC")
    if env_cc:
        argv = _resolve(env_cc)
        if argv is not None:
            return argv
        tried.append(f"$CC={env_cc!r} (not found)")
    for name in _CANDIDATES:
        argv = _resolve(name)
        if argv is not None:
            return argv
        tried.append(name)
    raise CompilerNotFoundError(
        f"no C compiler found; tried {', '.join(tried)} (searched PATH). ember needs one to "
        "compile models (loading an exported library does not): install one, e.g. "
        "apt-get install gcc, or set CC")


def find_cc() -> str:
    """The C compiler command ember will use; raises CompilerNotFoundError if there is none."""
    return shlex.join(_compiler_argv())


def get_cc() -> str | None:
    """Like ``find_cc`` but returns None when no compiler is found."""
    try:
        return find_cc()
    except CompilerNotFoundError:
        return None


@functools.cache
def _host_cpu() -> str:
    """The CPU model and features: -march=native output must not be reused on another CPU
    sharing the cache (it could die with SIGILL)."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        return " ".join(line for line in info.splitlines()[:40]
                        if line.startswith(("model name", "flags", "Features", "CPU part")))
    except OSError:
        import platform

        return f"{platform.machine()} {platform.processor()}"


def _file_identity(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def _identity(argv: Sequence[str]) -> str:
    """The compiler's path, size and mtime, and its arguments; for a wrapper such as
    ``ccache gcc`` the wrapped program's too (changing it must change probes and keys)."""
    parts = [_file_identity(argv[0])]
    for arg in argv[1:]:
        exe = None if arg.startswith("-") else shutil.which(arg)
        parts.append(_file_identity(exe) if exe else arg)
    return " ".join(parts)


@functools.cache
def _supported_flags(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The subset of _OPTIONAL_FLAGS this compiler accepts, cached per compiler identity."""
    key = content_hash(_ABI_TAG, _identity(argv), *_OPTIONAL_FLAGS)
    record = cache_dir("probe") / f"{key}.json"
    try:
        return tuple(json.loads(record.read_text())["flags"])
    except (OSError, ValueError, KeyError):
        pass
    from .utils import tempdir

    tmp = tempdir()
    ok = []
    for flag in _OPTIONAL_FLAGS:
        src = Path(tmp.relpath("probe.c"))
        src.write_text(_PROBE_SRC.get(flag, "int f(void) { return 0; }\n"))
        cmd = [*argv, "-fPIC", "-shared", flag, str(src), "-o", tmp.relpath("probe.so")]
        if subprocess.run(cmd, check=False, capture_output=True).returncode == 0:
            ok.append(flag)
    atomic_write(record, json.dumps({"compiler": argv, "flags": ok}).encode())
    return tuple(ok)


def default_arch_flags() -> list[str]:
    """The instruction-set flags of a build without a target: ``-march=$EMBER_MARCH``, else
    ``-march=native`` (``ember.target.simd.cpu_choice(None)``)."""
    from ..target.simd import cpu_choice

    return list(cpu_choice(None).arch_flags)


def _chooses_arch(options: Sequence[str]) -> bool:
    return any(o.startswith(_ARCH_PREFIXES) for o in options)


def default_flags(cc: str | None = None, c_only: bool = True,
                  options: Sequence[str] = ()) -> list[str]:
    """The flags create_shared uses: -O3 -fPIC -shared -std=c99 -ffp-contract=fast, the
    probed -fopenmp (and friends), the instruction set and the ember include directory.

    The instruction set is ``default_arch_flags()`` (``$EMBER_MARCH``, else -march=native when
    the compiler has it) unless ``options`` choose one themselves (``-march=``/``-mcpu=``,
    a target's -mcpu: the build driver passes it)."""
    argv = tuple(_compiler_argv(cc))
    probed = _supported_flags(argv)
    # -std=c99 alone makes GCC stop contracting a*b+c into FMA instructions; kernels want them.
    flags = ["-O3", "-fPIC", "-shared"] + (["-std=c99", "-ffp-contract=fast"] if c_only else [])
    flags += [f for f in _OPTIONAL_FLAGS if f in probed and f != "-march=native"]
    if not _chooses_arch(options):
        flags += [f for f in default_arch_flags()
                  if f != "-march=native" or "-march=native" in probed]
    return flags + ["-I", str(INCLUDE_DIR)]


def arch_flags_of(flags: Sequence[str]) -> list[str]:
    """The flags among ``flags`` that choose the instruction set (-march, -mcpu, -m<feature>)."""
    return [f for f in flags if f.startswith("-m")]


@functools.cache
def _features_cached(argv: tuple[str, ...], arch: tuple[str, ...], cpu: str) -> tuple[str, ...]:
    key = content_hash(_ABI_TAG, "features", _identity(argv), cpu, *arch)
    record = cache_dir("probe") / f"{key}.features.json"
    try:
        return tuple(json.loads(record.read_text())["features"])
    except (OSError, ValueError, KeyError):
        pass
    cmd = [*argv, *arch, "-dM", "-E", "-x", "c", os.devnull]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"the C compiler rejects the instruction-set flags {' '.join(arch)} "
                           f"(exit status {proc.returncode})\ncommand: {shlex.join(cmd)}\n"
                           f"--- compiler stderr ---\n{proc.stderr.strip()}")
    features = cpu_features.features_of_macros(proc.stdout)
    atomic_write(record, json.dumps({"flags": list(arch), "features": features}).encode())
    return tuple(features)


def compiled_features(flags: Sequence[str], cc: str | None = None) -> list[str]:
    """The CPU features (``/proc/cpuinfo`` names) code compiled with ``flags`` may use, from
    the compiler's own predefined macros (``__AVX2__``...); cached per compiler and flags."""
    argv = tuple(_compiler_argv(cc))
    arch = tuple(arch_flags_of(flags))
    cpu = _host_cpu() if "-march=native" in arch or "-mcpu=native" in arch else ""
    return list(_features_cached(argv, arch, cpu))


def _cpu_record(flags: Sequence[str], cc: str | None) -> Path:
    """A C file holding the feature record of a library built with ``flags``."""
    arch = arch_flags_of(flags)
    source = cpu_features.record_source(arch, compiled_features(flags, cc))
    path = cache_dir("cpu") / f"{content_hash(source)}.c"
    if not touch(path):  # (touched: a concurrent prune keeps it until the build reads it)
        atomic_write(path, source.encode())
    return path

def object_flags(cc: str | None = None, options: Sequence[str] = ()) -> list[str]:
    """The flags of ``create_shared`` for one translation unit: -O3 -fPIC -std=c99, the
    probed -march/-fopenmp and the ember include directory, without -shared and link flags.
    A program linking such objects adds -fopenmp (or -lgomp) when the compiler has it."""
    return [f for f in default_flags(cc, True, options)
            if f != "-shared" and not f.startswith("-Wl,")]

def compiler_argv(cc: str | None = None) -> list[str]:
    """The argv of the compiler ember uses (``cc``, else $CC, cc, gcc, clang)."""
    return _compiler_argv(cc)


def compiler_id(cc: str | None = None) -> str:
    """Path, size, mtime and arguments of the compiler: part of a build cache key."""
    return _identity(_compiler_argv(cc))


def find_ar() -> list[str]:
    """The archiver: ``$AR``, then ``ar``, ``gcc-ar``, ``llvm-ar`` on PATH."""
    for cmd in filter(None, (os.environ.get("AR"), "ar", "gcc-ar", "llvm-ar")):
        argv = _resolve(cmd)
        if argv is not None:
            return argv
    raise CompilerNotFoundError("no archiver found (tried $AR, ar, gcc-ar, llvm-ar); install "
                                "binutils, e.g. apt-get install binutils")
