"""Steps of an index in loop variables whose extents are known only at run time.

``row_stride`` (simd_reduce) gives a constant step; a flat index over a tensor with a
symbolic dimension steps by products of such dimensions (``h * w`` for the channel of a
(n, c, h, w) map). Steps here are polynomials over the index's other atoms, as
``{monomial: coefficient}`` with a monomial the sorted keys of its factors, so that
``h * w`` and ``w * h`` compare equal (the simplifier keeps a product's order)."""
from __future__ import annotations

from typing import Any

from .expr import Add, Cast, IntImm, Mul, PrimExpr, Sub, Var
from .functor import post_order
from .simplify import StructuralKeys

Poly = dict[tuple, int]


def _plus(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for mono, coef in b.items():
        out[mono] = out.get(mono, 0) + sign * coef
    return {m: c for m, c in out.items() if c}


def _atom_order(key: Any) -> tuple:
    # atoms' keys are ("var", id) for variables, interned ints for other expressions: one
    # order over both kinds (Python orders neither a tuple against an int nor back)
    return (isinstance(key, tuple), key)


def _times(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            mono = tuple(sorted(ma + mb, key=_atom_order))
            out[mono] = out.get(mono, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def polynomial(e: PrimExpr, keys: StructuralKeys) -> Poly:
    """``e`` as a polynomial over its atoms (anything but +, -, * and integer constants)."""
    if isinstance(e, IntImm):
        return {(): e.value} if e.value else {}
    if isinstance(e, Cast) and not isinstance(e.value, (IntImm, Var)):
        return polynomial(e.value, keys)
    if isinstance(e, (Add, Sub)):
        return _plus(polynomial(e.a, keys), polynomial(e.b, keys), 1 if isinstance(e, Add) else -1)
    if isinstance(e, Mul):
        return _times(polynomial(e.a, keys), polynomial(e.b, keys))
    return {(keys.of(e),): 1}


def step(e: PrimExpr, var: Var, keys: StructuralKeys) -> Poly | None:
    """``e(var + 1) - e(var)`` as a polynomial free of ``var`` when ``e`` is affine in it;
    None otherwise (``var // 8``, ``var * var``)."""
    if e is var:
        return {(): 1}
    if all(n is not var for n in post_order(e)):
        return {}
    if isinstance(e, Cast):
        return step(e.value, var, keys)
    if isinstance(e, (Add, Sub)):
        a, b = step(e.a, var, keys), step(e.b, var, keys)
        if a is None or b is None:
            return None
        return _plus(a, b, 1 if isinstance(e, Add) else -1)
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if all(n is not var for n in post_order(y)):
                s = step(x, var, keys)
                return None if s is None else _times(s, polynomial(y, keys))
    return None


def contiguous_steps(flat: PrimExpr, group: list[tuple[Var, Any]]) -> bool:
    """Whether ``flat`` is contiguous (or invariant) along the loops ``group`` ((variable,
    extent), outermost first) fused into one index: the last's step 0 or 1, each other's the
    next one's times that one's extent, extents static or not."""
    keys = StructuralKeys()
    steps = [step(flat, v, keys) for v, _ in group]
    if any(s is None for s in steps) or steps[-1] not in ({}, {(): 1}):
        return False
    return all(steps[k] == _times(steps[k + 1], polynomial(group[k + 1][1], keys))
               for k in range(len(group) - 1))
