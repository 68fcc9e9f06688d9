"""Inline: paste the global functions marked ``Inline=1`` into their callers.

A global function is inlined when it is marked ``Inline`` (a function attribute, written
``def @f(%x: T, Inline=1) { ... }`` in text), is not recursive (directly or mutually), and
every global function it calls is inlinable too (callees are inlined first, so a chain of
inline functions collapses into its first non-inline caller). At a call ``@f(a, b)`` the
call becomes a fresh copy of ``@f``'s body with its parameters replaced by the arguments
(shared, not copied; as in TVM this assumes arguments without effects); ``@f`` used as a
value (passed, stored) becomes a copy of the function literal. Functions for an external
compiler (``Compiler`` attribute) are pasted as literals and called, since their body must
stay one unit. Afterwards an inlined function that nothing refers to any more is removed,
unless nothing referred to it before either (an entry point such as ``main``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir.expr import Call, Function, GlobalVar, RelayExpr
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.visitor import ExprMutator
from ...runtime.errors import TVMError
from ._fresh import fresh_copy
from .remove_unused_functions import call_graph, recursive_functions

__all__ = ["Inline"]


def _marked(name: str, func: object) -> bool:
    if not isinstance(func, Function):
        return False
    value = func.get_attr("Inline", 0) or 0
    try:
        return bool(int(value))
    except (TypeError, ValueError):
        raise TVMError(f"Inline: @{name} has attribute Inline={value!r}; expected 0 or "
                       "1") from None


def _inlinable(mod: IRModule, graph: dict[str, list[str]]) -> set[str]:
    """The functions that may be inlined: marked, not recursive, and calling only inlinable
    functions (decided callees first)."""
    ok: dict[str, bool] = {}
    recursive = recursive_functions(graph)  # once: per name it would be quadratic
    for name in _callees_first(graph):
        ok[name] = (_marked(name, mod[name]) and name not in recursive
                    and all(ok.get(c, False) for c in graph[name]))
    return {n for n, yes in ok.items() if yes}


def _callees_first(graph: dict[str, list[str]]) -> list[str]:
    """Function names, each after the functions it calls (cycles broken anywhere)."""
    order: list[str] = []
    entered: set[str] = set()
    for root in graph:
        stack: list[tuple[str, bool]] = [(root, False)]
        while stack:
            name, ready = stack.pop()
            if ready:
                order.append(name)
                continue
            if name in entered:
                continue
            entered.add(name)
            stack.append((name, True))
            stack.extend((c, False) for c in graph[name] if c not in entered)
    return order


class _Inliner(ExprMutator):
    def __init__(self, mod: IRModule, inline: set[str]) -> None:
        super().__init__()
        self.mod, self.inline = mod, inline

    def _target(self, e: RelayExpr) -> Function | None:
        if isinstance(e, GlobalVar) and e.name_hint in self.inline:
            return self.mod[e.name_hint]  # type: ignore[no-any-return]
        return None

    def visit_call(self, call: Call) -> RelayExpr:
        func = self._target(call.op)
        args = [self.visit(a) for a in call.args]
        if func is None or func.get_attr("Compiler"):
            return super().visit_call(call)
        if len(func.params) != len(args):
            name = call.op.name_hint  # type: ignore[union-attr]
            raise TypeError(f"Inline: @{name} takes {len(func.params)} argument(s) but is "
                            f"called with {len(args)}")
        return fresh_copy(func.body, dict(zip(func.params, args)))

    def visit_global_var(self, gv: GlobalVar) -> RelayExpr:
        func = self._target(gv)
        return gv if func is None else fresh_copy(func)


@dataclass(frozen=True)
class Inline(ModulePass):
    """Inline the global functions marked ``Inline=1`` (see the module docstring)."""

    name: ClassVar[str] = "Inline"
    opt_level: ClassVar[int] = 1

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        graph = call_graph(mod)
        inline = _inlinable(mod, graph)
        if not inline:
            return mod
        referenced = {c for callees in graph.values() for c in callees}
        out = mod.copy()
        for name in _callees_first(graph):
            func = out[name]
            if isinstance(func, Function) and any(c in inline for c in graph[name]):
                new = _Inliner(out, inline).visit(func)
                out.add(name, new)
        still = {c for callees in call_graph(out).values() for c in callees}
        for name in inline:
            if name in referenced and name not in still:
                out.remove(name)
        return out


register_pass("Inline", Inline)
