"""Names in generated C: prefixes, C naming styles and sanitising (``relay.backend.name_transforms``).

Generated symbols carry a ``TVM`` / ``TVMGen`` prefix (``prefix_name``, ``prefix_generated_name``)
and are turned into the C style of their role: functions ``TVMGenMyModel`` (CamelCase),
variables ``tvmgen_my_model`` (lower case), constants ``TVMGEN_MY_MODEL`` (upper case).
``sanitize_name`` maps anything that is not a letter or digit to ``_``; two names that become
the same after sanitising are an error (``check_unique_c_names``), never a silent clash.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...runtime.errors import TVMError


class NameError_(TVMError, ValueError):
    """A name that cannot become a C identifier (empty, missing prefix, clash)."""


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise NameError_(msg)


def to_c_function_style(original_name: str) -> str:
    """``TVMGen_my_model`` -> ``TVMGenMyModel``: each ``_``-separated word capitalised."""
    _require(bool(original_name), "Function name is empty")
    _require(original_name.startswith("TVM"), "Function not TVM prefixed")
    out, new_word = ["TVM"], True
    for ch in original_name[3:]:
        if ch.isalpha():
            out.append(ch.upper() if new_word else ch.lower())
            new_word = False
        elif ch == "_":
            new_word = True
        else:
            out.append(ch)
            new_word = False
    return "".join(out)


def to_c_variable_style(original_name: str) -> str:
    """``TVMGen_My_Model`` -> ``tvmgen_my_model``."""
    _require(bool(original_name), "Variable name is empty")
    _require(original_name.startswith("TVM"), "Variable not TVM prefixed")
    return original_name.lower()


def to_c_constant_style(original_name: str) -> str:
    """``TVMGen_My_Model`` -> ``TVMGEN_MY_MODEL``."""
    _require(bool(original_name), "Constant name is empty")
    _require(original_name.startswith("TVM"), "Constant not TVM prefixed")
    return original_name.upper()


def _segments(names: str | Sequence[str]) -> list[str]:
    if isinstance(names, str):
        _require(names != "", "Name is empty")
        return [names]
    names = list(names)
    _require(bool(names), "Name segments empty")
    for n in names:
        _require(bool(n), "Name segment is empty")
    return names


def combine_names(names: str | Sequence[str]) -> str:
    """Segments joined with ``_``."""
    return "_".join(_segments(names))


def prefix_name(names: str | Sequence[str]) -> str:
    """``TVM_`` + the segments joined with ``_`` (``["woof", "moo"]`` -> ``TVM_woof_moo``)."""
    return "TVM_" + combine_names(names)


def prefix_generated_name(names: str | Sequence[str]) -> str:
    """``TVMGen_`` + the segments joined with ``_``."""
    return "TVMGen_" + combine_names(names)


def sanitize_name(original_name: str) -> str:
    """Every character that is not a letter or a digit becomes ``_`` (``woof:1`` -> ``woof_1``)."""
    _require(bool(original_name), "Name is empty")
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in original_name)


def to_c_identifier(name: str) -> str:
    """``sanitize_name``, plus a leading ``_`` when the result would start with a digit."""
    out = sanitize_name(name)
    return "_" + out if out[0].isdigit() else out


def check_unique_c_names(names: Iterable[str], what: str = "name") -> dict[str, str]:
    """Map each name to its C identifier; two names with the same identifier raise TVMError."""
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for name in names:
        c = to_c_identifier(name)
        if c in seen and seen[c] != name:
            raise NameError_(f"Sanitized {what} name clash: {seen[c]!r} and {name!r} both "
                             f"become {c!r} in C")
        seen[c], out[name] = name, c
    return out


__all__ = ["check_unique_c_names", "combine_names", "prefix_generated_name", "prefix_name",
           "sanitize_name", "to_c_constant_style", "to_c_function_style", "to_c_identifier",
           "to_c_variable_style"]
