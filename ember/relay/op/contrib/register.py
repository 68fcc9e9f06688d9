"""The pattern tables of external compilers, by compiler name."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

PatternTable = list[tuple[Any, ...]]
_TABLES: dict[str, Callable[[], PatternTable]] = {}


def register_pattern_table(compiler: str, table: Callable[[], PatternTable] | None = None
                           ) -> Any:
    """Register ``table`` (a function returning ``[(name, pattern[, check]), ...]``) as the
    pattern table of ``compiler``; without ``table``, a decorator. Registering twice replaces
    the earlier table (as in TVM)."""
    if not isinstance(compiler, str) or not compiler.isidentifier():
        raise TypeError(f"register_pattern_table: compiler must be a name such as 'dnnl', "
                        f"got {compiler!r}")

    def put(fn: Callable[[], PatternTable]) -> Callable[[], PatternTable]:
        if not callable(fn):
            raise TypeError(f"register_pattern_table({compiler!r}): the table must be a "
                            f"function returning the patterns, got {type(fn).__name__}")
        _TABLES[compiler] = fn
        return fn

    return put if table is None else put(table)


def get_pattern_table(compiler: str) -> PatternTable | None:
    """The pattern table registered for ``compiler`` (None when there is none)."""
    fn = _TABLES.get(compiler)
    return None if fn is None else list(fn())


def has_pattern_table(compiler: str) -> bool:
    return compiler in _TABLES
