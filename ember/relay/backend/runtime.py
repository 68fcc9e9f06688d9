"""``relay.backend.Runtime``: which runtime the built code links against.

``Runtime("cpp")`` (default: ember's hosted runtime, loaded from Python) or ``Runtime("crt",
{"system-lib": True})`` (the standalone C runtime). Same interface as ``Executor``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ._options import INT, Option, RegisteredOptions

_SYSTEM_LIB = Option(INT, is_bool=True)


class Runtime(RegisteredOptions):
    """A runtime and its options; unknown names, options or wrongly typed values raise
    TVMError with TVM's messages (``Runtime "woof" is not defined``)."""

    what = "Runtime"
    registry: ClassVar[dict[str, dict[str, Option]]] = {"cpp": {"system-lib": _SYSTEM_LIB},
                                                         "crt": {"system-lib": _SYSTEM_LIB}}

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, options)
