"""TupleWrapper: what multi-output ops (split, batch_norm, ...) return in the Python API."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...ir.expr import RelayExpr, TupleGetItem


class TupleWrapper:
    """A tuple-valued expression of known arity.

    ``wrapper[i]`` is ``TupleGetItem(expr, i)``, ``len(wrapper)`` the arity, ``astuple()`` the
    expression itself (e.g. to return the whole tuple from a function).
    """

    __slots__ = ("size", "tuple_value")

    def __init__(self, tuple_value: RelayExpr, size: int) -> None:
        self.tuple_value = tuple_value
        self.size = size

    def astuple(self) -> RelayExpr:
        """The wrapped tuple-valued expression."""
        return self.tuple_value

    def astext(self) -> str:
        return self.tuple_value.astext()

    def __getitem__(self, index: int) -> TupleGetItem:
        if not isinstance(index, int):
            raise TypeError(f"TupleWrapper index must be an int, got {index!r}")
        if not -self.size <= index < self.size:
            raise IndexError(f"TupleWrapper index {index} out of range for {self.size} fields")
        return TupleGetItem(self.tuple_value, index % self.size)

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[TupleGetItem]:
        return (self[i] for i in range(self.size))

    def __repr__(self) -> str:
        return f"TupleWrapper({self.tuple_value!r}, {self.size})"

    def __getattr__(self, name: str) -> Any:
        # Behave like the wrapped expression otherwise (span, checked_type, ...).
        if name in TupleWrapper.__slots__:
            raise AttributeError(name)
        return getattr(self.tuple_value, name)
