"""Bound inference helpers: symbolic intervals of index expressions, guards to loop bounds."""
from __future__ import annotations

from typing import Any

from ..tir import op as _op
from ..tir.expr import (
    GT,
    LT,
    Add,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Sub,
    Var,
)
from ..tir.functor import children, fold, post_order
from ..tir.simplify import _linear, _rebuild, simplify

Interval = tuple[PrimExpr, PrimExpr]


def sym_interval(e: PrimExpr, inner: dict[Var, PrimExpr], ranges: dict) -> Interval | None:
    """(lo, hi) of ``e`` while each Var of ``inner`` runs over ``[0, extent)``, others fixed.

    None when the expression is outside the rule set (the caller then takes the whole axis).
    Children first (``fold``), so an index expression of any depth is fine.
    """
    ids = {id(v) for v in inner}
    return fold(e, lambda n, kids: _interval(n, kids, inner, ids, ranges), _interval_kids)[1]


def _interval_kids(e: PrimExpr) -> list[PrimExpr]:
    # Every child: whether a node depends on the inner loops comes from all of them.
    return [c for c in children(e) if isinstance(c, PrimExpr)]


# The value folded per node: (uses an inner loop variable, interval or None).
_Folded = tuple[bool, "Interval | None"]


def _interval(e: PrimExpr, kids: list[_Folded], inner: dict[Var, PrimExpr], ids: set[int],
              ranges: dict) -> _Folded:
    if id(e) in ids:
        return True, (_op.const(0), simplify(inner[e] - 1, ranges))  # type: ignore[index]
    if not any(u for u, _ in kids):
        return False, (e, e)
    ivs = [iv for _, iv in kids]
    if isinstance(e, (Add, Sub, Min, Max)):
        a, b = ivs
        if a is None or b is None:
            return True, None
        if isinstance(e, Add):
            return True, (a[0] + b[0], a[1] + b[1])
        if isinstance(e, Sub):
            return True, (a[0] - b[1], a[1] - b[0])
        f = _op.min if isinstance(e, Min) else _op.max
        return True, (f(a[0], b[0]), f(a[1], b[1]))
    if isinstance(e, Mul):
        const, iv = (e.b, ivs[0]) if isinstance(e.b, IntImm) else (e.a, ivs[1])
        if not isinstance(const, IntImm) or iv is None:
            return True, None
        c = const.value
        return True, ((iv[0] * c, iv[1] * c) if c >= 0 else (iv[1] * c, iv[0] * c))
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        return True, _divmod_interval(e, ivs[0], ranges)
    if isinstance(e, Cast) and _op.is_int(e.dtype):
        return True, ivs[0]
    return True, None


def _divmod_interval(e: PrimExpr, iv: Interval | None, ranges: dict) -> Interval | None:
    if iv is None:
        return None
    c = e.b.value  # type: ignore[attr-defined]
    if isinstance(e, FloorDiv):
        return simplify(iv[0] // c, ranges), simplify(iv[1] // c, ranges)
    q0, q1 = simplify(iv[0] // c, ranges), simplify(iv[1] // c, ranges)
    if str(q0) == str(q1):
        return simplify(iv[0] % c, ranges), simplify(iv[1] % c, ranges)
    return _op.const(0), _op.const(c - 1)


def guard_to_extent(guards: list[PrimExpr], v: Var, ext: PrimExpr, ranges: dict
                    ) -> tuple[list[PrimExpr], PrimExpr]:
    """Move guards ``v + X < E`` on the innermost loop ``v`` into its extent: min(ext, E - X).

    A loop bound keeps the loop free of branches, so the C compiler can still vectorise it.
    """
    rest_guards: list[PrimExpr] = []
    for g in guards:
        new = _as_upper_bound(g, v)
        if new is None:
            rest_guards.append(g)
        else:
            ext = simplify(_op.min(ext, new), ranges)
    return rest_guards, ext


def _as_upper_bound(g: PrimExpr, v: Var) -> PrimExpr | None:
    if isinstance(g, LT):
        diff = g.a - g.b
    elif isinstance(g, GT):
        diff = g.b - g.a
    else:
        return None
    lin = _linear(diff)
    if lin is None:
        return None
    terms, c = lin
    key = next((k for k, (atom, _) in terms.items() if atom is v), None)
    if key is None or terms[key][1] != 1:
        return None
    others = {k: t for k, t in terms.items() if k != key}
    if any(id(n) == id(v) for t in others.values() for n in post_order(t[0])):
        return None
    neg = {k: [a, -co] for k, (a, co) in others.items()}
    return _rebuild(neg, -c, diff.dtype)


def const_value(e: Any) -> int | None:
    return e.value if isinstance(e, IntImm) else None
