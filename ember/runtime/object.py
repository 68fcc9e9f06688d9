"""The object system: a base class with a ``type_key``, a registry, and field reflection.

Objects are plain Python objects (IR nodes are frozen slotted dataclasses deriving from
``Object``). ``register_object`` maps a ``type_key`` to its class so that generic code
(JSON save/load, the FFI, printers) can find it again by name.

Put ``@register_object`` *above* ``@dataclass(slots=True)``: a slotted dataclass is a new
class, and the registry must hold the class that instances actually have.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

_T = TypeVar("_T", bound=type)
OBJECT_TYPES: dict[str, type] = {}
_DEFAULT_GETSTATE = getattr(object, "__getstate__", None)  # Python >= 3.11


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__weakref__", "__dict__") and name not in names:
                names.append(name)
    return names


class Object:
    """Base of every registered object. Subclasses set ``type_key`` via ``register_object``.

    Reflection: ``field_names()`` lists the fields (dataclass fields, else public slots and
    instance attributes), ``dir(obj)`` includes them, and ``getattr`` reads them.
    Serialization (JSON, see ``ember.runtime.serialization``) goes through ``_json_state`` and
    ``_from_json_state``, which subclasses override when the defaults do not fit.
    """

    __slots__ = ()
    type_key: str = "runtime.Object"

    def field_names(self) -> list[str]:
        """Names of the reflected fields, in declaration order."""
        if dataclasses.is_dataclass(self):
            return [f.name for f in dataclasses.fields(self)]
        names = [n for n in _slot_names(type(self)) if not n.startswith("_")]
        names += [n for n in getattr(self, "__dict__", {}) if not n.startswith("_")
                  and n not in names]
        return names

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.field_names()))

    def same_as(self, other: object) -> bool:
        """Reference equality (the same node), as opposed to structural equality."""
        return self is other

    # -- serialization hooks -----------------------------------------------------------------
    def _json_state(self) -> dict[str, Any]:
        """The state to save: dataclass fields; else ``__getstate__`` if the class defines one
        returning a dict; else every set slot and instance attribute (private ones included,
        since they are part of the object's value)."""
        if dataclasses.is_dataclass(self):
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if getattr(type(self), "__getstate__", None) not in (None, _DEFAULT_GETSTATE):
            state = self.__getstate__()
            if not isinstance(state, dict):
                raise TypeError(f"{self.type_key}: __getstate__ must return a dict for JSON, "
                                f"got {type(state).__name__}")
            return state
        state = {n: getattr(self, n) for n in _slot_names(type(self)) if hasattr(self, n)}
        state.update(getattr(self, "__dict__", {}))
        return state

    @classmethod
    def _from_json_state(cls, state: dict[str, Any]) -> Any:
        """Rebuild an object from ``_json_state`` output without calling ``__init__`` (like
        pickle): dataclass fields missing from ``state`` take their defaults, unknown names
        raise ValueError."""
        obj = object.__new__(cls)
        if dataclasses.is_dataclass(cls):
            fields = {f.name: f for f in dataclasses.fields(cls)}
            unknown = sorted(set(state) - set(fields))
            if unknown:
                raise ValueError(f"{cls.type_key} has no field(s) {', '.join(unknown)}; "
                                 f"its fields are {', '.join(fields)}")
            for name, f in fields.items():
                if name in state:
                    value = state[name]
                elif f.default is not dataclasses.MISSING:
                    value = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    value = f.default_factory()
                else:
                    raise ValueError(f"{cls.type_key}: field {name!r} is missing and has "
                                     "no default")
                object.__setattr__(obj, name, value)
            return obj
        setstate = getattr(cls, "__setstate__", None)
        if setstate is not None:
            setstate(obj, state)
            return obj
        for name, value in state.items():
            object.__setattr__(obj, name, value)
        return obj


def register_object(type_key: str | type | None = None) -> Callable[[_T], _T] | Any:
    """Register a class under ``type_key`` (default: its qualified name). Usable bare or called.

    ``@register_object("relay.Var")`` or ``@register_object``. The class must derive from
    Object. Re-registering a key with a different class raises ValueError (re-registering the
    same qualified name, as a module reload does, replaces it).
    """

    def register(cls: _T) -> _T:
        if not (isinstance(cls, type) and issubclass(cls, Object)):
            raise TypeError(f"register_object: {cls!r} must be a class deriving from ember Object")
        key = type_key if isinstance(type_key, str) else f"{cls.__module__}.{cls.__qualname__}"
        if not key:
            raise ValueError("register_object: type_key must be a non-empty string")
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


def is_registered(obj: object) -> bool:
    """Whether ``obj``'s own class is the one registered under its ``type_key`` (an
    unregistered subclass inherits its parent's key, and must not be saved under it)."""
    return isinstance(obj, Object) and OBJECT_TYPES.get(type(obj).type_key) is type(obj)
