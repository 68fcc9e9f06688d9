"""The base of the per-op attribute records: ``OpAttrs`` (normalising/validating helpers)
and the ``attrs_class`` decorator (frozen slotted dataclass + object registration)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ...runtime._compat import dataclass_transform

import numpy as np

from ...ir.attrs import Attrs
from ...runtime.dtype import DataType
from ...runtime.errors import OpAttributeInvalid
from ...runtime.object import register_object

_C = TypeVar("_C", bound=type)


@dataclass_transform(frozen_default=True)
def attrs_class(type_key: str) -> Callable[[_C], _C]:
    """Make ``cls`` a frozen slotted dataclass registered as ``relay.attrs.<type_key>``."""

    def wrap(cls: _C) -> _C:
        return register_object(f"relay.attrs.{type_key}")(dataclass(frozen=True, slots=True)(cls))

    return wrap


def _as_int(v: Any) -> int:
    v = getattr(v, "value", v)  # IntImm-likes
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError
    return int(v)


class OpAttrs(Attrs):
    """Base of the op attribute records: normalising and validating helpers."""

    __slots__ = ()
    _op: ClassVar[str] = "op"

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _invalid(self, name: str, expected: str) -> OpAttributeInvalid:
        value = getattr(self, name)
        return OpAttributeInvalid(f"{self._op}: attribute {name} must be {expected}, got {value!r}")

    def _int(self, name: str, optional: bool = False) -> None:
        value = getattr(self, name)
        if value is None and optional:
            return
        try:
            self._set(name, _as_int(value))
        except TypeError:
            raise self._invalid(name, "an int" + (" or None" if optional else "")) from None

    def _ints(self, name: str, length: Sequence[int] = (), optional: bool = False,
              scalar_ok: bool = True) -> None:
        """A tuple of ints (an int becomes a 1-tuple when ``scalar_ok``)."""
        value = getattr(self, name)
        if value is None and optional:
            return
        if scalar_ok and not isinstance(value, (list, tuple, np.ndarray)):
            value = (value,)
        try:
            out = tuple(_as_int(v) for v in value)
        except TypeError:
            raise self._invalid(name, "a tuple of ints") from None
        if length and len(out) not in length:
            lens = " or ".join(str(n) for n in length)
            raise self._invalid(name, f"a tuple of {lens} ints")
        self._set(name, out)

    def _positive(self, name: str, allow_zero: bool = False) -> None:
        value = getattr(self, name)
        vals = value if isinstance(value, tuple) else (value,)
        if any(v < 0 or (v == 0 and not allow_zero) for v in vals):
            raise self._invalid(name, "non-negative" if allow_zero else "positive")

    def _choice(self, name: str, choices: Sequence[str]) -> None:
        if getattr(self, name) not in choices:
            raise self._invalid(name, "one of " + ", ".join(repr(c) for c in choices))

    def _dtype(self, name: str, allow_empty: bool = False) -> None:
        value = getattr(self, name)
        if allow_empty and value in ("", None):
            self._set(name, "")
            return
        try:
            self._set(name, str(DataType(str(value) if not isinstance(value, str) else value)))
        except (ValueError, TypeError):
            raise self._invalid(name, "a dtype such as 'float32'") from None

    def _bool(self, *names: str) -> None:
        for name in names:
            self._set(name, bool(getattr(self, name)))
