"""The shared base of ``Executor`` and ``Runtime``: a registered name plus typed options.

Error messages follow TVM's word for word, because user tests match them:
``Executor "woof" is not defined``, ``Attribute "woof" is not available on this Executor``,
``Attribute "interface-api" should have type "runtime.String" but instead found "IntImm"``.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...runtime.errors import TVMError

# TVM's type keys for option values: a bool is an IntImm as much as an int is.
STRING, INT = "runtime.String", "IntImm"


@dataclass(frozen=True)
class Option:
    """One option: its TVM type key, default (None: absent unless set), allowed words."""

    type_key: str
    default: Any = None
    choices: tuple[str, ...] = ()
    is_bool: bool = False


def _type_key_of(value: Any) -> str:
    if isinstance(value, str):
        return STRING
    if isinstance(value, (bool, int)):
        return INT
    if isinstance(value, float):
        return "FloatImm"
    if isinstance(value, Mapping):
        return "Map"
    if isinstance(value, (list, tuple)):
        return "Array"
    return type(value).__name__


class RegisteredOptions:
    """A name from a registry plus options checked against that name's table."""

    what: ClassVar[str]  # "Executor" or "Runtime"
    registry: ClassVar[dict[str, dict[str, Option]]]

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        table = self._table(name)
        self.name = str(name)
        attrs: dict[str, Any] = {k: o.default for k, o in table.items() if o.default is not None}
        for key, value in (options or {}).items():
            attrs[key] = self._check(key, value, table)
        self.attrs: dict[str, Any] = attrs

    @classmethod
    def _table(cls, name: Any) -> dict[str, Option]:
        table = cls.registry.get(str(name))
        if table is None:
            raise TVMError(f'{cls.what} "{name}" is not defined; registered: '
                           f'{", ".join(cls.registry)}')
        return table

    def _check(self, key: str, value: Any, table: dict[str, Option]) -> Any:
        option = table.get(key)
        if option is None:
            raise TVMError(f'Attribute "{key}" is not available on this {self.what}; '
                           f'{self.what} "{self.name}" accepts: '
                           f'{", ".join(sorted(table)) or "no options"}')
        found = _type_key_of(value)
        if found != option.type_key:
            raise TVMError(f'Attribute "{key}" should have type "{option.type_key}" but '
                           f'instead found "{found}"')
        if option.choices and value not in option.choices:
            allowed = " or ".join(f'"{c}"' for c in option.choices)
            raise TVMError(f'Attribute "{key}" must be {allowed}, got "{value}"')
        return bool(value) if option.is_bool else value

    @classmethod
    def list_registered(cls) -> list[str]:
        """The registered names."""
        return list(cls.registry)

    @classmethod
    def list_registered_options(cls, name: str | RegisteredOptions) -> dict[str, str]:
        """``{option name: TVM type key}`` for ``name`` (a name or an instance)."""
        table = cls._table(name.name if isinstance(name, RegisteredOptions) else name)
        return {k: o.type_key for k, o in table.items()}

    # -- mapping-like access ------------------------------------------------------------------
    def __contains__(self, key: object) -> bool:
        return key in self.attrs

    def __getitem__(self, key: str) -> Any:
        try:
            return self.attrs[key]
        except KeyError:
            raise KeyError(f'{self.what} "{self.name}" has no attribute "{key}" set') from None

    def get(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.attrs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RegisteredOptions):
            return NotImplemented
        return (type(self) is type(other) and self.name == other.name
                and self.attrs == other.attrs)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name, tuple(sorted(self.attrs.items()))))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        opts = f", {self.attrs!r}" if self.attrs else ""
        return f"{self.what}({self.name!r}{opts})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, dict(self.attrs)))
