"""Loading libraries for as long as a process lives (``ember/runtime/dso.py``).

A library is opened from its own file unless that file is loaded right now (then a private
copy), and unloaded with its last module. ember used to remember every file it had loaded by
(device, inode), forever: a file system reuses inode numbers, so a new file looked loaded, was
copied, the copy looked loaded too, and after 4,000 to 6,000 loads the process died of
``RecursionError``.

What is checked: reloads open the file itself (a library's statics start fresh each time:
it was really unloaded), two live modules of one file are independent, a new file at a reused
inode or at the path of a loaded one loads as itself, a library ``dlclose`` keeps is never
handed out again, copies leave nothing on disk and fall back from memfd to files, and a few
thousand load/unload cycles leave RSS (``/proc/self/statm``), open descriptors
(``/proc/self/fd``) and mappings (``/proc/self/maps``) where they were. A slow test runs
30,000 loads of a compiled model.
"""
from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember
from ember.runtime import _bridge, dso, loaders
from ember.runtime.errors import ArtifactError
from ember.runtime.module import CSourceModule
from ember.testing import find_c_compiler

pytestmark = [pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found"),
              pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                 reason="needs /proc (Linux)")]

# WHICH tells the variants apart; count_calls counts in a static, so a library shared by two
# modules (or handed out again after a module was freed) shows it.
SOURCE = r"""
#include "ember/c_runtime_api.h"
static int g_calls;
TVM_DLL int count_calls(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                        void* h) {
  ret->v_int64 = ++g_calls;
  *ret_code = kTVMArgInt;
  return 0;
}
TVM_DLL int which(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* h) {
  ret->v_int64 = WHICH;
  *ret_code = kTVMArgInt;
  return 0;
}
"""


def _build(which: int, options: tuple[str, ...] = ()) -> str:
    return CSourceModule(SOURCE.replace("WHICH", str(which)), compile_options=options).compile()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, str]:
    """Compiled variants (in the shared cache: tests copy them before loading)."""
    out = {"a": _build(1), "b": _build(2), "owner": _build(9)}
    # The first library loaded lends its thread pool to all and stays loaded: make sure that
    # is none of the files these tests reload.
    if dso.pool_owner() is None:
        owner = tmp_path_factory.mktemp("owner") / "owner.so"
        shutil.copyfile(out["owner"], owner)
        ember.runtime.load_module(str(owner))
    return out


@pytest.fixture
def lib_a(built, tmp_path) -> str:
    path = tmp_path / "a.so"
    shutil.copyfile(built["a"], path)
    return str(path)


def copies() -> int:
    return dso.library_stats()["copies"]


def load(path: str) -> Any:
    return ember.runtime.load_module(path)


def test_reloads_open_the_file_itself(lib_a):
    before = copies()
    for _ in range(20):
        mod = load(lib_a)
        assert [mod["count_calls"](), mod["count_calls"]()] == [1, 2]  # fresh statics
        del mod
    assert copies() == before


def test_two_live_modules_of_one_file_are_independent(lib_a):
    before = copies()
    first, second = load(lib_a), load(lib_a)
    assert copies() == before + 1
    assert [first["count_calls"](), first["count_calls"](), second["count_calls"]()] == [1, 2, 1]
    del first  # the file itself: unloaded; second is the copy
    assert second["count_calls"]() == 2
    third = load(lib_a)
    assert third["count_calls"]() == 1 and copies() == before + 1
    fourth = load(lib_a)
    assert fourth["count_calls"]() == 1 and copies() == before + 2


def test_a_new_file_at_a_reused_inode_loads_as_itself(built, lib_a):
    """The same inode number with other bytes: what a file system hands the next file."""
    ino = os.stat(lib_a).st_ino
    mod = load(lib_a)
    assert mod["which"]() == 1
    del mod  # unloaded: writing over the file in place is safe now
    with open(built["b"], "rb") as src, open(lib_a, "r+b") as dst:
        dst.truncate(0)
        shutil.copyfileobj(src, dst)
    assert os.stat(lib_a).st_ino == ino
    before = copies()
    assert load(lib_a)["which"]() == 2
    assert copies() == before


def test_inode_numbers_play_no_part(built, tmp_path, monkeypatch):
    """Every file reports one (device, inode), as on a file system that reuses them at once:
    two different libraries both load as themselves, without copies (the old loader took
    every file for one it had loaded and recursed until RecursionError)."""
    real_stat = os.stat

    def one_inode(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        st = real_stat(path, *args, **kwargs)
        return os.stat_result((st.st_mode, 1, 1, *st[3:]))  # st_ino, st_dev

    paths = []
    for name in ("a", "b"):
        paths.append(str(tmp_path / f"{name}.so"))
        shutil.copyfile(built[name], paths[-1])
    monkeypatch.setattr(os, "stat", one_inode)
    before = copies()
    mods = [load(p) for p in paths]
    assert [m["which"]() for m in mods] == [1, 2]
    del mods
    assert [load(p)["which"]() for p in paths] == [1, 2]
    assert copies() == before


def test_a_file_replaced_while_loaded_loads_the_new_file(built, lib_a, tmp_path):
    """The loader matches an open library by name: the new file at that path is a copy."""
    old = load(lib_a)
    staged = tmp_path / "staged.so"
    shutil.copyfile(built["b"], staged)
    os.replace(staged, lib_a)
    new = load(lib_a)
    assert (old["which"](), new["which"]()) == (1, 2)


@pytest.mark.parametrize("link", [os.link, os.symlink])
def test_a_second_name_for_a_loaded_file_gets_a_copy(lib_a, tmp_path, link):
    other = str(tmp_path / "other.so")
    link(lib_a, other)
    first = load(lib_a)
    before = copies()
    second = load(other)
    assert copies() == before + 1
    assert (first["count_calls"](), second["count_calls"]()) == (1, 1)


def test_a_library_dlclose_keeps_is_never_handed_out_again(tmp_path):
    """A NODELETE library stays mapped after dlclose; loading its file again must not give
    the next module the old statics."""
    path = str(tmp_path / "nodelete.so")
    shutil.copyfile(_build(3, ("-Wl,-z,nodelete",)), path)
    before, kept = copies(), dso.library_stats()["kept"]
    for _ in range(6):
        mod = load(path)
        assert [mod["count_calls"](), mod["count_calls"]()] == [1, 2]
        del mod
    assert copies() == before + 5  # the first load was the file itself
    assert dso.library_stats()["kept"] == kept + 5  # each copy's memfd, its name taken


def test_the_thread_pool_owner_stays_and_does_not_change(built, lib_a):
    owner = dso.pool_owner()
    assert owner is not None
    for _ in range(3):
        load(lib_a)["count_calls"]()
    assert dso.pool_owner() is owner
    assert owner._handle in dso._OPEN  # never closed: its workers run its code


def _memfd_create_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> int:
        raise OSError("memfd_create: not allowed here")

    monkeypatch.setattr(os, "memfd_create", refuse)


def _memfd_not_executable(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dso._open_fresh

    def open_fresh(name: str, fd: int | None = None) -> Any:
        if name.startswith("/proc/self/fd/"):  # as with vm.memfd_noexec=2, or no /proc
            raise OSError(f"{name}: failed to map segment from shared object")
        return real(name, fd)

    monkeypatch.setattr(dso, "_open_fresh", open_fresh)


@pytest.mark.parametrize("refuse", [_memfd_create_refused, _memfd_not_executable])
def test_copies_fall_back_to_files_that_are_removed(lib_a, tmp_path, monkeypatch, refuse):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    refuse(monkeypatch)
    monkeypatch.setattr(dso, "_use_memfd", True)
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    fds = open_fds()
    first, second = load(lib_a), load(lib_a)
    assert not dso._use_memfd
    assert (first["count_calls"](), second["count_calls"]()) == (1, 1)
    assert os.listdir(scratch) == []  # the copy was unlinked once mapped
    assert open_fds() == fds


def test_a_copy_that_cannot_be_read_names_the_file(lib_a, monkeypatch):
    def broken(*args: Any) -> None:
        raise OSError(5, "Input/output error")

    keep = load(lib_a)
    fds = open_fds()
    monkeypatch.setattr(shutil, "copyfileobj", broken)
    with pytest.raises(ArtifactError, match=r"a\.so: is loaded already, and copying it failed: "
                                            r".*Input/output error"):
        load(lib_a)
    assert open_fds() == fds
    del keep


def test_copy_attempts_are_bounded(lib_a, monkeypatch):
    keep = load(lib_a)
    fds = open_fds()
    monkeypatch.setattr(dso, "_is_loaded", lambda name: True)  # every name taken
    with pytest.raises(ArtifactError, match=r"a\.so: is loaded already, and the names of 4 "):
        dso.open_library(lib_a)
    assert open_fds() == fds  # the memfds of the attempts are closed
    del keep


def test_a_copy_that_cannot_be_made_names_the_file(lib_a, monkeypatch):
    def no_tmp(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    keep = load(lib_a)
    monkeypatch.setattr(dso, "_use_memfd", False)
    monkeypatch.setattr("tempfile.mkstemp", no_tmp)
    with pytest.raises(ArtifactError, match=r"a\.so: is loaded already, and no private copy "
                                            r"of it can be made in .*No space left"):
        load(lib_a)
    del keep


def test_a_library_that_fails_its_checks_is_closed(tmp_path):
    """A shared library that is not ember's (a copy of libm) is closed again, not left open."""
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6",
                             "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6")
                 if os.path.exists(p)), None)
    if libm is None:
        pytest.skip("no libm at the usual paths")
    plain = str(tmp_path / "plain.so")
    shutil.copyfile(libm, plain)
    open_before = dso.library_stats()["open"]
    with pytest.raises(ArtifactError, match=r"plain\.so: not an ember library"):
        load(plain)
    assert dso.library_stats()["open"] == open_before


# ---- flat over many cycles ------------------------------------------------------------------
def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def open_fds() -> int:
    gc.collect()  # a module an earlier test left in a cycle closes its memfd when collected
    return len(os.listdir("/proc/self/fd"))


def mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def process_state() -> dict[str, int]:
    gc.collect()
    return {"rss": rss(), "fds": open_fds(), "maps": mappings(), "handles": len(_bridge._HANDLES),
            "open": dso.library_stats()["open"], "modules": len(loaders._LIBRARIES)}


def assert_flat(step: Callable[[], Any], warmup: int, cycles: int, rss_tolerance: int) -> None:
    """RSS within ``rss_tolerance`` bytes and everything else exactly where it was. A leak of
    one mapping per load would add thousands of map lines, of one library's pages hundreds
    of KiB per cycle; allocator slack and the odd new Python arena move by a few lines."""
    for _ in range(warmup):
        step()
    before = process_state()
    for _ in range(cycles):
        step()
    after = process_state()
    grown = {k: after[k] - before[k] for k in before}
    assert grown["rss"] < rss_tolerance, f"RSS grew by {grown['rss'] / 2**20:.2f} MiB"
    assert grown["maps"] <= 4, f"{grown['maps']} more mappings"
    assert (grown["fds"], grown["handles"], grown["open"], grown["modules"]) == (0, 0, 0, 0), grown


def test_load_unload_cycles_keep_the_process_flat(lib_a):
    before = copies()

    def cycle() -> None:
        assert load(lib_a)["count_calls"]() == 1

    assert_flat(cycle, warmup=300, cycles=3_000, rss_tolerance=2 << 20)
    assert copies() == before  # nothing held the file: never a copy


def test_copy_cycles_keep_the_process_flat(lib_a):
    """The file stays loaded: each cycle loads (and drops) a private copy."""
    keep = load(lib_a)
    before = copies()

    def cycle() -> None:
        assert load(lib_a)["count_calls"]() == 1

    assert_flat(cycle, warmup=200, cycles=2_000, rss_tolerance=2 << 20)
    assert copies() == before + 2_200
    assert keep["count_calls"]() == 1


# ---- a compiled model -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlp_path(built, tmp_path_factory) -> tuple[str, np.ndarray, np.ndarray]:
    from ember.relay.testing import mlp

    mod, params = mlp.get_workload(batch_size=1)
    path = str(tmp_path_factory.mktemp("mlp") / "mlp.so")
    ember.compile(mod, params=params).save(path)
    x = np.random.default_rng(0).random((1, 1, 28, 28), dtype="float32")
    want = ember.load(path)(x)
    return path, x, want


def test_two_live_models_of_one_path_are_correct_and_independent(mlp_path):
    path, x, want = mlp_path
    y = x * 0.5
    first = ember.load(path)
    want_y = first(y).copy()
    second = ember.load(path)  # a private copy of the library: its own statics and buffers
    got_x = second(x).copy()
    np.testing.assert_array_equal(first(y), want_y)
    np.testing.assert_array_equal(got_x, want)
    del first
    np.testing.assert_array_equal(second(x), want)


def test_reloading_a_model_opens_its_file(mlp_path):
    path, x, want = mlp_path
    before = copies()
    for _ in range(20):
        np.testing.assert_array_equal(ember.load(path)(x), want)
    assert copies() == before


@pytest.mark.slow
def test_a_model_loads_30000_times(mlp_path):
    """The issue's process: ``ember.load`` of one model again and again died of RecursionError
    after 4,000 to 6,000 loads. 30,000 loads and runs: RSS within 5 MiB, nothing else moves,
    no copy."""
    path, x, want = mlp_path
    before = copies()

    def cycle() -> None:
        ember.load(path)(x)

    assert_flat(cycle, warmup=1_000, cycles=30_000, rss_tolerance=5 << 20)
    assert copies() == before
    np.testing.assert_array_equal(ember.load(path)(x), want)
