"""The cache is bounded: prune deletes the least recently used build products beyond
$EMBER_CACHE_MAX_MB, never recently used ones nor tuning records; a cache hit marks its entry
used; compiling a new library prunes, walking the cache only when its recorded size passes the
bound or the record is old."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ember.runtime import cache


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    return tmp_path


def _entry(root: Path, rel: str, size: int, age_s: float) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_prune_deletes_least_recently_used_products_first(root: Path) -> None:
    old = _entry(root, "lib/a.so", 4000, age_s=3000)
    mid = _entry(root, "obj/ab/b.o", 4000, age_s=2000)
    new = _entry(root, "kernels/cd/c.pickle", 4000, age_s=1000)
    records = _entry(root, "tuning/cpu.json", 50_000, age_s=9000)
    freed = cache.prune(max_bytes=9000)
    assert freed == 4000 and not old.exists() and mid.exists() and new.exists()
    assert records.exists()  # not a build product
    assert cache.prune(max_bytes=100) == 8000 and not mid.exists() and not new.exists()


def test_recently_used_entries_stay_whatever_the_size(root: Path) -> None:
    recent = _entry(root, "lib/r.so", 10_000, age_s=10)
    stale = _entry(root, "blob/s.bin", 10_000, age_s=cache.KEEP_RECENT_S + 60)
    cache.prune(max_bytes=1)
    assert recent.exists() and not stale.exists()


def test_touch_makes_an_entry_recent(root: Path) -> None:
    a = _entry(root, "lib/a.so", 1000, age_s=5000)
    b = _entry(root, "lib/b.so", 1000, age_s=4000)
    cache.touch(a)  # a cache hit on a
    cache.prune(max_bytes=1500, keep_recent_s=0)
    assert a.exists() and not b.exists()
    assert not cache.touch(root / "lib" / "missing.so")  # no error: it says it is absent


def test_an_entry_used_while_prune_walks_stays(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build in another process that touches an old entry after prune's walk saw it, and
    before the unlink, keeps it (prune checks the mtime again; a test run's workers share a
    cache, and one lost a CPU record between finding and reading it)."""
    used = _entry(root, "cpu/r.c", 1000, age_s=5000)
    other = _entry(root, "lib/o.so", 1000, age_s=4000)
    walk = os.walk

    def walk_then_use(top: str) -> object:
        yield from walk(top)
        if str(top).endswith("cpu"):
            cache.touch(used)  # the other process, right after the walk saw it

    monkeypatch.setattr(cache.os, "walk", walk_then_use)
    cache.prune(max_bytes=1, keep_recent_s=60)
    assert used.exists() and not other.exists()


def test_a_cpu_record_is_touched_when_found_and_written_when_gone(root: Path) -> None:
    from ember.contrib import cc_toolchain
    from ember.testing import find_c_compiler

    if find_c_compiler() is None:
        pytest.skip("no C compiler")
    flags = ["-O2"]
    path = cc_toolchain._cpu_record(flags, None)
    then = time.time() - 5000
    os.utime(path, (then, then))
    assert cc_toolchain._cpu_record(flags, None) == path
    assert path.stat().st_mtime > time.time() - 60  # used now: a prune keeps it
    path.unlink()
    assert cc_toolchain._cpu_record(flags, None) == path and path.exists()


@pytest.mark.parametrize("raw,want", [("", 2048 << 20), ("0", 0), ("1.5", int(1.5 * (1 << 20))),
                                      ("lots", 2048 << 20), ("-3", 0), ("inf", 0),
                                      ("nan", 2048 << 20)])
def test_max_cache_bytes_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str,
                                              want: int) -> None:
    monkeypatch.setenv("EMBER_CACHE_MAX_MB", raw)
    assert cache.max_cache_bytes() == want
    if want == 0:
        assert cache.prune() == 0  # unbounded


def test_growth_walks_the_cache_only_past_the_bound_or_after_a_while(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_CACHE_MAX_MB", "1")  # 1 MiB
    old = _entry(root, "obj/ab/old.o", 600_000, age_s=3600)
    assert cache.note_growth(1000)  # nothing recorded yet: walks, 600 kB fits
    assert old.exists() and (root / ".usage").read_text().split()[0] == "600000"
    newer = _entry(root, "lib/newer.so", 300_000, age_s=1800)
    assert not cache.note_growth(300_000)  # 900 kB recorded: no walk
    _entry(root, "lib/newest.so", 300_000, age_s=600)
    assert cache.note_growth(300_000)  # 1.2 MB recorded: walks and drops the oldest
    assert not old.exists() and newer.exists()
    assert (root / ".usage").read_text().split()[0] == "600000"
    stale = time.time() - cache.RECHECK_S - 60
    (root / ".usage").write_text(f"600000 {stale}")
    assert cache.note_growth(0)  # an old record: walks again, whatever it says
    (root / ".usage").write_text("not a record")
    assert cache.note_growth(0)  # an unreadable record: walks
    monkeypatch.setenv("EMBER_CACHE_MAX_MB", "0")
    assert not cache.note_growth(10 << 30)  # unbounded: never walks


def test_compiling_a_new_library_prunes_and_a_hit_touches(root: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path_factory) -> None:
    from ember.contrib import cc
    from ember.testing import find_c_compiler

    if find_c_compiler() is None:
        pytest.skip("no C compiler found")
    stale = _entry(root, "lib/stale.so", 3 << 20, age_s=3600)
    monkeypatch.setenv("EMBER_CACHE_MAX_MB", "1")
    src = tmp_path_factory.mktemp("src") / "f.c"
    src.write_text("int ember_cache_test_f(void) { return 7; }\n")
    out = cc.create_shared(str(tmp_path_factory.mktemp("o") / "f.so"), [str(src)])
    assert not stale.exists()  # 3 MiB over a 1 MiB bound, an hour old
    built = sorted((root / "lib").glob("*.so"))
    assert built  # the new library is recent: kept
    then = time.time() - 3600
    os.utime(built[0], (then, then))
    cc.create_shared(str(tmp_path_factory.mktemp("o2") / "f.so"), [str(src)])  # a hit
    assert built[0].stat().st_mtime > then + 3000
    del out
