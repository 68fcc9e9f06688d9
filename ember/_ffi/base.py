"""``tvm._ffi.base``: string helpers, the number and string type tuples, and the error class
that scripts import from here."""
from __future__ import annotations

import numpy as np

from ..runtime.errors import TVMError  # noqa: F401

string_types = (str,)
integer_types = (int, np.integer)
numeric_types = (float, int, np.floating, np.integer)


def py_str(value: "bytes | bytearray | str") -> str:
    """A C string (bytes, UTF-8) as a Python str; a str is returned as it is.

    Raises TypeError naming the type for anything else (an int is not a string here)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    raise TypeError(f"py_str: expected bytes or str, got {type(value).__name__} {value!r}")


def c_str(value: str) -> bytes:
    """A Python str as a C string (UTF-8 bytes); TypeError for anything but a str."""
    if not isinstance(value, str):
        raise TypeError(f"c_str: expected a str, got {type(value).__name__} {value!r}")
    return value.encode("utf-8")
