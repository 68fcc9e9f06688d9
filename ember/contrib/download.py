"""``tvm.contrib.download``: test data (models, images, labels) from a local cache.

``download_testdata(url, relpath, module=None)`` returns the path of
``<root>/<module>/<relpath>``, where ``<root>`` is ``$EMBER_TEST_DATA`` or, as in the
Relay-era stack, ``~/.tvm_test_data`` (so a cache filled for TVM serves ember unchanged).

ember does not reach the network unless asked: the machine may be offline, and a test suite
should not hang on it. A file missing from the cache raises ``MissingTestDataError`` naming
the file, the directory and the URL to fetch it from; set ``EMBER_TEST_DATA_DOWNLOAD=1`` to let
``download_testdata`` fetch it instead. ``download(url, path)`` always fetches (any URL
``urllib`` reads, ``file://`` included), writing through a temporary file so that an
interrupted download never leaves a partial file behind.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence

from ..runtime.errors import TVMError

__all__ = ["MissingTestDataError", "download", "download_testdata", "cache_root"]

_DOWNLOAD_ENV = "EMBER_TEST_DATA_DOWNLOAD"
_TIMEOUT_S = 60.0


class MissingTestDataError(TVMError, FileNotFoundError):
    """A test data file is not in the cache, and downloading is off or failed: names the
    file, the directory it was looked for in, and the URL it comes from."""


def cache_root() -> str:
    """The cache directory: ``$EMBER_TEST_DATA``, else ``~/.tvm_test_data``."""
    return os.environ.get("EMBER_TEST_DATA") or os.path.join(os.path.expanduser("~"),
                                                              ".tvm_test_data")


def _module_path(module: str | Sequence[str] | None) -> str:
    if module is None:
        return ""
    if isinstance(module, str):
        return module
    if isinstance(module, (list, tuple)) and all(isinstance(m, str) for m in module):
        return os.path.join(*module) if module else ""
    raise TypeError(f"download_testdata: module must be a str or a list/tuple of str "
                    f"(sub-directories of the test data cache), got {module!r}")


def download(url: str, path: str | os.PathLike[str], overwrite: bool = False,
             size_compare: bool = False, verbose: int = 1, retries: int = 3) -> None:
    """Fetch ``url`` into ``path`` (parent directories are created). An existing file is
    kept unless ``overwrite``. ``size_compare`` is accepted for compatibility and ignored.

    Tries ``retries + 1`` times; raises TVMError naming the URL, the path and the last
    failure."""
    path = os.fspath(path)
    if os.path.isfile(path) and not overwrite:
        if verbose >= 1:
            print(f"File {path} exists, skip.")
        return
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"download: retries must be an int >= 0, got {retries!r}")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    if verbose >= 1:
        print(f"Downloading from url {url} to {path}")
    error: BaseException | None = None
    for attempt in range(retries + 1):
        try:
            _fetch(url, path, directory)
            return
        except (OSError, ValueError) as err:  # URLError is an OSError; a bad URL a ValueError
            error = err
            if attempt < retries:
                time.sleep(min(2.0 ** attempt, 8.0))
    raise TVMError(f"download: could not fetch {url} into {path} after {retries + 1} "
                   f"attempt(s): {error}") from error


def _fetch(url: str, path: str, directory: str) -> None:
    # A temporary file in the same directory, renamed into place: atomic on POSIX.
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".download-")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=_TIMEOUT_S) as src:
            shutil.copyfileobj(src, out)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def download_testdata(url: str, relpath: str, module: str | Sequence[str] | None = None,
                      overwrite: bool = False) -> str:
    """The absolute path of test data file ``relpath`` (under sub-directory ``module``) of
    the cache (see the module docstring). Raises MissingTestDataError when the file is not
    there and downloading is not enabled (``EMBER_TEST_DATA_DOWNLOAD=1``), TVMError when an
    enabled download fails."""
    if not isinstance(relpath, str) or not relpath:
        raise TypeError(f"download_testdata: relpath must be a non-empty str, got {relpath!r}")
    root = os.path.abspath(cache_root())
    directory = os.path.abspath(os.path.join(root, _module_path(module)))
    path = os.path.abspath(os.path.join(directory, relpath))
    if os.path.commonpath([root, path]) != root or path == root:
        raise ValueError(f"download_testdata: relpath {relpath!r} with module {module!r} "
                         f"names {path}, which is not a file inside the test data cache {root}")
    if os.path.isfile(path) and not overwrite:
        return path
    if os.environ.get(_DOWNLOAD_ENV, "0") in ("", "0"):
        raise MissingTestDataError(
            f"download_testdata: {relpath!r} is not in the test data cache {directory} "
            f"(looked for {path}); ember does not download by default (the machine may be "
            f"offline). Fetch {url} into that path, point $EMBER_TEST_DATA at a directory "
            f"that has it, or set {_DOWNLOAD_ENV}=1 to let ember download it")
    download(url, path, overwrite=overwrite, verbose=1 if sys.stdout.isatty() else 0)
    return path
