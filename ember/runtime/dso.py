"""Opening and closing the shared libraries behind DSOModules: one ``dlopen`` per live module.

``dlopen`` hands back the library already loaded when it is asked for the same file again
(by the name it was given, or by the file's device and inode), and that library's globals
(the module context, the host table, what generated code caches in statics) belong to the
module that opened it first. So a module of a file that is loaded already gets a private
copy of the file, and every other load opens the file itself.

"Loaded already" is asked of the dynamic loader (``dlopen`` with ``RTLD_NOLOAD``), at the
moment of the load, never of a remembered inode number. ember used to remember the (device,
inode) of every file it had loaded, forever: a file system reuses a freed inode for the next
file it creates, so a new file (often ember's own temporary copy) looked loaded, was copied,
and the copy looked loaded too, until ``RecursionError`` after a few thousand loads. Asking
the loader also covers a file replaced at the same path while the old one is loaded (the
loader matches the name: the new file loads as a copy), a second name for a loaded file (a
hard or symbolic link), a library some other code in the process loaded, and one that
``dlclose`` could not unload (marked NODELETE): a new module never gets a used library.

A copy lives in memory where the system allows (a memfd, Linux), else in the temporary
directory, unlinked as soon as it is mapped: nothing is left on disk. Its name is checked the
same way (the loader matches names of unlinked files too), and the attempts are bounded. A
memfd stays open while its library is loaded, so that its name (``/proc/self/fd/N``) names
no other file meanwhile; a copy that ``dlclose`` cannot unload keeps it for good.

Closing: ``close_library``, when a DSOModule is freed. One library stays for the life of the
process: the thread-pool owner, the first library loaded that has ember's pool
(``EmberPoolLaunch``). It lends the pool to every library loaded after it (through the host
table), and its workers run its code; a later library never replaces it. Loading its file
again gives a copy.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import struct
import tempfile
import threading
from ctypes import c_void_p
from dataclasses import dataclass

import _ctypes

from . import _bridge
from .errors import ArtifactError


@dataclass(frozen=True)
class _Opened:
    """An open library: the name dlopen was given, and the memfd holding a copy's bytes."""

    name: str
    fd: int | None


_OPEN: dict[int, _Opened] = {}  # dlopen handle -> how it was opened, for every open library
_POOL_OWNER: list[ctypes.CDLL] = []  # the library whose thread pool every library uses
_KEPT_FDS: list[int] = []  # memfds of copies dlclose could not unload (their names stay taken)
_LOCK = threading.RLock()  # reentrant: a finalizer may close a library while this thread opens
_COPY_ATTEMPTS = 4
_MODE = os.RTLD_NOW | os.RTLD_LOCAL
_NOLOAD = getattr(os, "RTLD_NOLOAD", 0)  # dlopen flag: only answer whether it is loaded
_LIB_MAGICS = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"MZ")
_copies = 0  # private copies made so far (library_stats)
_use_memfd = hasattr(os, "memfd_create")  # until a memfd copy fails to load


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
    """``dlopen`` the library at ``path``, or a private copy of it if that file is loaded now.

    ArtifactError names the path when the file cannot be loaded."""
    # Absolute: dlopen searches the system library path for a bare file name ("m.so").
    path = os.path.abspath(path)
    with _LOCK:
        try:
            lib = _open_fresh(path)
        except OSError as err:
            raise ArtifactError(f"{path}: cannot be loaded as a shared library: {err}") from None
        return lib if lib is not None else _open_copy(path)


def _open_fresh(name: str, fd: int | None = None) -> ctypes.CDLL | None:
    """The library ``name`` newly loaded, or None if the process has it loaded already.
    ``fd``: the memfd holding a copy, closed with the library. OSError if dlopen fails."""
    if _is_loaded(name):
        return None
    handle = _ctypes.dlopen(name, _MODE)
    if handle in _OPEN:  # where RTLD_NOLOAD is missing: dlopen answered with an open one
        _dlclose(handle)
        return None
    _OPEN[handle] = _Opened(name, fd)
    return ctypes.CDLL(name, handle=handle)


def _is_loaded(name: str) -> bool:
    if not _NOLOAD:
        return False
    try:
        probe = _ctypes.dlopen(name, _NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    _dlclose(probe)  # the probe counted a reference
    return True


def _open_copy(path: str) -> ctypes.CDLL:
    global _copies
    taken: list[int] = []  # memfds whose names are loaded already: held so the next differs
    try:
        for _ in range(_COPY_ATTEMPTS):
            lib = _open_memfd_copy(path, taken) if _use_memfd else _open_file_copy(path)
            if lib is not None:
                _copies += 1
                return lib
    finally:
        for fd in taken:
            os.close(fd)
    raise ArtifactError(f"{path}: is loaded already, and the names of {_COPY_ATTEMPTS} private "
                        "copies of it were all taken by loaded libraries too")


def _open_memfd_copy(path: str, taken: list[int]) -> ctypes.CDLL | None:
    """A copy in memory (Linux): nothing on disk, nothing to clean up after a crash. The memfd
    stays open with the library: its name (/proc/self/fd/N) must not name another file while
    the loader can match it."""
    global _use_memfd
    try:
        fd = os.memfd_create(f"ember:{os.path.basename(path)}", os.MFD_CLOEXEC)
    except OSError:
        _use_memfd = False
        return None
    try:
        _copy_file(path, fd)
        lib = _open_fresh(f"/proc/self/fd/{fd}", fd)
    except OSError:  # no /proc, or memory that may not be mapped executable: use files
        os.close(fd)
        _use_memfd = False
        return None
    except BaseException:
        os.close(fd)
        raise
    if lib is None:
        taken.append(fd)
    return lib


def _open_file_copy(path: str) -> ctypes.CDLL | None:
    try:
        fd, copy = tempfile.mkstemp(suffix=os.path.splitext(path)[1] or ".so",
                                    prefix="ember_dso_")
    except OSError as err:
        raise ArtifactError(f"{path}: is loaded already, and no private copy of it can be made "
                            f"in {tempfile.gettempdir()}: {err}") from None
    try:
        try:
            _copy_file(path, fd)
        finally:
            os.close(fd)
        return _open_fresh(copy)
    except OSError as err:
        raise ArtifactError(f"{path}: its private copy {copy} cannot be loaded: {err}") from None
    finally:
        os.unlink(copy)  # the mapping stays valid


def _copy_file(path: str, fd: int) -> None:
    try:
        with open(path, "rb") as src, open(fd, "wb", closefd=False) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except OSError as err:
        raise ArtifactError(f"{path}: is loaded already, and copying it failed: {err}") from None


def close_library(lib: ctypes.CDLL) -> None:
    """Unload a library whose last module was freed (not the thread-pool owner)."""
    with _LOCK:
        if any(lib is owner for owner in _POOL_OWNER):
            return
        opened = _OPEN.pop(lib._handle, None)
        if opened is None:
            return  # closed already
        _dlclose(lib._handle)
        if opened.fd is None:
            return
        if _is_loaded(opened.name):  # NODELETE: mapped for good, and its name taken for good
            _KEPT_FDS.append(opened.fd)
        else:
            os.close(opened.fd)


def _dlclose(handle: int) -> None:
    try:
        _ctypes.dlclose(handle)
    except OSError:
        pass


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
            _bridge.HOST_TABLE.parallel_launch = ctypes.cast(launch, c_void_p).value


def pool_owner() -> ctypes.CDLL | None:
    """The library whose thread pool the process uses; None before one was loaded."""
    return _POOL_OWNER[0] if _POOL_OWNER else None


def library_stats() -> dict[str, int]:
    """Counts for tests and benchmarks: libraries open now (the pool owner included), private
    copies made so far, and copies that ``dlclose`` could not unload (NODELETE)."""
    with _LOCK:
        return {"open": len(_OPEN), "copies": _copies, "kept": len(_KEPT_FDS)}
