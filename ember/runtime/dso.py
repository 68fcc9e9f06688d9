"""Opening and closing the shared libraries behind DSOModules: one ``dlopen`` per live module.

``dlopen`` hands back the library already open when it is asked for the same file again
(by the name given to it, or by the file's device and inode), and that library's globals
(the module context, the host table, what generated code caches in statics) belong to the
module that opened it first. So a second live module of one file needs a private copy.

The rule here: a library is opened from its own file, and copied only when ``dlopen``
answers with a library that is open *right now*. ``_OPEN`` holds the handle of every library
this module opened and has not closed, so the question is asked of ``dlopen`` itself, never
of a remembered inode number: a file system reuses a freed inode for the next file it
creates, and ember used to take such a new file (often its own temporary copy) for one it
had loaded before, copy it again, and recurse until ``RecursionError`` after a few thousand
loads. This also covers a file replaced at the same path while the old one is open
(``dlopen`` matches the name and returns the old library: the new file is loaded as a copy)
and a second name for an open file (a hard or symbolic link).

Closing: ``close_library``, when a DSOModule is freed. Two kinds of library stay open for the
life of the process, and stay in ``_OPEN`` so that their files load as copies:

- the thread-pool owner: the first library loaded that has ember's pool (``EmberPoolLaunch``)
  lends it to every library loaded after it (through the host table), and its workers run
  its code. A later library never replaces it.
- a library ``dlclose`` did not unload (one marked NODELETE, e.g. by a C++ unique symbol):
  reusing it would hand a new module the statics of a freed one.

A copy goes to the temporary directory and is unlinked as soon as it is mapped, so nothing
is left behind; its name is checked against the open libraries' names (``dlopen`` matches
names even of unlinked files) and the attempts are bounded.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import struct
import tempfile
import threading
from ctypes import c_void_p

import _ctypes

from . import _bridge
from .errors import ArtifactError

_OPEN: dict[int, str] = {}  # dlopen handle -> the path it was opened as, for every open library
_PINNED: set[int] = set()  # handles that are never closed (pool owner, libraries dlclose kept)
_POOL_OWNER: list[ctypes.CDLL] = []  # the library whose thread pool every library uses
_LOCK = threading.RLock()  # reentrant: a finalizer may close a library while this thread opens
_COPY_ATTEMPTS = 4
_MODE = os.RTLD_NOW | os.RTLD_LOCAL
_NOLOAD = getattr(os, "RTLD_NOLOAD", 0)  # dlopen flag: only answer whether it is loaded
_copies = 0  # private copies made so far (library_stats)
_LIB_MAGICS = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"MZ")


# ---- checking a file before dlopen ---------------------------------------------------------
def _check_elf(path: str, data: bytes, size: int) -> None:
    """Reject ELF files whose headers point past the end of the file (truncated copies)."""
    if len(data) < 52 or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise ArtifactError(f"{path}: truncated or corrupt ELF header ({size} bytes)")
    end = "<" if data[5] == 1 else ">"
    if data[4] == 2:  # 64-bit
        if len(data) < 64:
            raise ArtifactError(f"{path}: truncated ELF header ({size} bytes)")
        phoff, shoff = struct.unpack_from(end + "QQ", data, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", data, 54)
    else:
        phoff, shoff = struct.unpack_from(end + "II", data, 28)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", data, 42)
    for what, off, count, entsize in (("program", phoff, phnum, phentsize),
                                      ("section", shoff, shnum, shentsize)):
        if off + count * entsize > size:
            raise ArtifactError(f"{path}: truncated: the ELF {what} headers end at byte "
                                f"{off + count * entsize} but the file has {size} bytes")


def check_library_file(path: str) -> None:
    """ArtifactError unless ``path`` looks like a complete shared library."""
    if not os.path.exists(path):
        raise ArtifactError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise ArtifactError(f"{path}: not a regular file")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(64)
    if not any(head.startswith(m) for m in _LIB_MAGICS):
        raise ArtifactError(f"{path}: not a shared library (it starts with {head[:8]!r}, "
                            f"{size} bytes)")
    if head.startswith(b"\x7fELF"):
        _check_elf(path, head, size)


# ---- opening and closing ---------------------------------------------------------------------
def open_library(path: str) -> ctypes.CDLL:
    """``dlopen`` the library at ``path``, or a private copy of it if that file is open now.

    ArtifactError names the path when the file cannot be loaded."""
    # Absolute: dlopen searches the system library path for a bare file name ("m.so").
    path = os.path.abspath(path)
    with _LOCK:
        lib = _open_unshared(path)
        return lib if lib is not None else _open_copy(path)


def _open_unshared(path: str) -> ctypes.CDLL | None:
    """The library at ``path`` if dlopen loads it afresh; None if dlopen answers with a library
    that is open now (its reference dropped again)."""
    try:
        lib = ctypes.CDLL(path, mode=_MODE)
    except OSError as err:
        raise ArtifactError(f"{path}: cannot be loaded as a shared library: {err}") from None
    if lib._handle in _OPEN:
        _dlclose(lib._handle)  # dlopen counted one more reference to the open library
        return None
    _OPEN[lib._handle] = path
    return lib


def _open_copy(path: str) -> ctypes.CDLL:
    global _copies
    suffix = os.path.splitext(path)[1] or ".so"
    for _ in range(_COPY_ATTEMPTS):  # a new name can still match an unlinked open copy's name
        fd, copy = tempfile.mkstemp(suffix=suffix, prefix="ember_dso_")
        try:
            with open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            lib = _open_unshared(copy)
        finally:
            os.unlink(copy)  # the mapping stays valid
        if lib is not None:
            _copies += 1
            return lib
    raise ArtifactError(f"{path}: is open already, and {_COPY_ATTEMPTS} private copies of it "
                        f"in {tempfile.gettempdir()} were all taken by dlopen for libraries "
                        "that are open too")


def close_library(lib: ctypes.CDLL) -> None:
    """Unload a library whose last module was freed (unless it stays: see the module doc)."""
    handle = lib._handle
    with _LOCK:
        if handle in _PINNED:
            return
        path = _OPEN.pop(handle, None)
        if path is None:
            return  # closed already
        _dlclose(handle)
        if _still_loaded(path, handle):  # NODELETE: its statics must not go to a new module
            _OPEN[handle] = path
            _PINNED.add(handle)


def _dlclose(handle: int) -> None:
    try:
        _ctypes.dlclose(handle)
    except OSError:
        pass


def _still_loaded(path: str, handle: int) -> bool:
    """Whether the library ``handle``, just closed, is still mapped (dlopen with RTLD_NOLOAD
    answers only with a library that is loaded; another one at that path is not it)."""
    if not _NOLOAD:
        return False
    try:
        probe = _ctypes.dlopen(path, _NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    _ctypes.dlclose(probe)
    return bool(probe == handle)


def share_thread_pool(lib: ctypes.CDLL) -> None:
    """Make the first library's pool (``EmberPoolLaunch``) the process's: the host table that
    every library gets names it, so models in one process share one set of worker threads.
    That library is never closed (its workers run its code)."""
    with _LOCK:
        if _POOL_OWNER:
            return
        launch = getattr(lib, "EmberPoolLaunch", None)  # libraries from before the pool lack it
        if launch is not None:
            _POOL_OWNER.append(lib)
            _PINNED.add(lib._handle)
            _bridge.HOST_TABLE.parallel_launch = ctypes.cast(launch, c_void_p).value


def pool_owner() -> ctypes.CDLL | None:
    """The library whose thread pool the process uses; None before one was loaded."""
    return _POOL_OWNER[0] if _POOL_OWNER else None


def library_stats() -> dict[str, int]:
    """Counts for tests and benchmarks: libraries open now, those that stay open for the
    process (pool owner, what dlclose kept), and private copies made so far."""
    with _LOCK:
        return {"open": len(_OPEN), "pinned": len(_PINNED), "copies": _copies}
