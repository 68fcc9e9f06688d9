"""Type inference: ``InferType()`` (a module pass), ``infer_type(expr)``, ``InferTypeLocal``.

Global functions are checked in groups of mutually recursive functions (strongly connected
components of the call graph), callees first. Inside a group every function has one type
(from its annotations, with unknowns where they are missing), so mutual recursion is checked
like a single function. When a group is solved, what is still unknown in a function's type
becomes a type parameter (``fn (%x) { %x }`` is ``fn[t0](t0) -> t0``), and later groups
instantiate it afresh at each use. A group whose op relations still wait for argument types
(``def @f(%x) { add(%x, 1f) }``) stays open and monomorphic until a caller fixes them.

Finally every node is copied with its type in ``checked_type_`` (what ``expr.checked_type``
reads), every Function with its FuncType: the input module is never edited. A node that has
that type already (a tensor type equal to it, or the very type object), on children that were
kept too, is kept instead of copied: a pass leaves most of what the last InferType typed as is. Errors are
``TypeInferenceError``s that name the op or function, the argument, the expected and actual
types, the source location when the node has a span, and show the IR around the failing node.

A module that InferType returned and that still holds the same function and type-definition
objects (passes start and end with InferType, so the next pass re-infers what the last one
just typed) is typed already: InferType then returns a copy of it without checking anything
again (nodes are immutable, so the same objects have the same types). Inside a module a pass
changed, a global function that a recent run checked alone (nothing open, so its type followed
from its own nodes and its callees' types), still the same object, whose callees have the same
types and whose module has the same type definitions, takes its type from that run unchecked.
"""
from __future__ import annotations

import collections
import threading
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.adt import Constructor
from ...ir.expr import Function, GlobalVar, RelayExpr
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.op import Op
from ...ir.types import FuncType, IncompleteType, TensorType, Type, TypeVar
from ...ir.visitor import global_vars, post_order, typed_copy, walk_children
from ._checker import ExprChecker
from ._diagnose import global_by_name
from ._unify import type_vars_in


class ModuleChecker(ExprChecker):
    """Checks the global functions of a module (or those an expression needs)."""

    def __init__(self, mod: IRModule) -> None:
        super().__init__(mod)
        self.funcs = {gv: f for gv, f in mod.functions.items() if isinstance(f, Function)}
        self.open: list[GlobalVar] = []  # checked, not generalised yet
        self.uses: dict[GlobalVar, list[Any]] = {}  # the globals each function names
        # Functions whose type depends on their callees' types only (checked alone, nothing
        # open): what those were. A run on a later module may reuse them (see _reusable).
        self.alone: dict[GlobalVar, _Callees] = {}

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
            self.uses[gv] = list(map(self._own, global_vars(self.funcs[gv])))
            deps = [d for d in self.uses[gv] if d in self.funcs]
            graph[gv] = deps
            todo.extend(deps)
        return graph

    def _own(self, gv: GlobalVar) -> Any:
        return gv if gv in self.funcs else global_by_name(self.mod, gv)

    def _check_group(self, group: list[GlobalVar]) -> None:
        alone = len(group) == 1 and not self.open  # its type will depend on callees only
        callees = self._callee_types(group[0]) if alone else None
        if callees is not None and self._reuse(group[0], callees):
            return
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
            if callees is not None:
                self.alone[group[0]] = callees

    def _callee_types(self, gv: GlobalVar) -> _Callees | None:
        """The types of the other globals ``gv``'s function names, checked already (callees
        come first); None if one is missing (the check reports it)."""
        out = []
        for d in dict.fromkeys(self.uses[gv]):
            if d is gv:
                continue  # its own recursive calls: its type follows from its own nodes
            if d is None or d not in self.global_types and d in self.funcs:
                return None
            ty = (self.uf.resolve(self.global_types[d]) if d in self.global_types
                  else getattr(self.mod.functions[d], "checked_type_", None))
            out.append((d.name_hint, ty))
        return tuple(out)

    def _reuse(self, gv: GlobalVar, callees: _Callees) -> bool:
        """Take the type of ``gv``'s function from the run that typed it, if that run found
        the same callee types and type definitions (the function object is the same, so its
        nodes are): checking it again would find the same types."""
        func = self.funcs[gv]
        if not _reusable(func, callees, self.mod):
            return False
        self.global_types[gv] = func.checked_type_  # type: ignore[assignment]
        self.poly_ok.add(gv)
        self.alone[gv] = callees
        return True

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

    def typed_module(self) -> IRModule:
        """A new module whose every node carries its solved type (the input is left as it
        was). Its GlobalVars are new typed ones; a GlobalVar of the input still finds its
        function in it by name."""
        gvars = {gv: GlobalVar(gv.name_hint, span=gv.span,
                               checked_type_=self.uf.resolve(self.global_types[gv]))
                 for gv in self.mod.functions if gv in self.global_types}
        typer = _Typer(self, gvars)
        funcs = {gvars.get(gv, gv): typer.copy(f, gv) if isinstance(f, Function) else f
                 for gv, f in self.mod.functions.items()}
        out = IRModule(funcs, self.mod.type_definitions, self.mod.attrs)
        checked = {id(f): (f, self.alone[gv]) for gv in self.alone
                   for f in (funcs[gvars[gv]],)}
        _remember(out, checked)
        return out

    def typed_expr(self, expr: RelayExpr) -> RelayExpr:
        """A typed copy of ``expr``; its GlobalVars are kept (they name ``self.mod``'s)."""
        return _Typer(self, None).copy(expr, None)


class _Typer:
    """Builds the typed copy of each node, children first (iteratively), sharing kept.

    Ops and constructors are kept: an op is one object per name and a constructor's type is
    fixed by its type definition. With ``gvars`` every GlobalVar becomes the module's new
    typed one (matched by name, as the checker matches them)."""

    def __init__(self, ck: ModuleChecker, gvars: dict[GlobalVar, GlobalVar] | None) -> None:
        self.ck, self.gvars = ck, gvars
        self.memo: dict[RelayExpr, RelayExpr] = {}
        self.resolved: dict[int, Type] = {}  # shared by every resolve: nothing is bound now

    def copy(self, expr: RelayExpr, gv: GlobalVar | None) -> RelayExpr:
        memo = self.memo
        for node in post_order(expr, skip=memo.__contains__, kids=walk_children):
            if node not in memo:
                memo[node] = self._copy_one(node)
        out = memo[expr]
        if gv is not None and gv in self.ck.global_types:  # its generalised type
            out = typed_copy(out, list(walk_children(out)), self.ck.global_types[gv])
        return out

    def _copy_one(self, node: RelayExpr) -> RelayExpr:
        if isinstance(node, (Op, Constructor)):
            return node
        if isinstance(node, GlobalVar):
            if self.gvars is None:
                return node
            own = self.ck.lookup_global(node)
            return self.gvars.get(own, node)
        ty = self.ck.types.get(node)
        ty = node.checked_type_ if ty is None else self.ck.uf.resolve(ty, self.resolved)
        old = walk_children(node)
        kids = [self.memo[c] for c in old]
        if _same_type(node.checked_type_, ty) and all(a is b for a, b in zip(kids, old)):
            return node  # typed so already (a previous run's copy): a copy would equal it
        return typed_copy(node, kids, ty)


def _same_type(a: Type | None, b: Type) -> bool:
    # Tensors are compared by value (a few dims); other types only by identity: a deep
    # tuple's type nests in each of its parents', so comparing every node's by value would
    # cost time quadratic in the depth (a resolve rebuilds those anyway, so they are copied).
    return a is b or (type(a) is TensorType and type(b) is TensorType and a == b)


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


# -- modules typed already --------------------------------------------------------------------
# The modules InferType returned last (weak: a module dies with its last user), what each held
# then, and, per function whose type depends on its callees only, the callee types it was
# checked with. A pipeline re-infers the module of the pass just before, so a few suffice, and
# a program that keeps many typed modules alive costs no more per run.
_Callees = tuple[tuple[str, Any], ...]  # (callee name, its type), in order of first use
_Checked = dict[int, tuple[Function, _Callees]]  # id(function) -> (function, callee types)
_RECENT: collections.deque[weakref.ref[IRModule]] = collections.deque(maxlen=8)
_HELD: weakref.WeakKeyDictionary[IRModule, tuple[tuple, tuple, _Checked]] = \
    weakref.WeakKeyDictionary()
_LOCK = threading.Lock()  # builds may run in several threads


def _contents(mod: IRModule) -> tuple[tuple, tuple]:
    return tuple(mod.functions.items()), tuple(mod.type_definitions.items())


def _same(a: tuple[tuple, tuple], b: tuple[tuple, tuple]) -> bool:
    return all(len(x) == len(y) and all(p[0] is q[0] and p[1] is q[1] for p, q in zip(x, y))
               for x, y in zip(a, b))


def _held() -> list[tuple[tuple, tuple, _Checked]]:
    with _LOCK:
        held = [_HELD.get(m) for m in (ref() for ref in _RECENT) if m is not None]
    return [h for h in held if h is not None]


def _records(mod: IRModule) -> _Checked | None:
    """The per-function records of a module InferType returned recently, is still alive, and
    whose very functions and type definitions ``mod`` holds (itself, or one a pass rebuilt
    without changing anything); None if there is none (``mod`` must be checked)."""
    now = _contents(mod)
    return next((h[2] for h in _held() if _same(h[:2], now)), None)


def _reusable(func: Function, callees: _Callees, mod: IRModule) -> bool:
    """Whether a recent run typed this very function object, alone, with these callee types
    (compared by ``==``; a callee reused itself keeps its type object) and ``mod``'s type
    definitions (the same objects: constructors are typed by them)."""
    defs = tuple(mod.type_definitions.items())
    for _, held_defs, checked in _held():
        seen = checked.get(id(func))
        if seen is not None and seen[0] is func and seen[1] == callees and \
                _same((held_defs,), (defs,)):
            return True
    return False


def _remember(mod: IRModule, checked: _Checked) -> IRModule:
    functions, type_defs = _contents(mod)
    with _LOCK:
        _HELD[mod] = (functions, type_defs, checked)
        _RECENT.append(weakref.ref(mod))
    return mod


# -- public API -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class InferType(ModulePass):
    """Infer the type of every expression of every function; returns a new IRModule.

    The new module's nodes are typed copies of the input's (``expr.checked_type``), or the
    input's own nodes where they have those types already, so the input keeps the types it
    had and a node shared by two modules is typed in each.
    Raises TypeInferenceError for an ill-typed program.
    """

    name: ClassVar[str] = "InferType"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        records = _records(mod)
        if records is not None:  # typed already
            return _remember(mod.copy(), records)
        ck = ModuleChecker(mod)
        ck.check_globals()
        ck.finish()
        return ck.typed_module()


register_pass("InferType", InferType)


def infer_type(expr: RelayExpr, mod: IRModule | None = None) -> RelayExpr:
    """A typed copy of ``expr`` (free variables take their annotated types), checked against
    ``mod``'s globals and type definitions; ``expr`` itself is left as it was. Free variables
    are copied too: bind the result's, not the input's."""
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"infer_type: expected a relay expression, got {type(expr).__name__}")
    ck = ModuleChecker(mod if mod is not None else IRModule())
    ck.check_globals(global_vars(expr))
    ck.check_function("the expression", expr, closed=False)
    ck.finish()
    return ck.typed_expr(expr)


def InferTypeLocal(expr: RelayExpr, mod: IRModule | None = None) -> Type:
    """The type of ``expr`` (see ``infer_type``)."""
    return infer_type(expr, mod).checked_type


__all__ = ["InferType", "InferTypeLocal", "infer_type"]
