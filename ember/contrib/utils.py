"""Temporary directories that clean up after themselves (``EMBER_KEEP_TEMPS=1`` keeps them)."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import sys
import tempfile
import weakref
from typing import Iterator


def _keep_temps() -> bool:
    return os.environ.get("EMBER_KEEP_TEMPS", "0") not in ("", "0")


class TempDirectory:
    """A directory under the system temp dir, removed when garbage collected or at exit.

    It behaves as a path: ``tmp / "model.so"`` and ``tmp.path`` are ``pathlib.Path``s,
    ``os.fspath(tmp)`` is the directory, ``tmp.relpath(name)`` a str inside it, and
    ``with tempdir() as tmp:`` removes it at the end of the block.

    ``custom_path`` uses (and creates) that directory instead and never removes it. The
    directory is kept when ``keep_for_debug`` is true, inside ``set_keep_for_debug()``, or when
    ``EMBER_KEEP_TEMPS=1``; its path is then printed to stderr.
    """

    _KEEP_FOR_DEBUG = False

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool | None = None):
        if custom_path:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
            self._finalizer = None
            return
        self.temp_dir = tempfile.mkdtemp(prefix="ember_")
        keep = self._KEEP_FOR_DEBUG if keep_for_debug is None else keep_for_debug
        if keep or _keep_temps():
            print(f"ember: keeping temporary directory {self.temp_dir}", file=sys.stderr)
            self._finalizer = None
        else:
            # weakref.finalize also runs at interpreter exit.
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.temp_dir, True)

    @classmethod
    @contextlib.contextmanager
    def set_keep_for_debug(cls, keep: bool = True) -> Iterator[None]:
        """Keep every TempDirectory created inside this ``with`` block."""
        old, cls._KEEP_FOR_DEBUG = cls._KEEP_FOR_DEBUG, keep
        try:
            yield
        finally:
            cls._KEEP_FOR_DEBUG = old

    @property
    def path(self) -> pathlib.Path:
        """The directory, as a ``pathlib.Path``."""
        return pathlib.Path(self.temp_dir)

    def __truediv__(self, other: "str | os.PathLike[str]") -> pathlib.Path:
        if not isinstance(other, (str, os.PathLike)):
            raise TypeError(f"TempDirectory / operator: expected a str or path, got "
                            f"{type(other).__name__} {other!r}")
        return self.path / other

    def __fspath__(self) -> str:
        return self.temp_dir

    def relpath(self, name: str) -> str:
        """The absolute path of ``name`` inside this directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names of the entries in this directory."""
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Remove the directory now (unless it is kept)."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> "TempDirectory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None, keep_for_debug: bool | None = None) -> TempDirectory:
    """Create a TempDirectory (see its docstring)."""
    return TempDirectory(custom_path, keep_for_debug)
