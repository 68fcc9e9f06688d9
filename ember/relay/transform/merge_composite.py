"""MergeComposite: group the matches of a compiler's patterns into composite functions.

``pattern_table`` is a list of ``(name, pattern)`` or ``(name, pattern, check)`` entries
(``relay.op.contrib.get_pattern_table(compiler)`` gives a registered one), names spelled
``"<compiler>.<what>"``. Patterns are tried in table order (put larger patterns first); each
match whose root passes ``check`` (a function of the matched root expression) becomes a call
of a function with the attributes ``Composite=<name>`` and ``PartitionedFromPattern`` (the
``dataflow_pattern.partition`` of the match). AnnotateTarget then offloads each composite
call to the compiler its name starts with, and PartitionGraph keeps the composite function
inside the partitioned one.

Relay-era call: ``relay.transform.MergeComposite(pattern_table)``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import Function
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext
from ..dataflow_pattern import DFPattern, partition
from .annotate_target import annotatable, with_body
from .type_infer import InferType

__all__ = ["MergeComposite"]

Entry = tuple[str, DFPattern, Callable[[Any], bool] | None]


def _check_table(table: Any) -> tuple[Entry, ...]:
    if not isinstance(table, Sequence) or isinstance(table, str):
        raise TypeError(f"MergeComposite: pattern_table must be a list of (name, pattern[, "
                        f"check]) tuples, got {type(table).__name__}")
    entries: list[Entry] = []
    for i, entry in enumerate(table):
        where = f"MergeComposite: pattern_table[{i}]"
        if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3):
            raise TypeError(f"{where} must be (name, pattern) or (name, pattern, check), got "
                            f"{entry!r}")
        name, pattern = entry[0], entry[1]
        check = entry[2] if len(entry) == 3 else None
        if not isinstance(name, str) or not name:
            raise TypeError(f"{where}: the name must be a non-empty string, got {name!r}")
        if not isinstance(pattern, DFPattern):
            raise TypeError(f"{where} ({name!r}): expected a dataflow pattern, got "
                            f"{type(pattern).__name__}")
        if check is not None and not callable(check):
            raise TypeError(f"{where} ({name!r}): check must be a function, got "
                            f"{type(check).__name__}")
        entries.append((name, pattern, check))
    return tuple(entries)


def merge_composite(func: Function, entry: Entry) -> Function:
    """``func`` with the matches of one table entry lifted into composite functions."""
    name, pattern, check = entry
    body = partition(pattern, func.body, {"Composite": name}, check)
    return func if body is func.body else with_body(func, body)


@dataclass(frozen=True)
class MergeComposite(ModulePass):
    """Turn each match of ``pattern_table`` into a composite function (see the module)."""

    name: ClassVar[str] = "MergeComposite"
    opt_level: ClassVar[int] = 0
    pattern_table: Any = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern_table", _check_table(self.pattern_table))

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # Typed before each pattern: patterns and checks may read types (has_type, shapes).
        for entry in self.pattern_table:
            mod = InferType()(mod)
            out = mod.copy()
            for gv, func in mod.functions.items():
                if annotatable(func):
                    out.add(gv, merge_composite(func, entry))
            mod = out
        return InferType()(mod)
