"""``tir.transform``: passes over lowered PrimFuncs, and ``prim_func_pass`` to write one.

A tir pass takes what ``ember.lower`` returns, an IRModule, and returns a new one whose
PrimFuncs it transformed (Relay functions pass through); it also takes a bare PrimFunc (or a
dict/list of them) and returns the same kind. ``ember.lower`` runs the passes listed in
``PassContext(config={"tir.add_lower_pass": [(phase, pass), ...]})`` on its result.
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.module import IRModule
from ..ir.transform import Pass, PassContext, PassInfo
from ..runtime.errors import TVMError
from .expr import Call, IntImm
from .functor import children, transform
from .simplify import simplify
from .stmt import (
    Allocate,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

_PRAGMA_UNROLL = "pragma_auto_unroll_max_step"


class PrimFuncPass(Pass):
    """A pass applying ``fn(func, mod, ctx) -> func`` to each PrimFunc it is given."""

    sees_all_functions = True  # the PrimFuncs are what it works on

    def __init__(self, fn: Callable[..., PrimFunc], info: PassInfo) -> None:
        self._fn = fn
        self.name, self.opt_level, self.required = info.name, info.opt_level, info.required

    def __call__(self, mod: Any) -> Any:
        if isinstance(mod, IRModule):
            return super().__call__(mod)
        ctx = PassContext.current()
        if isinstance(mod, PrimFunc):
            return self._one(mod, mod, ctx)
        if isinstance(mod, dict):
            return {k: self._one(f, mod, ctx) for k, f in mod.items()}
        if isinstance(mod, (list, tuple)) and all(isinstance(f, PrimFunc) for f in mod):
            return [self._one(f, mod, ctx) for f in mod]
        raise TypeError(f"tir pass {self.name}: expected an IRModule (what ember.lower "
                        f"returns), a PrimFunc or a dict/list of them, got "
                        f"{type(mod).__name__}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        changed = {gv: new for gv, func in mod.other_functions().items()
                   if (new := self._one(func, mod, ctx)) is not func}
        if not changed:
            return mod  # unchanged: the same module back
        out = mod.copy()
        for gv, new in changed.items():
            out.add(gv, new)
        return out

    def _one(self, func: Any, mod: Any, ctx: PassContext) -> PrimFunc:
        if not isinstance(func, PrimFunc):
            raise TypeError(f"tir pass {self.name}: expected PrimFuncs, got "
                            f"{type(func).__name__}")
        out = self._fn(func, mod, ctx)
        if not isinstance(out, PrimFunc):
            raise TypeError(f"tir pass {self.name} returned {type(out).__name__}, expected a "
                            "PrimFunc (use func.with_body(new_body))")
        return out

    def __repr__(self) -> str:
        return f"PrimFuncPass({self.name}, opt_level={self.opt_level})"


def prim_func_pass(pass_func: Any = None, opt_level: int = 0, name: str | None = None,
                   required: Sequence[str] | None = None) -> Any:
    """Make a PrimFuncPass from ``fn(func, mod, ctx) -> func`` or a class with
    ``transform_function``; usable bare or as ``@prim_func_pass(opt_level=0)``."""
    def create(arg: Any) -> Any:
        if not callable(arg):
            raise TypeError(f"prim_func_pass: expected a function or a class, got {arg!r}")
        info = PassInfo(opt_level, name or arg.__name__, tuple(required or ()))
        if not inspect.isclass(arg):
            return PrimFuncPass(arg, info)
        if not callable(getattr(arg, "transform_function", None)):
            raise TypeError(f"prim_func_pass: class {arg.__name__} must define "
                            "transform_function(func, mod, ctx)")
        return lambda *a, **kw: PrimFuncPass(arg(*a, **kw).transform_function, info)

    return create(pass_func) if pass_func is not None else create


def _pass(name: str, fn: Callable[[PrimFunc], PrimFunc]) -> PrimFuncPass:
    return PrimFuncPass(lambda f, _mod, _ctx: fn(f), PassInfo(0, name, ()))


def Apply(ftransform: Callable[[PrimFunc], PrimFunc]) -> PrimFuncPass:  # noqa: N802
    """A pass applying ``ftransform`` to every function."""
    return _pass("tir.Apply", ftransform)


def Simplify() -> PrimFuncPass:  # noqa: N802
    """Fold constants and simplify index arithmetic and loop bounds."""
    return _pass("tir.Simplify", lambda f: f.with_body(simplify(f.body)))


def RemoveNoOp() -> PrimFuncPass:  # noqa: N802
    """Drop statements that do nothing: empty loops, constant-false branches, bare values."""
    return _pass("tir.RemoveNoOp", lambda f: f.with_body(remove_no_op(f.body)))


def UnrollLoop(auto_max_step: int | None = None) -> PrimFuncPass:  # noqa: N802
    """Unroll serial loops of constant extent whose step count (extent times the statements
    of their body) is at most ``auto_max_step`` (default: the ``"tir.UnrollLoop"`` config's
    ``auto_max_step``), and those under a ``pragma("auto_unroll_max_step", n)`` loop."""
    return _pass("tir.UnrollLoop",
                 lambda f: f.with_body(unroll_loops(f.body, auto_max_step)))


def VectorizeLoop(enable: bool = True) -> PrimFuncPass:  # noqa: N802
    """With ``enable=False`` vectorized loops become serial. With ``enable=True`` the loops
    stay marked: ember's C emitter hands them to the C compiler's vectorizer (``EMBER_SIMD``)
    instead of rewriting them into vector types."""
    def run(f: PrimFunc) -> PrimFunc:
        if enable:
            return f
        return f.with_body(transform(f.body, lambda n: dataclasses.replace(
            n, kind=ForKind.SERIAL) if isinstance(n, For) and n.kind == ForKind.VECTORIZED
            else None))
    return _pass("tir.VectorizeLoop", run)


# -- the work behind the passes -------------------------------------------------------------
def _no_op() -> Stmt:
    return Evaluate(IntImm("int32", 0))


def _is_no_op(s: Any) -> bool:
    # Simplify leaves an empty SeqStmt where it drops a constant-false branch.
    return (isinstance(s, Evaluate) and not isinstance(s.value, Call)) or (
        isinstance(s, SeqStmt) and not s.seq)


def _drop(n: Any) -> Any:
    if isinstance(n, SeqStmt):
        kept = [s for s in n.seq if not _is_no_op(s)]
        if n.seq and len(kept) == len(n.seq):
            return None
        return _no_op() if not kept else kept[0] if len(kept) == 1 else SeqStmt(tuple(kept))
    if isinstance(n, For):
        empty = isinstance(n.extent, IntImm) and n.extent.value <= 0
        return _no_op() if empty or _is_no_op(n.body) else None
    if isinstance(n, IfThenElse):
        if isinstance(n.condition, IntImm):
            taken = n.then_case if n.condition.value else n.else_case
            return taken if taken is not None else _no_op()
        if _is_no_op(n.then_case) and (n.else_case is None or _is_no_op(n.else_case)):
            return _no_op()
        return None
    if isinstance(n, (Allocate, LetStmt)) and _is_no_op(n.body):
        if isinstance(n, LetStmt) and isinstance(n.value, Call):
            return None  # the value may have an effect
        return _no_op()
    return None


def remove_no_op(body: Stmt) -> Stmt:
    """``body`` without statements that do nothing (children first, no recursion)."""
    return transform(body, lambda n: _drop(n) if isinstance(n, Stmt) else None)


def _config_max_step() -> int:
    cfg = PassContext.current().config.get("tir.UnrollLoop") or {}
    value = cfg.get("auto_max_step", 0) if isinstance(cfg, dict) else 0
    if not isinstance(value, int) or value < 0:
        raise TVMError(f"PassContext config tir.UnrollLoop: auto_max_step must be a "
                       f"non-negative int, got {value!r}")
    return value


def _mark_unroll(stmt: Stmt, limit: int) -> Stmt:
    # Bottom-up: a node's step count is the sum of its statement children's (a store counts
    # 1); a loop multiplies by its extent. TVM's UnrollLoop rule.
    steps: dict[int, float] = {}

    def fn(n: Any) -> Any:
        if not isinstance(n, Stmt):
            return None
        kids = [c for c in children(n) if isinstance(c, Stmt)]
        inner = sum(steps.get(id(c), 1) for c in kids) if kids else 1
        if isinstance(n, For):
            ext = n.extent.value if isinstance(n.extent, IntImm) else None
            count = float("inf") if ext is None else ext * inner
            if n.kind == ForKind.SERIAL and count <= limit:
                n = dataclasses.replace(n, kind=ForKind.UNROLLED)
            steps[id(n)] = count
        else:
            steps[id(n)] = inner
        return n

    return transform(stmt, fn)


def unroll_loops(body: Stmt, auto_max_step: int | None) -> Stmt:
    """Mark the loops UnrollLoop unrolls as UNROLLED (emitted with an unroll pragma)."""
    limit = _config_max_step() if auto_max_step is None else auto_max_step
    if limit:
        body = _mark_unroll(body, limit)

    def under_pragma(n: Any) -> Any:
        if isinstance(n, For) and _PRAGMA_UNROLL in n.annotations:
            return dataclasses.replace(n, body=_mark_unroll(n.body, n.annotations[_PRAGMA_UNROLL]))
        return None

    return transform(body, under_pragma)


def run_lower_passes(func: PrimFunc, extra: Any) -> PrimFunc:
    """Apply ``[(phase, pass), ...]`` (the ``tir.add_lower_pass`` config) in phase order."""
    if not isinstance(extra, (list, tuple)) or not all(
            isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], int)
            and callable(e[1]) for e in extra):
        raise TVMError("PassContext config tir.add_lower_pass must be a list of (phase, pass) "
                       f"pairs with an int phase, got {extra!r}")
    for _, p in sorted(extra, key=lambda e: e[0]):
        func = p(func)
        if not isinstance(func, PrimFunc):
            raise TVMError(f"tir.add_lower_pass: {p!r} returned {type(func).__name__}, "
                           "expected a PrimFunc")
    return func
