"""Fixtures for the standalone C runtime tests: the compiler, the runtime built with make, a
program builder, and the runtime as a shared library for ctypes.

Everything that needs a C compiler (or make) skips with the reason when there is none.
"""
from __future__ import annotations

import ctypes
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from ember.contrib import cc
from ember.micro import get_crt_include_dirs, get_standalone_crt_dir

CRT_DIR = Path(get_standalone_crt_dir())
CORE_SOURCES = sorted(CRT_DIR.glob("src/*/*.c"))
HOST_PLATFORM = CRT_DIR / "platform" / "host" / "platform.c"
STRICT = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2"]


def include_flags() -> list[str]:
    return [f"-I{d}" for d in get_crt_include_dirs()]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run a build command; fail the test with the command line and stderr if it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        pytest.fail(f"command failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stderr}")
    return proc


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
    """``build_program(name, {"file.c": text, ...}, flags=[...])`` -> an executable linked
    with the host platform and libembercrt.a."""

    def build(name: str, sources: dict[str, str], flags: tuple[str, ...] = ()) -> Path:
        out = tmp_path_factory.mktemp(name)
        paths = []
        for fname, text in sources.items():
            (out / fname).write_text(text)
            paths.append(str(out / fname))
        exe = out / name
        run([*cc_argv, *STRICT, *include_flags(), *flags, *paths,
             str(crt_lib / "platform_host.o"), str(crt_lib / "libembercrt.a"),
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
