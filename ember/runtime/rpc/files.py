"""A session's directory on the server: uploads, downloads, removal, linking.

Every name a client gives is relative to the session directory; absolute names, names with a
``..`` component and names that resolve (through links) outside the directory raise
RPCPathError before anything touches the file system.
"""
from __future__ import annotations

import os
import re
import shutil

from .protocol import RPCPathError

_DRIVE = re.compile(r"^[A-Za-z]:")


class SessionFiles:
    """The files of one session, under ``root`` (which the server creates and removes)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)

    def resolve(self, name: object, what: str) -> str:
        """The absolute path of ``name`` inside the session directory, or RPCPathError."""
        if not isinstance(name, str) or not name:
            raise RPCPathError(f"{what}: expected a non-empty file name, got {name!r}")
        if "\0" in name:
            raise RPCPathError(f"{what}: file name {name!r} contains a NUL byte")
        norm = name.replace("\\", "/")
        if norm.startswith("/") or _DRIVE.match(norm):
            raise RPCPathError(f"{what}: {name!r} is an absolute path; name files relative to "
                               "the session directory")
        parts = [p for p in norm.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise RPCPathError(f"{what}: {name!r} leaves the session directory ('..' is not "
                               "allowed in file names)")
        path = os.path.realpath(os.path.join(self.root, *parts))
        if path != self.root and not path.startswith(self.root + os.sep):
            raise RPCPathError(f"{what}: {name!r} resolves outside the session directory")
        return path

    def write(self, name: str, data: bytes | memoryview, append: bool) -> None:
        """Create (or extend, with ``append``) the file ``name``."""
        path = self.resolve(name, "upload")
        if path == self.root:
            raise RPCPathError("upload: the file name names the session directory itself")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "ab" if append else "wb") as f:
            f.write(data)

    def size(self, name: str) -> int:
        return os.path.getsize(self._existing(name, "download"))

    def read(self, name: str, offset: int = 0, length: int = -1) -> bytes:
        """``length`` bytes of ``name`` from ``offset`` (-1: to the end)."""
        path = self._existing(name, "download")
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def remove(self, name: str) -> None:
        """Remove a file or a directory tree of the session."""
        path = self._existing(name, "remove")
        if path == self.root:
            raise RPCPathError("remove: refusing to remove the session directory itself")
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)

    def listdir(self, name: str = ".") -> list[str]:
        """The entries of a directory of the session, sorted."""
        return sorted(os.listdir(self._existing(name, "listdir")))

    def _existing(self, name: str, what: str) -> str:
        path = self.resolve(name, what)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{what}: no file {name!r} in the session directory")
        return path

    def linked_library(self, name: str) -> bytes:
        """The bytes of a shared library: ``name`` itself (.so), or linked from a .tar of
        sources exported by ``export_library`` (which needs a C compiler on the server)."""
        path = self._existing(name, "download_linked_module")
        if name.endswith((".so", ".dylib", ".dll")):
            return self.read(name)
        if not name.endswith(".tar"):
            raise ValueError(f"download_linked_module: {name!r} is neither a library (.so) nor "
                             "a .tar of sources from export_library")
        from ..loaders import link_tar

        with open(link_tar(path), "rb") as f:
            return f.read()
