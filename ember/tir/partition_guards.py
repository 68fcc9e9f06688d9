"""Innermost loops split where their one guarded store changes sides (TVM's LoopPartition, for
the case lowering produces: a pad, or a concatenation along the last axis).

A padded tensor is written ``for i in [m, m + n): y[..i] = if_then_else(c, x[..i - l], v)``
with ``c`` a conjunction of terms that do not change along the loop (the row is inside the
input) and bounds of ``i`` (``i >= l``, ``i < l + w``). Builds run with
-fno-tree-loop-if-convert (``contrib/cc_toolchain``), so the C compiler keeps that
conditional load a branch in a scalar loop (a 1x16x64x64 pad took 98 us where its copy
takes 4); even with if-conversion it reads through gathers. Here the loop becomes

    if (invariant terms) { for i in [m, lo): y = v;  for i in [lo, hi): y = x[..];
                           for i in [hi, m + n): y = v }
    else                 { for i in [m, m + n): y = v }

with ``lo``/``hi`` the bounds clamped to the loop: plain copies and fills the compiler
vectorises. The value of each part is the branch the condition takes there, so a load runs
only where it did before. A branch that is itself such a store (a concatenation of three
parts) is split again, up to ``MAX_DEPTH`` times.
"""
from __future__ import annotations

from typing import Any

from . import op as _op
from .expr import GE, GT, LE, LT, And, Call, IntImm, PrimExpr, Var
from .functor import post_order, transform
from .simplify import simplify
from .stmt import BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt

MAX_DEPTH = 4  # nested guards split per loop (a concatenation of up to 5 parts)
_SPLIT_KINDS = (ForKind.SERIAL, ForKind.VECTORIZED)


def _uses(e: Any, v: Var) -> bool:
    return any(n is v for n in post_order(e))


def _conjuncts(c: PrimExpr) -> list[PrimExpr]:
    out, stack = [], [c]
    while stack:
        e = stack.pop()
        if isinstance(e, And):
            stack += [e.b, e.a]
        else:
            out.append(e)
    return out


def _bound(term: PrimExpr, v: Var) -> tuple[str, PrimExpr] | None:
    """``("lo", e)`` for a term meaning ``v >= e``, ``("hi", e)`` for ``v < e`` (``e`` free of
    ``v``), else None."""
    if not isinstance(term, (GE, GT, LE, LT)):
        return None
    a, b = term.a, term.b
    if a is v and not _uses(b, v):
        return {GE: ("lo", b), GT: ("lo", b + 1), LT: ("hi", b), LE: ("hi", b + 1)}[type(term)]
    if b is v and not _uses(a, v):
        return {LE: ("lo", a), LT: ("lo", a + 1), GT: ("hi", a), GE: ("hi", a + 1)}[type(term)]
    return None


def _loop(f: For, start: PrimExpr, end: PrimExpr, value: PrimExpr) -> For:
    store: BufferStore = f.body
    return For(f.loop_var, simplify(start), simplify(end - start), f.kind,
               BufferStore(store.buffer, value, store.indices), dict(f.annotations))


def _split(f: For, depth: int) -> Stmt | None:
    """``f`` split at its store's guard, or None when it has no guard of that form."""
    store = f.body
    if (depth > MAX_DEPTH or f.kind not in _SPLIT_KINDS or not isinstance(store, BufferStore)
            or not (isinstance(store.value, Call) and store.value.op == "if_then_else")):
        return None
    cond, then, other = store.value.args
    v, invariant, lows, highs = f.loop_var, [], [], []
    for term in _conjuncts(cond):
        if not _uses(term, v):
            invariant.append(term)
            continue
        bound = _bound(term, v)
        if bound is None:
            return None
        (lows if bound[0] == "lo" else highs).append(bound[1])
    begin, end = f.min, f.min + f.extent
    if lows or highs:
        lo = begin
        for e in lows:
            lo = _op.max(lo, e)
        lo = _op.min(lo, end)
        hi = end
        for e in highs:
            hi = _op.min(hi, e)
        hi = _op.max(hi, lo)
        parts = (_again(_loop(f, begin, lo, other), depth),
                 _again(_loop(f, lo, hi, then), depth),
                 _again(_loop(f, hi, end, other), depth))
        taken: Stmt = SeqStmt(tuple(p for p in parts if not _empty(p)))
    else:
        taken = _again(_loop(f, begin, end, then), depth)
    if not invariant:
        return taken
    return IfThenElse(simplify(_op.all(*invariant)), taken,
                      _again(_loop(f, begin, end, other), depth))


def _empty(s: Stmt) -> bool:
    return isinstance(s, For) and isinstance(s.extent, IntImm) and s.extent.value <= 0


def _again(f: For, depth: int) -> Stmt:
    if _empty(f):
        return f
    split = _split(f, depth + 1)
    return f if split is None else split


def partition_guards(body: Stmt) -> Stmt:
    """``body`` with every innermost guarded store loop split (see the module's docstring)."""
    return transform(body, lambda n: _split(n, 1) if isinstance(n, For) else None)
