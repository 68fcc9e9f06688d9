"""Type inference: ``InferType()`` (a module pass), ``infer_type(expr)``, ``InferTypeLocal``.

Global functions are checked in groups of mutually recursive functions (strongly connected
components of the call graph), callees first. Inside a group every function has one type
(from its annotations, with unknowns where they are missing), so mutual recursion is checked
like a single function. When a group is solved, what is still unknown in a function's type
becomes a type parameter (``fn (%x) { %x }`` is ``fn[t0](t0) -> t0``), and later groups
instantiate it afresh at each use. A group whose op relations still wait for argument types
(``def @f(%x) { add(%x, 1f) }``) stays open and monomorphic until a caller fixes them.

Finally every expression gets its type in ``checked_type_`` (the cache ``expr.checked_type``
reads), every Function its FuncType. Errors are ``TypeInferenceError``s that name the op or
function, the argument, the expected and actual types, the source location when the node
has a span, and show the IR around the failing node.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import Function, GlobalVar, RelayExpr
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import FuncType, IncompleteType, Type, TypeVar
from ...ir.visitor import global_vars
from ._checker import ExprChecker
from ._diagnose import global_by_name
from ._unify import type_vars_in


class ModuleChecker(ExprChecker):
    """Checks the global functions of a module (or those an expression needs)."""

    def __init__(self, mod: IRModule) -> None:
        super().__init__(mod)
        self.funcs = {gv: f for gv, f in mod.functions.items() if isinstance(f, Function)}
        self.open: list[GlobalVar] = []  # checked, not generalised yet

    def check_globals(self, roots: list[GlobalVar] | None = None) -> None:
        """Check every Relay function of the module, or those reachable from ``roots``."""
        graph = self._call_graph(roots)
        order = {gv: i for i, gv in enumerate(self.funcs)}
        for group in strongly_connected(graph):
            self._check_group(sorted(group, key=order.__getitem__))

    def _call_graph(self, roots: list[GlobalVar] | None) -> dict[GlobalVar, list[GlobalVar]]:
        todo = list(self.funcs) if roots is None else [self._own(g) for g in roots]
        graph: dict[GlobalVar, list[GlobalVar]] = {}
        while todo:
            gv = todo.pop()
            if gv is None or gv in graph or gv not in self.funcs:
                continue
            deps = [d for d in map(self._own, global_vars(self.funcs[gv])) if d in self.funcs]
            graph[gv] = deps
            todo.extend(deps)
        return graph

    def _own(self, gv: GlobalVar) -> Any:
        return gv if gv in self.funcs else global_by_name(self.mod, gv)

    def _check_group(self, group: list[GlobalVar]) -> None:
        for gv in group:
            func = self.funcs[gv]
            self.global_types[gv] = self.skeleton(func)
            ann = func.func_type_annotation
            if ann is not None and not type_vars_in(ann, [], IncompleteType):
                self.poly_ok.add(gv)  # fully annotated: uses may instantiate it
        for gv in group:
            self.check_function("@" + gv.name_hint, self.funcs[gv], closed=True)
        self.open.extend(group)
        self.solve()
        if all(c.last is not None for c in self.deferred):
            self.generalize()

    def check_function(self, name: str, func: RelayExpr, closed: bool) -> Type:
        """Type one function (or expression) called ``name`` in messages (``@main``); with
        ``closed``, free variables are errors."""
        self.owner = (name, func)
        self.bound, self.used = set(), {}
        ty = self.check_expr(func)
        if closed:
            free = [v for v in self.used if v not in self.bound]
            if free:
                raise self.fail(free[0], f"free variable %{free[0].name_hint} in {name}")
        return ty

    def finish(self) -> None:
        """Solve what is left, report constraints that never ran, generalise."""
        self.solve()
        for c in self.deferred:
            if c.last is None:
                raise c.unresolved(self)
        self.generalize()

    def generalize(self) -> None:
        """Turn the unknowns left in the open functions' types into type parameters."""
        types = {gv: self.uf.resolve(self.global_types[gv]) for gv in self.open}
        unknowns: list[Type] = []
        for ty in types.values():
            type_vars_in(ty, unknowns, IncompleteType)
        fresh = [TypeVar(f"t{i}") for i in range(len(unknowns))]
        for u, tv in zip(unknowns, fresh):
            self.uf.bind(u, tv)  # type: ignore[arg-type]
        for gv, ty in types.items():
            fty: FuncType = self.uf.resolve(ty)  # type: ignore[assignment]
            used = type_vars_in(fty, [], TypeVar)
            own = tuple(v for v in fresh if any(v is u for u in used))
            self.global_types[gv] = FuncType(fty.arg_types, fty.ret_type,
                                             (*fty.type_params, *own))
            self.poly_ok.add(gv)
        self.open.clear()
        self.deferred.clear()

    def annotate(self) -> None:
        """Write the solved types into the ``checked_type_`` cache of every node."""
        resolve = self.uf.resolve
        for node, ty in self.types.items():
            object.__setattr__(node, "checked_type_", resolve(ty))
        for gv, ty in self.global_types.items():
            object.__setattr__(gv, "checked_type_", ty)
            if gv in self.funcs:
                object.__setattr__(self.funcs[gv], "checked_type_", ty)
        for c in self.ctors:
            object.__setattr__(c, "checked_type_", self.ctor_type(c))


def strongly_connected(graph: dict[Any, list[Any]]) -> list[list[Any]]:
    """Tarjan's algorithm, iterative; components come out callees first."""
    index: dict[Any, int] = {}
    low: dict[Any, int] = {}
    stack: list[Any] = []
    on_stack: set[Any] = set()
    out: list[list[Any]] = []

    def enter(v: Any) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)

    for start in graph:
        if start in index:
            continue
        enter(start)
        work = [(start, iter(graph[start]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    enter(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        group.append(w)
                        if w is v:
                            break
                    out.append(group)
    return out


# -- public API -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class InferType(ModulePass):
    """Infer the type of every expression of every function; returns a new IRModule.

    The functions are the same objects, now carrying their types (``expr.checked_type``).
    Raises TypeInferenceError for an ill-typed program.
    """

    name: ClassVar[str] = "InferType"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        ck = ModuleChecker(mod)
        ck.check_globals()
        ck.finish()
        ck.annotate()
        return mod.copy()


register_pass("InferType", InferType)


def infer_type(expr: RelayExpr, mod: IRModule | None = None) -> RelayExpr:
    """Type ``expr`` (free variables take their annotated types) against ``mod``'s globals and
    type definitions; returns ``expr`` itself, now carrying its types."""
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"infer_type: expected a relay expression, got {type(expr).__name__}")
    ck = ModuleChecker(mod if mod is not None else IRModule())
    ck.check_globals(global_vars(expr))
    ck.check_function("the expression", expr, closed=False)
    ck.finish()
    ck.annotate()
    return expr


def InferTypeLocal(expr: RelayExpr, mod: IRModule | None = None) -> Type:
    """The type of ``expr`` (see ``infer_type``)."""
    return infer_type(expr, mod).checked_type


__all__ = ["InferType", "InferTypeLocal", "infer_type"]
