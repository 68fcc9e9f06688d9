"""The object system: a base class with a ``type_key``, a registry, and field reflection.

Objects are plain Python objects (IR nodes are frozen slotted dataclasses deriving from
``Object``). ``register_object`` maps a ``type_key`` to its class so that generic code
(JSON save/load, the FFI, printers) can find it again by name.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

_T = TypeVar("_T", bound=type)
OBJECT_TYPES: dict[str, type] = {}


class Object:
    """Base of every registered object. Subclasses set ``type_key`` via ``register_object``."""

    __slots__ = ()
    type_key: str = "runtime.Object"

    def field_names(self) -> list[str]:
        """Names of the reflected fields, in declaration order."""
        if dataclasses.is_dataclass(self):
            return [f.name for f in dataclasses.fields(self)]
        names: list[str] = []
        for klass in type(self).__mro__:
            for name in getattr(klass, "__slots__", ()):
                if not name.startswith("_") and name not in names:
                    names.append(name)
        return names

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.field_names()))

    def same_as(self, other: object) -> bool:
        """Reference equality (the same node), as opposed to structural equality."""
        return self is other


def register_object(type_key: str | type | None = None) -> Callable[[_T], _T] | Any:
    """Register a class under ``type_key`` (default: its qualified name). Usable bare or called."""

    def register(cls: _T) -> _T:
        key = type_key if isinstance(type_key, str) else f"{cls.__module__}.{cls.__qualname__}"
        existing = OBJECT_TYPES.get(key)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"register_object: type_key {key!r} is already taken by {existing}")
        cls.type_key = key
        OBJECT_TYPES[key] = cls
        return cls

    if isinstance(type_key, type):
        return register(type_key)
    return register


def get_object_type(type_key: str) -> type:
    """The class registered under ``type_key``; KeyError names the close matches."""
    try:
        return OBJECT_TYPES[type_key]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(type_key, OBJECT_TYPES, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"no object type registered as {type_key!r}{hint}") from None
