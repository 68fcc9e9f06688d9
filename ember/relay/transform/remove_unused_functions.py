"""RemoveUnusedFunctions: drop the global functions that no entry function can reach.

A function is reachable when an entry function (``main`` by default) refers to its GlobalVar,
as a callee or as a value, directly or through other reachable functions. Type definitions
(and so constructors) are always kept. ``global_refs`` and ``call_graph`` are also what
``Inline`` reads.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ...ir.expr import GlobalVar
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.visitor import post_order
from .type_infer import strongly_connected

__all__ = ["RemoveUnusedFunctions", "call_graph", "global_refs", "is_recursive",
           "recursive_functions"]


def global_refs(mod: IRModule, name: str) -> list[str]:
    """Names of the globals of ``mod`` that the function ``name`` refers to, in order."""
    seen: dict[str, None] = {}
    for e in post_order(mod[name]):
        if isinstance(e, GlobalVar) and e.name_hint in mod and e.name_hint not in seen:
            seen[e.name_hint] = None
    return list(seen)


def call_graph(mod: IRModule) -> dict[str, list[str]]:
    """Function name -> the names of the global functions it refers to."""
    return {gv.name_hint: global_refs(mod, gv.name_hint) for gv in mod.functions}


def reachable(graph: dict[str, list[str]], entries: Sequence[str]) -> set[str]:
    """Names reachable from ``entries`` in ``graph`` (the entries included)."""
    seen: set[str] = set()
    stack = list(entries)
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(graph.get(name, ()))
    return seen


def is_recursive(graph: dict[str, list[str]], name: str) -> bool:
    """Whether ``name`` can reach itself through the functions it refers to."""
    return name in reachable(graph, graph.get(name, ()))


def recursive_functions(graph: dict[str, list[str]]) -> set[str]:
    """The names that can reach themselves, all at once: the functions in a strongly
    connected component of more than one, or calling themselves. O(functions + calls)
    (InferType's iterative Tarjan), where ``is_recursive`` per name is quadratic."""
    known = {name: [c for c in callees if c in graph] for name, callees in graph.items()}
    out: set[str] = set()
    for group in strongly_connected(known):
        if len(group) > 1 or group[0] in known[group[0]]:
            out.update(group)
    return out


@dataclass(frozen=True)
class RemoveUnusedFunctions(ModulePass):
    """Remove the global functions not reachable from ``entry_functions`` (default
    ``["main"]``). An entry that the module does not define is an error."""

    name: ClassVar[str] = "RemoveUnusedFunctions"
    opt_level: ClassVar[int] = 1
    entry_functions: Sequence[str] | None = field(default=None)

    def __post_init__(self) -> None:
        entries = self.entry_functions
        if isinstance(entries, str) or not all(isinstance(e, str) for e in entries or ()):
            raise TypeError(f"RemoveUnusedFunctions: entry_functions must be a list of "
                            f"function names, got {entries!r}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        entries = list(self.entry_functions) if self.entry_functions is not None else ["main"]
        names = sorted(gv.name_hint for gv in mod.functions)
        for entry in entries:
            if entry not in names:
                raise KeyError(f"RemoveUnusedFunctions: entry function {entry!r} is not in the "
                               f"module; it defines: {', '.join(names) or 'nothing'}")
        keep = reachable(call_graph(mod), entries)
        out = IRModule({}, mod.type_definitions, mod.attrs)
        for gv, func in mod.functions.items():
            if gv.name_hint in keep:
                out.add(gv, func)
        return out


register_pass("RemoveUnusedFunctions", RemoveUnusedFunctions)
