"""Building the C runtime: strict C99 in every configuration, no libc beyond memset/memcpy
(nm), code size, the Makefile, config checks, and where ember.micro finds the sources."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ember
from ember.micro import get_crt_include_dirs, get_standalone_crt_dir
from ember.runtime.errors import TVMError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _crt_testlib import CORE_SOURCES, CRT_DIR, STRICT, include_flags, run

FORBIDDEN = {"malloc", "free", "calloc", "realloc", "printf", "fprintf", "puts", "sprintf",
             "snprintf", "vsnprintf", "abort", "exit"}
# Undefined symbols the core may have: the platform hook, what the compiler may emit, and
# the position-independent-code table of some toolchains.
ALLOWED = {"TVMPlatformAbort", "memset", "memcpy", "_GLOBAL_OFFSET_TABLE_"}
CONFIGS = {
    "default": (),
    "small": ("-DEMBER_CRT_WORKSPACE_ALIGNMENT=16", "-DEMBER_CRT_WORKSPACE_GUARD=0",
              "-DEMBER_CRT_ERROR_BUFFER_SIZE=64", "-DEMBER_CRT_MAX_FUNC_REGISTRIES=1"),
    "freestanding": ("-ffreestanding", "-Os"),
}


def _compile_core(cc_argv: list[str], out: Path, flags: tuple[str, ...]) -> list[Path]:
    objs = []
    for src in CORE_SOURCES:
        obj = out / f"{src.stem}.o"
        run([*cc_argv, *STRICT, *flags, *include_flags(), "-c", str(src), "-o", str(obj)])
        objs.append(obj)
    return objs


@pytest.fixture(scope="module")
def core_objects(cc_argv, tmp_path_factory) -> dict[str, list[Path]]:
    """The core compiled with -std=c99 -pedantic -Wall -Wextra -Werror, per configuration."""
    return {name: _compile_core(cc_argv, tmp_path_factory.mktemp(f"core_{name}"), flags)
            for name, flags in CONFIGS.items()}


def _symbols(objs: list[Path], undefined: bool) -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found")
    flag = ["-u"] if undefined else ["--defined-only"]
    text = run([nm, *flag, *map(str, objs)]).stdout
    names = {line.split()[-1] for line in text.splitlines() if line.strip() and ":" not in line}
    return {n.removeprefix("_") if sys.platform == "darwin" else n for n in names}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_core_needs_nothing_but_the_platform_hook(core_objects, config):
    objs = core_objects[config]
    undefined = _symbols(objs, undefined=True) - _symbols(objs, undefined=False)
    assert not undefined & FORBIDDEN
    assert undefined <= ALLOWED, f"unexpected external symbols: {sorted(undefined - ALLOWED)}"
    assert "TVMPlatformAbort" in undefined  # the hook is the platform's, not the core's


def test_core_defines_the_backend_api(core_objects):
    defined = _symbols(core_objects["default"], undefined=False)
    assert {"TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace", "TVMBackendGetFuncFromEnv",
            "TVMFuncCall", "TVMBackendParallelLaunch", "TVMBackendParallelBarrier",
            "TVMPackedFuncSetLastError", "TVMAPISetLastError", "TVMGetLastError",
            "TVMFuncGetGlobal", "TVMFuncFree", "__tvm_module_ctx", "ember_crt_init",
            "ember_crt_register_func_registry", "ember_crt_error_name"} <= defined


def test_code_size_is_small(core_objects, record_property):
    """`size` of the core objects (text includes read-only data such as messages)."""
    size = shutil.which("size")
    if size is None:
        pytest.skip("size not found")
    for config in ("default", "freestanding"):
        rows = run([size, *map(str, core_objects[config])]).stdout.splitlines()[1:]
        text = sum(int(r.split()[0]) for r in rows)
        data_bss = sum(int(r.split()[1]) + int(r.split()[2]) for r in rows)
        record_property(f"crt_{config}_text_bytes", text)
        record_property(f"crt_{config}_data_bss_bytes", data_bss)
        # generous budgets: a regression to printf or a big table shows up here
        assert text < 16 * 1024 and data_bss < 2 * 1024, (config, rows)


def test_makefile_builds_the_static_library(crt_lib):
    ar = shutil.which("ar")
    if ar is None:
        pytest.skip("ar not found")
    members = set(run([ar, "t", str(crt_lib / "libembercrt.a")]).stdout.split())
    assert members == {f"{src.stem}.o" for src in CORE_SOURCES}
    assert (crt_lib / "platform_host.o").is_file()


def test_a_bad_config_value_fails_the_build(cc_argv, tmp_path):
    src = CRT_DIR / "src" / "memory" / "stack_allocator.c"
    proc = subprocess.run([*cc_argv, *STRICT, "-DEMBER_CRT_WORKSPACE_ALIGNMENT=24",
                           *include_flags(), "-c", str(src), "-o", str(tmp_path / "x.o")],
                          check=False, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "EMBER_CRT_WORKSPACE_ALIGNMENT must be a power of two" in proc.stderr


def test_get_standalone_crt_dir_is_the_package_runtime():
    crt = get_standalone_crt_dir()
    assert isinstance(crt, str) and Path(crt) == Path(ember.__file__).parent / "crt"
    assert ember.micro.get_standalone_crt_dir() == crt  # lazily loaded as tvm.micro
    for rel in ("Makefile", "include/ember/crt/crt.h", "include/ember/crt/crt_config.h",
                "include/ember/crt/error_codes.h", "include/ember/crt/platform.h",
                "src/backend/workspace.c", "platform/host/platform.c"):
        assert (Path(crt) / rel).is_file(), rel
    inc = get_crt_include_dirs()
    assert (Path(inc[0]) / "ember/crt/crt.h").is_file()
    assert (Path(inc[1]) / "ember/c_backend_api.h").is_file()


def test_missing_runtime_sources_are_named(monkeypatch, tmp_path):
    from ember import micro

    monkeypatch.setattr(micro, "_CRT_DIR", tmp_path)
    with pytest.raises(TVMError, match=r"get_standalone_crt_dir: .*Makefile is missing"):
        micro.get_standalone_crt_dir()


def test_unsupported_in_mlf_error_is_a_tvm_error():
    assert issubclass(ember.micro.UnsupportedInModelLibraryFormatError, TVMError)


def test_package_data_ships_every_runtime_file():
    """pyproject's package-data patterns match every file of ember/crt, and setuptools finds
    each of its folders as a (namespace) package, so a wheel carries the runtime."""
    tomllib = pytest.importorskip("tomllib")
    setuptools = pytest.importorskip("setuptools")
    from fnmatch import fnmatch

    root = CRT_DIR.parents[1]
    if not (root / "pyproject.toml").is_file():
        pytest.skip("not a source checkout")
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config["package-data"]["*"]
    packages = set(setuptools.find_namespace_packages(str(root), include=["ember*"]))
    for path in CRT_DIR.rglob("*"):
        if path.is_file() and "build" not in path.relative_to(CRT_DIR).parts:
            assert any(fnmatch(path.name, p) for p in patterns), f"{path} not in package-data"
            pkg = ".".join(path.parent.relative_to(root).parts)
            assert pkg in packages, f"{path.parent} is not found as a package"
