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
    connected component of more than one, or calling themselves. Tarjan's algorithm with an
    explicit stack, O(functions + calls), where ``is_recursive`` per name is quadratic."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    component: list[str] = []  # Tarjan's stack of names not yet assigned a component
    open_names: set[str] = set()
    out: set[str] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        component.append(root)
        open_names.add(root)
        while work:
            name, callees = work[-1]
            for callee in callees:
                if callee not in index:
                    index[callee] = low[callee] = len(index)
                    component.append(callee)
                    open_names.add(callee)
                    work.append((callee, iter(graph.get(callee, ()))))
                    break
                if callee in open_names:
                    low[name] = min(low[name], index[callee])
            else:  # every callee seen: close ``name``
                work.pop()
                if work:
                    caller = work[-1][0]
                    low[caller] = min(low[caller], low[name])
                if low[name] == index[name]:
                    members = _pop_component(component, open_names, name)
                    if len(members) > 1 or name in graph.get(name, ()):
                        out.update(members)
    return out


def _pop_component(component: list[str], open_names: set[str], head: str) -> list[str]:
    members: list[str] = []
    while not members or members[-1] != head:
        members.append(component.pop())
        open_names.discard(members[-1])
    return members


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
