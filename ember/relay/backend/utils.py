"""Small helpers shared by the code generators (``relay.backend.utils``)."""
from __future__ import annotations


def mangle_module_name(name: str | None) -> str:
    """The prefix of a module's generated symbols: ``tvmgen_<name>`` (``tvmgen`` when empty)."""
    return "tvmgen_" + name if name else "tvmgen"


__all__ = ["mangle_module_name"]
