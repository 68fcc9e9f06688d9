"""Index-arithmetic simplification: constant folding, a small rule table, linear forms, ranges.

Integer expressions built from ``+``, ``-`` and multiplication by constants are put in a
canonical linear form (terms in order of first appearance, then the constant), which is what
cancels ``(x*16 + 15) - x*16`` during bound inference. Division and modulo by a positive
constant pull out the multiples of the divisor and vanish when the range of what is left is
known to lie in ``[0, c)``. Ranges come from loop variables (``[0, extent)``) and SizeVars.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .expr import (
    GE,
    GT,
    LE,
    LT,
    Add,
    And,
    BinaryOp,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    SizeVar,
    Sub,
    Var,
)
from .functor import map_children, substitute
from .op import binary, cast, const, is_float, is_int
from .stmt import For, IfThenElse, SeqStmt, Stmt

Ranges = dict  # Var -> (lo, hi) inclusive ints (hi may be None: unbounded)
INF = None


# -- constant bounds --------------------------------------------------------------------------
def bound(e: PrimExpr, ranges: Ranges) -> tuple[int | None, int | None]:
    """Inclusive integer bounds of ``e`` (``None`` = unknown on that side)."""
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, Var):
        if e in ranges:
            return ranges[e]
        return (0, None) if isinstance(e, SizeVar) else (None, None)
    fn = _BOUND_RULES.get(type(e))
    return fn(e, ranges) if fn else (None, None)


def _b_add(e: Any, r: Ranges) -> tuple:
    (a0, a1), (b0, b1) = bound(e.a, r), bound(e.b, r)
    return _plus(a0, b0), _plus(a1, b1)


def _b_sub(e: Any, r: Ranges) -> tuple:
    (a0, a1), (b0, b1) = bound(e.a, r), bound(e.b, r)
    return _plus(a0, _neg(b1)), _plus(a1, _neg(b0))


def _b_mul(e: Any, r: Ranges) -> tuple:
    (a0, a1), (b0, b1) = bound(e.a, r), bound(e.b, r)
    if None in (a0, a1, b0, b1):
        if a0 is not None and b0 is not None and a0 >= 0 and b0 >= 0:
            return a0 * b0, None
        return None, None
    prods = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
    return min(prods), max(prods)


def _b_floordiv(e: Any, r: Ranges) -> tuple:
    (a0, a1), (b0, b1) = bound(e.a, r), bound(e.b, r)
    if b0 is None or b0 != b1 or b0 <= 0:
        return None, None
    return (None if a0 is None else a0 // b0), (None if a1 is None else a1 // b0)


def _b_floormod(e: Any, r: Ranges) -> tuple:
    (a0, a1), (b0, b1) = bound(e.a, r), bound(e.b, r)
    if b0 is None or b0 != b1 or b0 <= 0:
        return None, None
    if a0 is not None and a1 is not None and a0 >= 0 and a1 < b0:
        return a0, a1
    return 0, b0 - 1


def _b_minmax(e: Any, r: Ranges) -> tuple:
    (a0, a1), (b0, b1) = bound(e.a, r), bound(e.b, r)
    f = min if isinstance(e, Min) else max
    lo = f(a0, b0) if a0 is not None and b0 is not None else (
        (a0 if a0 is not None else b0) if f is max else None)
    hi = f(a1, b1) if a1 is not None and b1 is not None else (
        (a1 if a1 is not None else b1) if f is min else None)
    return lo, hi


def _plus(x: int | None, y: int | None) -> int | None:
    return None if x is None or y is None else x + y


def _neg(x: int | None) -> int | None:
    return None if x is None else -x


_BOUND_RULES: dict[type, Callable] = {Add: _b_add, Sub: _b_sub, Mul: _b_mul,
                                      FloorDiv: _b_floordiv, FloorMod: _b_floormod,
                                      Min: _b_minmax, Max: _b_minmax,
                                      Cast: lambda e, r: bound(e.value, r)
                                      if is_int(e.dtype) else (None, None)}


def prove(cond: PrimExpr, ranges: Ranges) -> bool | None:
    """True/False when the comparison ``cond`` is decided by the ranges, else None."""
    if isinstance(cond, IntImm):
        return bool(cond.value)
    if not isinstance(cond, (LT, LE, GT, GE)) or not is_int(cond.a.dtype):
        return None
    lo, hi = bound(simplify(cond.a - cond.b, ranges), ranges)
    table = {LT: (hi is not None and hi < 0, lo is not None and lo >= 0),
             LE: (hi is not None and hi <= 0, lo is not None and lo > 0),
             GT: (lo is not None and lo > 0, hi is not None and hi <= 0),
             GE: (lo is not None and lo >= 0, hi is not None and hi < 0)}
    yes, no = table[type(cond)]
    return True if yes else False if no else None


# -- linear forms -----------------------------------------------------------------------------
def _linear(e: PrimExpr) -> tuple[dict[str, list], int] | None:
    """``{key: [atom, coef]}, const`` for an integer expression, or None if not integer."""
    if not is_int(e.dtype) or e.dtype == "bool":
        return None
    terms: dict[str, list] = {}
    const_part = _collect(e, 1, terms)
    return terms, const_part


def _collect(e: PrimExpr, scale: int, terms: dict[str, list]) -> int:
    if isinstance(e, IntImm):
        return e.value * scale
    if isinstance(e, Add):
        return _collect(e.a, scale, terms) + _collect(e.b, scale, terms)
    if isinstance(e, Sub):
        return _collect(e.a, scale, terms) + _collect(e.b, -scale, terms)
    if isinstance(e, Mul) and isinstance(e.b, IntImm):
        return _collect(e.a, scale * e.b.value, terms)
    if isinstance(e, Mul) and isinstance(e.a, IntImm):
        return _collect(e.b, scale * e.a.value, terms)
    key = _key(e)
    if key in terms:
        terms[key][1] += scale
    else:
        terms[key] = [e, scale]
    return 0


def _key(e: PrimExpr) -> str:
    return f"{type(e).__name__}:{id(e)}" if isinstance(e, Var) else str(e)


def _rebuild(terms: dict[str, list], c: int, dtype: str) -> PrimExpr:
    out: PrimExpr | None = None
    for atom, coef in terms.values():
        if coef == 0:
            continue
        if out is None:
            out = atom if coef == 1 else Mul(atom, const(coef, dtype), dtype)
        elif coef < 0:
            out = Sub(out, atom if coef == -1 else Mul(atom, const(-coef, dtype), dtype), dtype)
        else:
            out = Add(out, atom if coef == 1 else Mul(atom, const(coef, dtype), dtype), dtype)
    if out is None:
        return const(c, dtype)
    if c > 0:
        return Add(out, const(c, dtype), dtype)
    if c < 0:
        return Sub(out, const(-c, dtype), dtype)
    return out


def _divmod_const(e: Any, ranges: Ranges) -> PrimExpr | None:
    """floordiv/floormod by a positive constant: pull out multiples, drop in-range parts."""
    c = e.b.value
    lin = _linear(e.a)
    if lin is None or c <= 0:
        return None
    terms, k = lin
    outer = {key: [a, co // c] for key, (a, co) in terms.items() if co % c == 0}
    inner = {key: [a, co] for key, (a, co) in terms.items() if co % c != 0}
    q, r = divmod(k, c)
    rest = _rebuild(inner, r, e.dtype)
    lo, hi = bound(rest, ranges)
    in_range = lo is not None and hi is not None and lo >= 0 and hi < c
    if isinstance(e, FloorMod):
        if in_range:
            return rest
        return FloorMod(rest, e.b, e.dtype) if (outer or q or k != r) else None
    div_rest = const(0, e.dtype) if in_range else (
        const(lo // c, e.dtype) if lo is not None and hi is not None and lo // c == hi // c
        else FloorDiv(rest, e.b, e.dtype))
    if not outer and q == 0 and not in_range and isinstance(div_rest, FloorDiv):
        return None
    return simplify_linear(_rebuild(outer, q, e.dtype) + div_rest)


def simplify_linear(e: PrimExpr) -> PrimExpr:
    lin = _linear(e)
    return e if lin is None else _rebuild(lin[0], lin[1], e.dtype)


# -- the rule table ---------------------------------------------------------------------------
def _is(e: Any, v: float) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == v


def _rule_binary(e: BinaryOp, ranges: Ranges) -> PrimExpr | None:
    a, b = e.a, e.b
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return binary(type(e), a, b)
    if isinstance(e, (Add, Sub, Mul)) and is_int(e.dtype) and e.dtype != "bool":
        return simplify_linear(e)
    if isinstance(e, Add) and (_is(b, 0) or _is(a, 0)):
        return a if _is(b, 0) else b
    if isinstance(e, Sub) and _is(b, 0):
        return a
    if isinstance(e, Mul) and (_is(a, 1) or _is(b, 1)):
        return b if _is(a, 1) else a
    if isinstance(e, (FloorDiv, Div)) and _is(b, 1):
        return a
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(b, IntImm) and is_int(e.dtype):
        return _divmod_const(e, ranges)
    if isinstance(e, (Div, Mod)) and isinstance(b, IntImm) and is_int(e.dtype) and b.value > 0:
        lo, _ = bound(a, ranges)
        if lo is not None and lo >= 0:  # C division of a non-negative value is floor division
            return _divmod_const((FloorDiv if isinstance(e, Div) else FloorMod)(a, b, e.dtype),
                                 ranges)
    if isinstance(e, (LT, LE, GT, GE)):
        p = prove(e, ranges)
        return None if p is None else const(p)
    if isinstance(e, (Min, Max)) and is_int(e.dtype):
        p = prove(LE(a, b, "bool"), ranges)
        if p is not None:
            return (a if p else b) if isinstance(e, Min) else (b if p else a)
    if isinstance(e, And) and (_is(a, 1) or _is(b, 1)):
        return b if _is(a, 1) else a
    if isinstance(e, And) and (_is(a, 0) or _is(b, 0)):
        return const(False)
    if isinstance(e, Or) and (_is(a, 0) or _is(b, 0)):
        return b if _is(a, 0) else a
    return None


def _rule_select(e: Any, ranges: Ranges) -> PrimExpr | None:
    cond = e.condition if isinstance(e, Select) else e.args[0]
    if isinstance(cond, IntImm):
        return (e.true_value if cond.value else e.false_value) if isinstance(e, Select) else (
            e.args[1] if cond.value else e.args[2])
    return None


def _rule_call(e: Call, ranges: Ranges) -> PrimExpr | None:
    if e.op == "if_then_else":
        return _rule_select(e, ranges)
    return None


def _rule_cast(e: Cast, ranges: Ranges) -> PrimExpr | None:
    return cast(e.value, e.dtype) if isinstance(e.value, (IntImm, FloatImm)) else None


def _rule_not(e: Not, ranges: Ranges) -> PrimExpr | None:
    return const(not e.a.value) if isinstance(e.a, IntImm) else None


_RULES: dict[type, Callable] = {Select: _rule_select, Call: _rule_call, Cast: _rule_cast,
                                Not: _rule_not}


def simplify(node: Any, ranges: Ranges | None = None) -> Any:
    """Simplify an expression or a statement (loop variables get the range of their loop)."""
    ranges = dict(ranges or {})
    return _simplify(node, ranges)


def _simplify(node: Any, ranges: Ranges) -> Any:
    if isinstance(node, For):
        ext = _simplify(node.extent, ranges)
        mn = _simplify(node.min, ranges)
        lo, hi = bound(mn, ranges)
        elo, ehi = bound(ext, ranges)
        ranges[node.loop_var] = (lo, None if hi is None or ehi is None else hi + ehi - 1)
        if isinstance(ext, IntImm) and ext.value == 1:
            return _simplify(substitute(node.body, {node.loop_var: mn}), ranges)
        body = _simplify(node.body, ranges)
        return For(node.loop_var, mn, ext, node.kind, body)
    if isinstance(node, IfThenElse):
        cond = _simplify(node.condition, ranges)
        if isinstance(cond, IntImm):
            chosen = node.then_case if cond.value else node.else_case
            return SeqStmt(()) if chosen is None else _simplify(chosen, ranges)
        return map_children(node, lambda n: _simplify(n, ranges))
    if isinstance(node, Stmt):
        return map_children(node, lambda n: _simplify(n, ranges))
    if not isinstance(node, PrimExpr):
        return node
    node = map_children(node, lambda n: _simplify(n, ranges))
    for _ in range(4):
        rule = _rule_binary if isinstance(node, BinaryOp) else _RULES.get(type(node))
        new = rule(node, ranges) if rule else None
        if new is None or new is node:
            return node
        if is_float(node.dtype) != is_float(new.dtype):
            new = cast(new, node.dtype)
        node = new
    return node
