"""Lowered kernels on disk: a rebuild of an unchanged model skips lowering.

Lowering a fused primitive function (tensor expressions, schedule, loop IR, C) is most of a
build's Python time. Its result is stored under ``$EMBER_CACHE_DIR/kernels``, content
addressed by everything it depends on:

- the function: its structural hash (constants by value) and its Relay text (names, which
  the kernel's C and argument names carry);
- the target kind and CPU choice (``cpu_choice(target).key``: SIMD level and -march), and the
  host's SIMD level;
- the build settings: the PassContext's opt level and config, the ``EMBER_*`` environment
  variables that may steer lowering, and the tuning records in use (``topi/tile_records.py``);
- the compiler's own code: a digest of ember's lowering packages and C headers (computed
  once per process), so a changed schedule or kernel never reuses a stale entry.

Entries are pickles written atomically; a missing, truncated or unreadable entry is a miss.
``EMBER_KERNEL_CACHE=0`` turns the cache off. Kernels are lowered under a placeholder name
(``PLACEHOLDER``) and renamed on use, so cached and fresh builds give identical C.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

from ...runtime.cache import atomic_write, cache_dir, content_hash, touch

PLACEHOLDER = "ember_kernel_placeholder_3f9c2e"
_TAG = "ember-kernel-3"
# Packages whose code decides what a primitive function lowers to.
_CODE_DIRS = ("ir", "te", "tir", "topi", "target", "relay/op", "relay/backend", "include")
# EMBER_* variables that cannot change a kernel (debug output, paths, run-time settings).
_NEUTRAL_ENV = ("EMBER_DEBUG", "EMBER_CACHE_DIR", "EMBER_KEEP_TEMPS", "EMBER_NUM_THREADS",
                "EMBER_KERNEL_CACHE", "EMBER_PREFETCH")


def enabled() -> bool:
    """False when ``EMBER_KERNEL_CACHE=0``."""
    return os.environ.get("EMBER_KERNEL_CACHE", "1").strip() != "0"


@functools.cache
def code_fingerprint() -> str:
    """A digest of the source of ember's lowering packages and headers (once per process)."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for sub in _CODE_DIRS:
        for path in sorted((root / sub).rglob("*")):
            if path.suffix in (".py", ".h") and path.is_file():
                digest.update(str(path.relative_to(root)).encode() + b"\0")
                digest.update(path.read_bytes())
    return digest.hexdigest()


def build_settings() -> str:
    """The opt level, PassContext config and steering ``EMBER_*`` variables, as text."""
    from ...ir.transform import PassContext

    ctx = PassContext.current()
    config = sorted((str(k), repr(v)) for k, v in dict(ctx.config).items())
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith("EMBER_") and k not in _NEUTRAL_ENV)
    return repr((ctx.opt_level, config, env))


def kernel_key(func_hash: int, relay_text: str, kind: str, cpu_key: str) -> str:
    """The cache key of one primitive function lowered for ``kind`` and CPU ``cpu_key``."""
    from ...target.simd import host_level
    from ...topi import tile_records

    # the host's level too: topi still sizes some register tiles from the host it runs on;
    # and the tuning records, whose tiles are the kernel calls' arguments
    return content_hash(_TAG, code_fingerprint(), build_settings(), kind, cpu_key,
                        host_level().name, tile_records.fingerprint(), str(func_hash),
                        relay_text)


def _path(key: str, create: bool = False) -> Path:
    return cache_dir("kernels", key[:2], create=create) / f"{key}.pickle"


def load(key: str) -> Any | None:
    """The entry stored under ``key``, or None (absent, unreadable, or the cache is off)."""
    if not enabled():
        return None
    try:
        with open(_path(key), "rb") as f:
            entry = pickle.load(f)
        touch(_path(key))
        return entry
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError,
            IndexError, TypeError, ValueError, RecursionError):
        return None


def store(key: str, entry: Any) -> None:
    """Store ``entry`` under ``key`` (atomically; silently skipped when it cannot be)."""
    if not enabled():
        return
    try:
        atomic_write(_path(key, create=True), pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
    except (OSError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        pass  # a kernel that cannot be stored is lowered again next time
