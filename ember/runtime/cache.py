"""The on-disk cache of build products (compiled libraries, compiler probes).

Everything ember generates goes under ``$EMBER_CACHE_DIR`` (default ``~/.cache/ember``) or a
temporary directory, never into the source tree. Entries are named by a content hash, so a
rebuild of unchanged inputs finds its result, and they are written atomically (temporary name,
then ``os.replace``), so concurrent builds of the same input are safe.

The cache is bounded: :func:`prune` deletes the least recently used build products (compiled
libraries, objects, lowered kernels, blobs) until they fit ``$EMBER_CACHE_MAX_MB`` (default
2048; 0 or less: unbounded). A hit marks its entry used. Entries used in the last few minutes
are never deleted: another build (in this process or another) may be about to load them.
Tuning records, demo pictures and benchmark results are never pruned.

A new library does not walk the cache each time (with thousands of entries the walk costs more
than compiling a small library): :func:`note_growth` adds its bytes to the size the last walk
measured, kept in ``.usage``, and walks only when that estimate passes the bound or the last
walk is more than a few minutes old (other writers, lowered kernels and blobs are not counted
between walks).
"""
from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from pathlib import Path

# Subdirectories holding build products that are rebuilt when missing: what prune may delete.
PRUNABLE = ("lib", "obj", "kernels", "blob", "cpu", "failed")
DEFAULT_MAX_MB = 2048
KEEP_RECENT_S = 300.0  # entries used this recently are never deleted
RECHECK_S = 300.0  # note_growth walks the cache again after this long, whatever its estimate


def cache_dir(*parts: str, create: bool = True) -> Path:
    """The cache directory (``$EMBER_CACHE_DIR`` or ``~/.cache/ember``), or a subdirectory."""
    root = os.environ.get("EMBER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                             "ember")
    path = Path(root, *parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def content_hash(*chunks: "bytes | str") -> str:
    """A hex digest of the chunks (each length-prefixed, so boundaries matter)."""
    h = hashlib.sha256()
    for chunk in chunks:
        data = chunk.encode() if isinstance(chunk, str) else chunk
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


def temp_sibling(path: "str | Path") -> Path:
    """A unique temporary name in ``path``'s directory (unique per process and thread), to
    write and then ``os.replace`` onto ``path``."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def atomic_write(path: "str | Path", data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either nothing or the whole file."""
    tmp = temp_sibling(path)
    tmp.write_bytes(data)
    os.replace(tmp, path)


def touch(path: "str | Path") -> bool:
    """Mark a cache entry as used (its mtime orders :func:`prune`); whether it exists. A
    caller about to use an entry touches it first and tests the result, not ``exists()``:
    once touched, a prune in another process keeps it (``KEEP_RECENT_S``), where an entry
    found by ``exists()`` could be deleted before it is read."""
    try:
        os.utime(path)
        return True
    except OSError:
        return False


def max_cache_bytes() -> int:
    """``$EMBER_CACHE_MAX_MB`` in bytes (0: unbounded); an unreadable value is the default."""
    raw = os.environ.get("EMBER_CACHE_MAX_MB", "")
    try:
        mb = float(raw) if raw.strip() else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    if math.isnan(mb):
        mb = DEFAULT_MAX_MB
    return 0 if mb == math.inf else max(0, int(mb * (1 << 20)))


def prune(max_bytes: int | None = None, keep_recent_s: float = KEEP_RECENT_S) -> int:
    """Delete the least recently used build products until the prunable part of the cache
    takes at most ``max_bytes`` (default :func:`max_cache_bytes`); returns the bytes freed.
    Entries used in the last ``keep_recent_s`` seconds stay, whatever the size."""
    return _prune(max_bytes, keep_recent_s)[0]


def note_growth(nbytes: int) -> bool:
    """Record that build products of ``nbytes`` were added; prune (and record the size it
    measures) when the estimate passes the bound or the last walk is older than
    ``RECHECK_S``. Returns whether it walked the cache."""
    limit = max_cache_bytes()
    if limit <= 0:
        return False
    usage = cache_dir() / ".usage"
    try:
        total, walked_at = (float(x) for x in usage.read_text().split())
    except (OSError, ValueError):
        total, walked_at = math.inf, 0.0
    total += nbytes
    now = time.time()
    walk = not (total <= limit and 0 <= now - walked_at <= RECHECK_S)
    if walk:
        _, total = _prune(limit, KEEP_RECENT_S)
        walked_at = now
    try:
        atomic_write(usage, f"{int(total)} {walked_at}".encode())
    except OSError:
        pass
    return walk


def _prune(max_bytes: int | None, keep_recent_s: float) -> tuple[int, int]:
    """``prune``'s work: the bytes freed and the prunable bytes left."""
    limit = max_cache_bytes() if max_bytes is None else max_bytes
    if limit <= 0:
        return 0, 0
    entries = []
    for sub in PRUNABLE:
        root = cache_dir(sub, create=False)
        if not root.is_dir():
            continue
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    freed, cutoff = 0, time.time() - keep_recent_s
    for mtime, size, path in sorted(entries):
        if total - freed <= limit or mtime > cutoff:
            break
        try:
            if os.stat(path).st_mtime > cutoff:  # used since the walk (``touch``): keep it
                continue
            os.unlink(path)
            freed += size
        except OSError:
            continue
    return freed, total - freed
