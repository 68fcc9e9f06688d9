"""Helpers of the native runtime tests: building C programs against libember_runtime (plain
or with AddressSanitizer + UBSan), running them, and exporting zoo models to load."""
from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.contrib import cc
from ember.runtime import native

PROGRAMS = Path(__file__).parent / "programs"
REPO = Path(__file__).resolve().parents[2]
SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
# Sanitizer reports end the process with a failure: a test can then not pass by accident.
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=99",
                 "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=98"}


def compiler() -> list[str]:
    """The C compiler's argv, or skip."""
    found = cc.get_cc()
    if found is None:
        pytest.skip("no C compiler found (install gcc)")
    return shlex.split(found)


def run(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a command; with check, fail the test with its output when it fails."""
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        pytest.fail(f"command failed ({proc.returncode}): {shlex.join(map(str, cmd))}\n"
                    f"{proc.stdout}\n{proc.stderr}")
    return proc


@functools.cache
def _sanitizers_work(cc_cmd: str) -> str:
    """'' if this compiler builds and runs an ASan+UBSan program, else the reason."""
    tmp = Path(ember.runtime.cache.cache_dir("probe"))
    src, exe = tmp / "asan_probe.c", tmp / f"asan_probe_{os.getpid()}"
    src.write_text("#include <stdlib.h>\nint main(void) { free(malloc(4)); return 0; }\n")
    proc = subprocess.run([*shlex.split(cc_cmd), *SANITIZE, str(src), "-o", str(exe)],
                          check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"the compiler cannot build with {' '.join(SANITIZE[:1])}: {proc.stderr[-200:]}"
    proc = subprocess.run([str(exe)], check=False, capture_output=True, text=True)
    exe.unlink(missing_ok=True)
    return "" if proc.returncode == 0 else f"sanitized programs do not run: {proc.stderr[-200:]}"


def require_sanitizers() -> None:
    reason = _sanitizers_work(shlex.join(compiler()))
    if reason:
        pytest.skip(reason)


def _has_openmp(argv: tuple[str, ...]) -> bool:
    return "-fopenmp" in cc.default_flags(shlex.join(argv))


def build_program(source: Path, out: Path, sanitize: bool = False,
                  extra: list[str] | None = None) -> Path:
    """``source`` (C) linked with the native runtime (shared), optionally sanitized. With
    sanitizers it also links the OpenMP runtime: libraries that use it are unloaded while the
    program runs, and LeakSanitizer would otherwise report libgomp's own start-up memory."""
    argv = compiler()
    flags = ["-std=c99", "-O1", "-Wall", *[f"-I{d}" for d in native.include_dirs()]]
    if sanitize:
        require_sanitizers()
        flags += SANITIZE
    link = native.link_flags(sanitize=sanitize)
    if sanitize and _has_openmp(tuple(argv)):
        link += ["-Wl,--no-as-needed", "-fopenmp"]
    run([*argv, *flags, str(source), *(extra or []), "-o", str(out), *link, "-lm"])
    return out


def run_program(cmd: list, sanitize: bool = False, check: bool = True, **kw):
    env = dict(os.environ, **(SANITIZER_ENV if sanitize else {}))
    return run([str(c) for c in cmd], check=check, env=env, **kw)


def zoo(name: str) -> tuple[ember.IRModule, dict, tuple[int, ...]]:
    """A small zoo model, its params and its input shape."""
    from ember.relay import testing

    if name == "resnet":
        mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1,
                                                  image_shape=(3, 32, 32))
        return mod, params, (1, 3, 32, 32)
    mod, params = testing.mlp.get_workload(batch_size=1)
    return mod, params, (1, 1, 28, 28)


def python_output(factory, data: np.ndarray) -> np.ndarray:
    m = factory["default"](ember.cpu(0))
    m.set_input("data", data)
    m.run()
    return m.get_output(0).numpy()


def have(tool: str) -> bool:
    return shutil.which(tool) is not None
