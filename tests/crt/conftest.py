"""Fixtures for the standalone C runtime tests: the compiler, the runtime built with make, a
program builder, and the runtime as a shared library for ctypes.

Everything that needs a C compiler (or make) skips with the reason when there is none.
"""
from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ember.contrib import cc

# the shared helper sits beside this file (also under --import-mode=importlib)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _crt_testlib import CORE_SOURCES, CRT_DIR, HOST_PLATFORM, STRICT, include_flags, run


@pytest.fixture(scope="session")
def cc_argv() -> list[str]:
    """The C compiler command (argv), or skip."""
    found = cc.get_cc()
    if found is None:
        pytest.skip("no C compiler found (set CC or install gcc/clang)")
    return shlex.split(found)


@pytest.fixture(scope="session")
def crt_lib(cc_argv: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build directory holding libembercrt.a and platform_host.o, made by the
    runtime's own Makefile (outside the package tree)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not found")
    build = tmp_path_factory.mktemp("crt_build")
    run([make, "-s", "-C", str(CRT_DIR), f"BUILD={build}", f"CC={shlex.join(cc_argv)}",
         "platform"])
    return build


@pytest.fixture(scope="session")
def build_program(cc_argv: list[str], crt_lib: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``build_program(name, {"file.c": text, ...}, flags=(...), strict=True)`` -> an
    executable linked with the host platform and libembercrt.a. ``strict`` compiles with
    -pedantic -Wall -Wextra -Werror (code not written for these tests may not pass them)."""

    def build(name: str, sources: dict[str, str], flags: tuple[str, ...] = (),
              strict: bool = True) -> Path:
        out = tmp_path_factory.mktemp(name)
        paths = []
        for fname, text in sources.items():
            (out / fname).write_text(text)
            paths.append(str(out / fname))
        exe = out / name
        run([*cc_argv, *(STRICT if strict else ["-std=c99", "-O2"]), *include_flags(), *flags,
             *paths, str(crt_lib / "platform_host.o"), str(crt_lib / "libembercrt.a"), "-lm",
             "-o", str(exe)])
        return exe

    return build


@pytest.fixture(scope="session")
def crt_shared(cc_argv: list[str], tmp_path_factory: pytest.TempPathFactory
               ) -> Callable[..., ctypes.CDLL]:
    """``crt_shared(*defines)`` -> the runtime core + host platform as a ctypes library (one
    build per set of -D flags). -Bsymbolic keeps its calls inside the library even if the
    process already holds other definitions of the TVM* names."""
    cache: dict[tuple[str, ...], ctypes.CDLL] = {}

    def load(*defines: str) -> ctypes.CDLL:
        if defines not in cache:
            out = tmp_path_factory.mktemp("crt_so") / "libembercrt_test.so"
            run([*cc_argv, *STRICT, "-fPIC", "-shared", "-Wl,-Bsymbolic", *defines,
                 *include_flags(), *map(str, CORE_SOURCES), str(HOST_PLATFORM), "-o", str(out)])
            cache[defines] = ctypes.CDLL(str(out))
        return cache[defines]

    return load
