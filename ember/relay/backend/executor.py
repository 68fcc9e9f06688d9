"""``relay.backend.Executor``: which executor a build produces, with its typed options.

``Executor("graph")`` (default), ``Executor("aot", {"interface-api": "c", "unpacked-api":
True})``, ``Executor("vm")``. Equal when name and options are equal; ``str()`` is the name;
``"link-params" in executor`` and ``executor["link-params"]`` read options.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ._options import INT, STRING, Option, RegisteredOptions

_LINK_PARAMS = Option(INT, default=False, is_bool=True)


class Executor(RegisteredOptions):
    """An executor and its options; unknown names, options or wrongly typed values raise
    TVMError with TVM's messages (``Executor "woof" is not defined``)."""

    what = "Executor"
    registry: ClassVar[dict[str, dict[str, Option]]] = {
        "graph": {"link-params": _LINK_PARAMS},
        "aot": {
            "link-params": _LINK_PARAMS,
            "unpacked-api": Option(INT, is_bool=True),
            "interface-api": Option(STRING, choices=("c", "packed")),
            "workspace-byte-alignment": Option(INT),
            "constant-byte-alignment": Option(INT),
        },
        "vm": {},
    }

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(name, options)
