"""Runtime containers: String, Array, Map, ShapeTuple and ADT, all immutable Objects.

They behave like the Python values they stand for (``String`` is a ``str``, ``ShapeTuple`` a
``tuple``, ``Array`` compares equal to lists and tuples, ``Map`` to dicts) so user code can
mix them freely; being registered Objects they also cross the FFI and round-trip through
JSON (``ember.runtime.save_json``) and pickle.
"""
from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from .object import Object, register_object


def _immutable(self: Any, name: str, value: Any) -> None:
    raise AttributeError(f"{type(self).__name__} is immutable (cannot set {name!r})")


@register_object("runtime.String")
class String(str, Object):
    """A ``str`` that is also an Object (what the FFI returns for runtime strings)."""

    __slots__ = ()

    def _json_state(self) -> dict[str, Any]:
        return {"value": str(self)}

    @classmethod
    def _from_json_state(cls, state: dict[str, Any]) -> "String":
        return cls(state["value"])


@register_object("runtime.Array")
class Array(Object, Sequence[Any]):
    """An immutable sequence. Equal to a list or tuple with equal items; slicing gives an Array."""

    __slots__ = ("_items",)
    _items: tuple[Any, ...]

    def __init__(self, items: Iterable[Any] = ()) -> None:
        object.__setattr__(self, "_items", tuple(items))

    __setattr__ = _immutable

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> "Array": ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return Array(self._items[index])
        try:
            return self._items[index]
        except IndexError:
            raise IndexError(f"Array index {index} out of range for length {len(self)}") from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Array, list, tuple)):
            return self._items == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"[{', '.join(repr(x) for x in self._items)}]"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Array, (self._items,))

    def _json_state(self) -> dict[str, Any]:
        return {"items": self._items}

    @classmethod
    def _from_json_state(cls, state: dict[str, Any]) -> "Array":
        return cls(state["items"])


@register_object("runtime.Map")
class Map(Object, Mapping[Any, Any]):
    """An immutable mapping whose keys are ``str`` or Objects. Equal to a dict with equal items."""

    __slots__ = ("_dict",)
    _dict: dict[Any, Any]

    def __init__(self, mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]] | None = None,
                 **kwargs: Any) -> None:
        d = dict(mapping or {}, **kwargs)
        for key in d:
            if not isinstance(key, (str, Object)):
                raise TypeError(f"Map keys must be str or Objects, got "
                                f"{type(key).__name__} {key!r}")
        object.__setattr__(self, "_dict", d)

    __setattr__ = _immutable

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._dict[key]
        except KeyError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __contains__(self, key: object) -> bool:
        return key in self._dict

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self._dict.items()) + "}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Map, (self._dict,))

    def _json_state(self) -> dict[str, Any]:
        return {"keys": tuple(self._dict), "values": tuple(self._dict.values())}

    @classmethod
    def _from_json_state(cls, state: dict[str, Any]) -> "Map":
        keys, values = state["keys"], state["values"]
        if len(keys) != len(values):
            raise ValueError(f"Map: {len(keys)} keys but {len(values)} values")
        return cls(zip(keys, values, strict=True))


@register_object("runtime.ShapeTuple")
class ShapeTuple(tuple[int, ...], Object):
    """A tuple of ints (a tensor shape) that is an Object. Equal to lists/tuples of equal ints."""

    __slots__ = ()

    def __new__(cls, shape: Iterable[Any] = ()) -> "ShapeTuple":
        dims = []
        for dim in shape:
            try:
                dims.append(operator.index(dim))
            except TypeError:
                raise TypeError(f"ShapeTuple: dimensions must be ints, got "
                                f"{type(dim).__name__} {dim!r} in {shape!r}") from None
        return super().__new__(cls, dims)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"ShapeTuple({tuple(self)!r})"

    def __str__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (ShapeTuple, (tuple(self),))

    def _json_state(self) -> dict[str, Any]:
        return {"shape": tuple(self)}

    @classmethod
    def _from_json_state(cls, state: dict[str, Any]) -> "ShapeTuple":
        return cls(state["shape"])


@register_object("runtime.ADT")
class ADT(Object):
    """An algebraic data value of the VM: a constructor ``tag`` and its ``fields``.

    Tuples are ADTs with tag 0 (see ``tuple_object``). Supports ``len``, indexing and
    iteration over the fields; compared by identity, like other runtime objects.
    """

    __slots__ = ("tag", "fields")
    tag: int
    fields: tuple[Any, ...]

    def __init__(self, tag: int, fields: Iterable[Any] = ()) -> None:
        tag = operator.index(tag)
        if tag < 0:
            raise ValueError(f"ADT: tag must be non-negative, got {tag}")
        object.__setattr__(self, "tag", tag)
        object.__setattr__(self, "fields", tuple(fields))

    __setattr__ = _immutable

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, index: int | slice) -> Any:
        try:
            return self.fields[index]
        except IndexError:
            raise IndexError(f"ADT field {index} out of range: tag {self.tag} has "
                             f"{len(self.fields)} fields") from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fields)

    def __repr__(self) -> str:
        return f"ADT(tag={self.tag}, fields={list(self.fields)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ADT, (self.tag, self.fields))


def tuple_object(fields: Iterable[Any] | None = None) -> ADT:
    """A tuple value of the VM: an ADT with tag 0."""
    return ADT(0, fields or ())


def as_object(value: Any) -> Object:
    """``value`` as an Object: Objects as they are, list/tuple -> Array, dict -> Map,
    str -> String."""
    if isinstance(value, Object):
        return value
    if isinstance(value, (list, tuple)):
        return Array(value)
    if isinstance(value, dict):
        return Map(value)
    if isinstance(value, str):
        return String(value)
    raise TypeError(f"cannot convert {type(value).__name__} to an ember Object")
