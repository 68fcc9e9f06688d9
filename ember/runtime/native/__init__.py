"""ember.runtime.native: libember_runtime, the native hosted runtime for C and C++ programs.

It implements the host half of ``ember/c_runtime_api.h`` in C99 with no Python: load a library
that ``export_library`` wrote (``TVMModLoadFromFile``), create its executor (graph or AOT, the
C executors of ``ember/crt/executor``) and run it, or find the functions of a model linked into
the program (system-lib, ``TVMFuncGetGlobal("runtime.SystemLib")``). See
``docs/native_runtime.md``.

``library_path()`` builds the library with the system compiler on first use (the same sources
and flags as ``make -C ember/runtime/native``) and caches it under ``$EMBER_CACHE_DIR/native``;
``include_dirs()`` and ``link_flags()`` are what a program's build adds.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ..cache import cache_dir, content_hash, temp_sibling
from ..module import compiler_driver

NATIVE_DIR = Path(__file__).resolve().parent
_EMBER_DIR = NATIVE_DIR.parents[1]
_CRT_DIR = _EMBER_DIR / "crt"
_FLAGS = ["-std=c99", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra",
          # the last error: one per thread, as long as the hosted runtime's other messages
          "-DEMBER_CRT_ERROR_THREAD_LOCAL=__thread", "-DEMBER_CRT_ERROR_BUFFER_SIZE=4096"]
_SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
_SYSTEM_LIBS = ["-ldl", "-lpthread"] if sys.platform != "darwin" else []
_TAG = "ember-native-1"


def source_dir() -> str:
    """The folder of the runtime's sources and Makefile (inside the installed package)."""
    return str(NATIVE_DIR)


def include_dirs() -> list[str]:
    """Include directories of a program using the runtime (``ember/c_runtime_api.h``, ...)."""
    return [str(_EMBER_DIR / "include"), str(_CRT_DIR / "include")]


def sources() -> list[Path]:
    """The C sources: ``src/``, the shared executors (minus their C runtime memory hook) and
    the C runtime's last error (``error_message.c``)."""
    own = sorted((NATIVE_DIR / "src").glob("*.c"))
    executors = [p for p in sorted((_CRT_DIR / "executor").glob("*.c"))
                 if p.name != "executor_memory.c"]
    return own + executors + [_CRT_DIR / "src" / "backend" / "error_message.c"]


def _headers() -> list[Path]:
    return sorted([*(NATIVE_DIR / "src").glob("*.h"), *(_CRT_DIR / "executor").glob("*.h"),
                   *(_CRT_DIR / "include" / "ember" / "crt").glob("*.h"),
                   *(_CRT_DIR / "src" / "backend").glob("*.h"),
                   *(_EMBER_DIR / "include" / "ember").glob("*.h"),
                   _EMBER_DIR / "runtime" / "csrc" / "thread_pool.h",
                   _EMBER_DIR / "runtime" / "csrc" / "host_table.h"])


def library_path(static: bool = False, sanitize: bool = False, cc: str | None = None) -> Path:
    """The path of ``libember_runtime.so`` (``static``: ``.a``), built and cached on first use.

    ``sanitize`` builds with ``-fsanitize=address,undefined``. Raises CompilerNotFoundError
    without a C compiler, CompileError (command and stderr) when the build fails.
    """
    driver = compiler_driver()
    argv = driver.compiler_argv(cc)
    flags = _FLAGS + (_SANITIZE if sanitize else []) + [f"-I{d}" for d in include_dirs()]
    files = sources() + _headers()
    key = content_hash(_TAG, driver.compiler_id(cc), *flags,
                       *(f.name.encode() + f.read_bytes() for f in files))
    out_dir = cache_dir("native", key)
    name = "libember_runtime.a" if static else "libember_runtime.so"
    out = out_dir / name
    if out.exists():
        return out
    obj_dir = out_dir / f"obj.{os.getpid()}"
    obj_dir.mkdir(exist_ok=True)
    try:
        objects = driver.compile_objects(sources(), obj_dir, flags, " ".join(argv))
        tmp = temp_sibling(out)
        if static:
            driver.create_staticlib(tmp, [str(o) for o in objects])
        else:
            driver.link_shared(tmp, objects, (_SANITIZE if sanitize else []) + _SYSTEM_LIBS,
                               " ".join(argv))
        os.replace(tmp, out)
    finally:
        shutil.rmtree(obj_dir, ignore_errors=True)
    return out


def link_flags(static: bool = False, sanitize: bool = False) -> list[str]:
    """What a program's link line adds to use the runtime: the library and the system
    libraries it needs (with an rpath for the shared one)."""
    lib = library_path(static, sanitize)
    if static:
        return [str(lib), *_SYSTEM_LIBS]
    return [str(lib), f"-Wl,-rpath,{lib.parent}", *_SYSTEM_LIBS]


__all__ = ["include_dirs", "library_path", "link_flags", "source_dir", "sources"]
