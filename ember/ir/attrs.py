"""Attributes: typed per-op records (``Attrs`` subclasses) and ``DictAttrs`` for functions."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Iterator, cast

from ..runtime.object import register_object
from .base import Node


class Attrs(Node):
    """Base of per-op attribute records: frozen dataclasses with typed, defaulted fields.

    Compared by value. ``attrs.keys()`` / ``attrs["padding"]`` / ``attrs.padding`` all work.
    """

    __slots__ = ()

    def keys(self) -> list[str]:
        return attr_names(self)

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(f"{type(self).__name__} has no attribute {key!r}; it has {self.keys()}")
        return getattr(self, key)

    def get_int_tuple(self, key: str) -> tuple[int, ...]:
        return tuple(int(v) for v in self[key])

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def non_default_items(self) -> list[tuple[str, Any]]:
        """The fields whose value differs from the declared default (for printing)."""
        out = []
        for f in dataclasses.fields(cast(Any, self)):
            v = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
                continue
            out.append((f.name, v))
        return out


def attr_names(attrs: Attrs | type[Attrs]) -> list[str]:
    """The field names of an attrs record or of its class, in declaration order (every
    Attrs subclass is a dataclass)."""
    return [f.name for f in dataclasses.fields(cast(Any, attrs))]


@register_object("DictAttrs")
class DictAttrs(Node, Mapping[str, Any]):
    """An immutable str-keyed mapping (function attributes such as ``Primitive=1``)."""

    __slots__ = ("_d",)

    def __init__(self, d: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "_d", dict(d or {}))

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("DictAttrs is immutable; use with_attr")

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "_d")[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._d) == dict(other)

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._d.items())))

    def __repr__(self) -> str:
        return f"DictAttrs({self._d!r})"

    def with_attr(self, key: str, value: Any) -> "DictAttrs":
        return DictAttrs({**self._d, key: value})

    def field_names(self) -> list[str]:
        return ["_d"]

    def __getstate__(self) -> dict[str, Any]:
        return {"_d": self._d}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "_d", dict(state["_d"]))


def make_attrs(attrs: Mapping[str, Any] | DictAttrs | None) -> DictAttrs | None:
    if attrs is None:
        return None
    return attrs if isinstance(attrs, DictAttrs) else DictAttrs(attrs)
