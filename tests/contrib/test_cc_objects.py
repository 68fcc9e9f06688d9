"""The compiler driver's object cache (ember.contrib.cc): one cached object per C source,
keyed by its content, the headers it may include and the flags; damaged objects are rebuilt;
each build reports where its time went."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.contrib import cc
from ember.runtime.errors import CompileError

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache directory for the module (ember's backend object compiles once)."""
    path = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMBER_CACHE_DIR", str(path))
        yield path


def _source(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def _build(sources: list[Path], options: list[str] | None = None) -> cc.BuildReport:
    with cc.build_reports() as reports:
        cc.build_shared(sources, options)
    (report,) = reports
    return report


def _compiled(report: cc.BuildReport) -> set[str]:
    return {s.source for s in report.steps if not s.cached}


def _object_of(cache: Path, before: set[Path]) -> Path:
    (obj,) = set(cache.glob("obj/*/*.o")) - before
    return obj


@requires_cc
def test_second_build_reuses_every_object_and_reports_steps(cache, tmp_path):
    a = _source(tmp_path, "a.c", "int ember_test_a(void) { return 1; }\n")
    b = _source(tmp_path, "b.c", "int ember_test_b(void) { return 2; }\n")
    first = _build([a, b])
    assert {"a.c", "b.c"} <= {s.source for s in first.steps}
    assert not first.cached and first.link_seconds > 0
    assert "link" in first.summary()
    shutil.rmtree(cache / "lib")  # the library, not the objects
    again = _build([a, b])
    assert _compiled(again) == set() and all(s.cached for s in again.steps)
    assert _build([a, b]).cached  # now the library itself is cached


@requires_cc
def test_a_changed_header_recompiles_the_object(cache, tmp_path):
    header = _source(tmp_path, "value.h", "#define VALUE 1\n")
    src = _source(tmp_path, "uses_header.c",
                  '#include "value.h"\nint ember_test_value(void) { return VALUE; }\n')
    lib = cc.build_shared([src])
    assert ctypes.CDLL(str(lib)).ember_test_value() == 1
    header.write_text("#define VALUE 2\n")
    with cc.build_reports() as reports:
        lib = cc.build_shared([src])
    assert "uses_header.c" in _compiled(reports[0])
    assert ctypes.CDLL(str(lib)).ember_test_value() == 2


@requires_cc
@pytest.mark.parametrize("how", ["include", "-include"])
def test_a_header_named_by_absolute_path_keys_the_object(cache, tmp_path, how):
    header = _source(tmp_path / "elsewhere", "absolute.h", "#define ABSOLUTE 1\n")
    line = f'#include "{header}"\n' if how == "include" else ""
    options = ["-include", str(header)] if how == "-include" else None
    src = _source(tmp_path / "src", "uses_absolute.c",
                  line + "int ember_test_absolute(void) { return ABSOLUTE; }\n")
    assert ctypes.CDLL(str(cc.build_shared([src], options))).ember_test_absolute() == 1
    header.write_text("#define ABSOLUTE 2\n")
    with cc.build_reports() as reports:
        lib = cc.build_shared([src], options)
    assert "uses_absolute.c" in _compiled(reports[0])
    assert ctypes.CDLL(str(lib)).ember_test_absolute() == 2


@requires_cc
def test_flags_key_the_object(cache, tmp_path):
    src = _source(tmp_path, "flagged.c", "int ember_test_flag(void) { return FLAG; }\n")
    one = _build([src], ["-DFLAG=1"])
    assert "flagged.c" in _compiled(one)
    two = _build([src], ["-DFLAG=2"])
    assert "flagged.c" in _compiled(two)  # not the -DFLAG=1 object
    shutil.rmtree(cache / "lib")
    assert "flagged.c" not in _compiled(_build([src], ["-DFLAG=1"]))  # that one is reused


@requires_cc
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_cached_object_is_rebuilt(cache, tmp_path, damage):
    src = _source(tmp_path, "damaged.c", f"int ember_test_{damage}(void) {{ return 7; }}\n")
    before = set(cache.glob("obj/*/*.o"))
    cc.build_shared([src])
    obj = _object_of(cache, before)
    data = obj.read_bytes()
    obj.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"not an object" * 10,
                     "empty": b""}[damage])
    assert not cc.object_intact(obj)
    shutil.rmtree(cache / "lib")
    report = _build([src])
    assert "damaged.c" in _compiled(report)
    assert cc.object_intact(obj)
    lib = cc.build_shared([src])
    assert getattr(ctypes.CDLL(str(lib)), f"ember_test_{damage}")() == 7


@requires_cc
def test_an_intact_but_wrong_object_is_rebuilt_after_a_failed_link(cache, tmp_path):
    a = _source(tmp_path, "left.c", "int ember_test_left(void) { return 3; }\n")
    b = _source(tmp_path, "right.c", "int ember_test_right(void) { return 4; }\n")
    before = set(cache.glob("obj/*/*.o"))
    cc.build_shared([a])
    obj_a = _object_of(cache, before)
    before = set(cache.glob("obj/*/*.o"))
    cc.build_shared([b])
    obj_b = _object_of(cache, before)
    # right.c's cached object now defines left.c's symbol: the link sees it twice.
    shutil.copyfile(obj_a, obj_b)
    lib = cc.build_shared([a, b])
    assert ctypes.CDLL(str(lib)).ember_test_right() == 4


@requires_cc
def test_a_real_link_error_still_raises(cache, tmp_path):
    a = _source(tmp_path / "one", "dup.c", "int ember_test_dup(void) { return 1; }\n")
    b = _source(tmp_path / "two", "dup2.c", "int ember_test_dup(void) { return 2; }\n")
    with pytest.raises(CompileError, match="ember_test_dup"):
        cc.build_shared([a, b])


def test_object_intact_rejects_files_that_are_not_objects(tmp_path):
    assert not cc.object_intact(tmp_path / "missing.o")
    path = tmp_path / "text.o"
    path.write_text("hello")
    assert not cc.object_intact(path)
    # An ELF header whose section table lies past the end of the file: truncated.
    elf = bytearray(64)
    elf[:6] = b"\x7fELF\x02\x01"
    elf[40:48] = (1000).to_bytes(8, "little")
    elf[58:60] = (64).to_bytes(2, "little")
    elf[60:62] = (3).to_bytes(2, "little")
    path.write_bytes(bytes(elf))
    assert not cc.object_intact(path)
    path.write_bytes(bytes(elf) + bytes(1000 + 64 * 3 - 64))
    assert cc.object_intact(path)


# ---- objects compiled ahead, in the background (prefetch_objects) ----------------------------
@requires_cc
def test_a_prefetched_object_is_used_by_the_build_not_compiled_again(cache, tmp_path,
                                                                     monkeypatch):
    text = "int prefetched_answer(void) { return 42; }\n"
    assert cc.prefetch_objects([("kernel_answer.c", text)]) == 1
    assert cc.prefetch_objects([("kernel_answer.c", text)]) == 0  # handed over once
    src = _source(tmp_path / "build", "kernel_answer.c", text)
    compiled_here: list[str] = []
    jobs = cc._compile_jobs
    monkeypatch.setattr(cc, "_compile_jobs", lambda todo, files, cwd: (
        compiled_here.extend(cmd[cmd.index("-c") + 1] for cmd, _, _ in todo.values()),
        jobs(todo, files, cwd))[1])
    report = _build([src])
    (step,) = [s for s in report.steps if s.source == "kernel_answer.c"]
    assert not step.cached and step.seconds > 0  # compiled for this build, in the background
    assert not any(c.endswith("kernel_answer.c") for c in compiled_here)  # not a second time
    lib = ctypes.CDLL(str(cc.build_shared([src])))
    assert lib.prefetched_answer() == 42
    assert not cc._INFLIGHT  # nothing left waiting


@requires_cc
def test_a_prefetch_that_fails_raises_nothing_and_the_build_reports_the_error(cache, tmp_path):
    text = "int broken_prefetch(void) { return 1 }\n"  # a careless source: no semicolon
    assert cc.prefetch_objects([("kernel_broken.c", text)]) == 1
    src = _source(tmp_path / "build", "kernel_broken.c", text)
    with pytest.raises(CompileError, match=r"(?s)command: .*kernel_broken\.c.*compiler stderr"):
        cc.build_shared([src])


@requires_cc
def test_prefetch_is_skipped_for_cached_objects_and_when_turned_off(cache, tmp_path,
                                                                    monkeypatch):
    text = "int cached_before(void) { return 1; }\n"
    cc.build_shared([_source(tmp_path / "a", "kernel_cached.c", text)])
    assert cc.prefetch_objects([("kernel_cached.c", text)]) == 0  # its object is there
    monkeypatch.setenv("EMBER_PREFETCH", "0")
    assert cc.prefetch_objects([("kernel_off.c", "int off(void) { return 0; }\n")]) == 0
    assert not any(cache.glob("prefetch/*/kernel_off.c"))


@requires_cc
def test_an_object_another_process_is_compiling_is_waited_for_not_compiled_again(tmp_path):
    """Two processes (test workers, builds started together) needing one object: the second
    waits on the object's lock and takes the first one's result. Here the waiting compile's
    command would fail (``false``), so it passes only if it never runs."""
    real = tmp_path / "real.o"
    src = _source(tmp_path, "one.c", "int one(void) { return 1; }\n")
    subprocess.run([*cc._compiler_argv(), "-c", str(src), "-o", str(real)], check=True)
    obj = tmp_path / "cache" / "k.o"
    obj.parent.mkdir()
    result: list[object] = []
    with cc._object_lock(obj):  # "another process" holds the object's lock
        waiter = threading.Thread(target=lambda: result.append(cc._timed_compile(
            ["false"], [], "k", None, obj.with_suffix(".tmp"), obj)))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive(), "the compile did not wait for the object's lock"
        shutil.copyfile(real, obj)  # the holder's compile lands in the cache
    waiter.join(10)
    assert result == [0.0]
    # with nobody holding the lock and no object, the command runs (and here fails)
    obj.unlink()
    with pytest.raises(CompileError):
        cc._timed_compile(["false"], [src], "k", None, obj.with_suffix(".tmp"), obj)
