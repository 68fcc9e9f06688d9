"""The on-disk cache of build products (compiled libraries, compiler probes).

Everything ember generates goes under ``$EMBER_CACHE_DIR`` (default ``~/.cache/ember``) or a
temporary directory, never into the source tree. Entries are named by a content hash, so a
rebuild of unchanged inputs finds its result, and they are written atomically (temporary name,
then ``os.replace``), so concurrent builds of the same input are safe.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path


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
