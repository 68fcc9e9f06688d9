"""Index-arithmetic simplification: constant folding, a small rule table, linear forms, ranges.

Integer expressions built from ``+``, ``-`` and multiplication by constants are put in a
canonical linear form (terms in order of first appearance, then the constant), which is what
cancels ``(x*16 + 15) - x*16`` during bound inference. Division and modulo by a positive
constant pull out the multiples of the divisor and vanish when the range of what is left is
known to lie in ``[0, c)``. Ranges come from loop variables (``[0, extent)``) and SizeVars.

Every walk is iterative and memoised on node identity, so an expression thousands of
operators deep (a fused elementwise chain) simplifies without recursion, and a shared
subexpression is simplified once and stays shared.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .expr import (
    EQ,
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
    NE,
    Not,
    Or,
    PrimExpr,
    Select,
    SizeVar,
    Sub,
    Var,
)
from .functor import children, fold, map_children, substitute, transform
from .op import binary, cast, const, is_float, is_int
from .stmt import For, IfThenElse, SeqStmt, Stmt

Ranges = dict  # Var -> (lo, hi) inclusive ints (hi may be None: unbounded)
INF = None


# -- constant bounds --------------------------------------------------------------------------
Bound = tuple[int | None, int | None]


def bound(e: PrimExpr, ranges: Ranges) -> Bound:
    """Inclusive integer bounds of ``e`` (``None`` = unknown on that side)."""
    return fold(e, lambda n, kids: _bound_of(n, kids, ranges), _bound_kids)


def _bound_kids(e: Any) -> list[Any]:
    if type(e) in _BOUND_RULES:
        return [e.value] if isinstance(e, Cast) else [e.a, e.b]
    return []


def _bound_of(e: Any, kids: list[Bound], ranges: Ranges) -> Bound:
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, Var):
        if e in ranges:
            return ranges[e]
        return (0, None) if isinstance(e, SizeVar) else (None, None)
    fn = _BOUND_RULES.get(type(e))
    return fn(e, *kids) if fn else (None, None)


def _b_add(e: Any, a: Bound, b: Bound) -> Bound:
    return _plus(a[0], b[0]), _plus(a[1], b[1])


def _b_sub(e: Any, a: Bound, b: Bound) -> Bound:
    return _plus(a[0], _neg(b[1])), _plus(a[1], _neg(b[0]))


def _b_mul(e: Any, a: Bound, b: Bound) -> Bound:
    # interval product with unbounded ends (``-d`` of a size d >= 0 is at most 0); an
    # unbounded end times 0 is 0: the values themselves are finite
    (a0, a1), (b0, b1) = a, b
    prods = [_times(x, y) for x in (_end(a0, -1), _end(a1, 1)) for y in (_end(b0, -1),
                                                                       _end(b1, 1))]
    lo, hi = min(prods), max(prods)
    return (None if lo == -_INF else int(lo)), (None if hi == _INF else int(hi))


_INF = float("inf")


def _end(x: int | None, side: int) -> float | int:
    return side * _INF if x is None else x


def _times(x: float | int, y: float | int) -> float | int:
    return 0 if x == 0 or y == 0 else x * y


def _b_floordiv(e: Any, a: Bound, b: Bound) -> Bound:
    (a0, a1), (b0, b1) = a, b
    if b0 is None or b0 <= 0:
        return None, None
    if b0 == b1:
        return (None if a0 is None else a0 // b0), (None if a1 is None else a1 // b0)
    # a divisor known only to be positive (a run-time size + 1): a non-negative dividend's
    # quotient is non-negative, which lets the C code divide without the floor helper
    if a0 is None or a0 < 0:
        return None, None
    return (0 if b1 is None else a0 // b1), (None if a1 is None else a1 // b0)


def _b_div(e: Any, a: Bound, b: Bound) -> Bound:
    """Truncating division: the floor division's bounds where the dividend is non-negative."""
    a0 = a[0]
    return _b_floordiv(e, a, b) if a0 is not None and a0 >= 0 else (None, None)


def _b_floormod(e: Any, a: Bound, b: Bound) -> Bound:
    (a0, a1), (b0, b1) = a, b
    if b0 is None or b0 <= 0:
        return None, None
    if a0 is not None and a1 is not None and a0 >= 0 and a1 < b0:
        return a0, a1
    return 0, None if b1 is None else b1 - 1


def _b_mod(e: Any, a: Bound, b: Bound) -> Bound:
    """Truncating remainder: the floor remainder's bounds where the dividend is non-negative."""
    a0 = a[0]
    return _b_floormod(e, a, b) if a0 is not None and a0 >= 0 else (None, None)


def _b_minmax(e: Any, a: Bound, b: Bound) -> Bound:
    (a0, a1), (b0, b1) = a, b
    f = min if isinstance(e, Min) else max
    lo = f(a0, b0) if a0 is not None and b0 is not None else (
        (a0 if a0 is not None else b0) if f is max else None)
    hi = f(a1, b1) if a1 is not None and b1 is not None else (
        (a1 if a1 is not None else b1) if f is min else None)
    return lo, hi


def _b_cast(e: Any, v: Bound) -> Bound:
    return v if is_int(e.dtype) else (None, None)


def _plus(x: int | None, y: int | None) -> int | None:
    return None if x is None or y is None else x + y


def _neg(x: int | None) -> int | None:
    return None if x is None else -x


_BOUND_RULES: dict[type, Callable[..., Bound]] = {
    Add: _b_add, Sub: _b_sub, Mul: _b_mul, FloorDiv: _b_floordiv, FloorMod: _b_floormod,
    Div: _b_div, Mod: _b_mod, Min: _b_minmax, Max: _b_minmax, Cast: _b_cast}


_COMPARISONS = (LT, LE, GT, GE, EQ, NE)


def prove(cond: PrimExpr, ranges: Ranges, ctx: "_Context | None" = None) -> bool | None:
    """True/False when the comparison ``cond`` is decided by the ranges, else None.

    Within a simplification (``ctx``) the operands are simplified already: only the
    difference itself is, so that a chain of nested min/max/select does not simplify each
    operand again at every level (exponential in the depth)."""
    if isinstance(cond, IntImm):
        return bool(cond.value)
    if not isinstance(cond, _COMPARISONS) or not is_int(cond.a.dtype) or \
            (cond.a.dtype == "bool" and isinstance(cond, (EQ, NE))):
        return None
    diff = cond.a - cond.b
    diff = simplify(diff, ranges) if ctx is None else _apply_rules(diff, ctx)
    lo, hi = bound(diff, ranges)
    apart = (lo is not None and lo > 0) or (hi is not None and hi < 0)
    table = {LT: (hi is not None and hi < 0, lo is not None and lo >= 0),
             LE: (hi is not None and hi <= 0, lo is not None and lo > 0),
             GT: (lo is not None and lo > 0, hi is not None and hi <= 0),
             GE: (lo is not None and lo >= 0, hi is not None and hi < 0),
             EQ: (lo == hi == 0, apart), NE: (apart, lo == hi == 0)}
    yes, no = table[type(cond)]
    return True if yes else False if no else None


# -- linear forms -----------------------------------------------------------------------------
Linear = tuple[dict[Any, list], int]


def _linear(e: PrimExpr, known: dict[int, Linear] | None = None,
            keys: StructuralKeys | None = None) -> Linear | None:
    """``{key: [atom, coef]}, const`` for an integer expression, or None if not integer.

    Terms come in order of first appearance (depth first, left to right). ``known`` maps ids
    of nodes whose linear form is already known (the simplifier's results) to it."""
    if not is_int(e.dtype) or e.dtype == "bool":
        return None
    terms: dict[Any, list] = {}
    const_part = 0
    keys = keys or StructuralKeys()
    stack: list[tuple[PrimExpr, int]] = [(e, 1)]
    while stack:
        x, scale = stack.pop()
        hit = known.get(id(x)) if known is not None else None
        if hit is not None:
            for key, (atom, coef) in hit[0].items():
                _add_term(terms, key, atom, coef * scale)
            const_part += hit[1] * scale
        elif isinstance(x, IntImm):
            const_part += x.value * scale
        elif isinstance(x, (Add, Sub)):
            stack.append((x.b, -scale if isinstance(x, Sub) else scale))
            stack.append((x.a, scale))
        elif isinstance(x, Mul) and isinstance(x.b, IntImm):
            stack.append((x.a, scale * x.b.value))
        elif isinstance(x, Mul) and isinstance(x.a, IntImm):
            stack.append((x.b, scale * x.a.value))
        elif (spread := _spread_symbolic(x, known, keys)) is not None:
            for key, (atom, coef) in spread[0].items():
                _add_term(terms, key, atom, coef * scale)
        else:
            _add_term(terms, keys.of(x), x, scale)
    return terms, const_part


def _spread_symbolic(x: PrimExpr, known: dict[int, Linear] | None, keys: StructuralKeys
                     ) -> Linear | None:
    """The terms of ``(a + x // n) * n`` multiplied out, ``a * n + (x // n) * n``, when
    ``n`` is known only at run time and the sum holds a term divided by it: the index of a
    loop fused over a symbolic axis and the ones before it, ``(c * 5 + f // w) * w + f % w``,
    then folds to ``c * 5 * w + f`` (``_merge_divmod``) as it does for a constant ``w``.
    None for any other product (left whole: an atom)."""
    if not isinstance(x, Mul):
        return None
    for y, n in ((x.a, x.b), (x.b, x.a)):
        if not isinstance(y, (Add, Sub)) or isinstance(n, IntImm):
            continue
        lin = _linear(y, known, keys)
        n_key = keys.of(n)
        if lin is None or not any(isinstance(atom, FloorDiv) and keys.of(atom.b) == n_key
                                  for atom, _ in lin[0].values()):
            continue
        terms: dict[Any, list] = {}
        for atom, coef in lin[0].values():
            prod = Mul(atom, n, x.dtype)
            _add_term(terms, keys.of(prod), prod, coef)
        if lin[1]:
            _add_term(terms, n_key, n, lin[1])
        return terms, 0
    return None


def _add_term(terms: dict[Any, list], key: Any, atom: PrimExpr, coef: int) -> None:
    if key in terms:
        terms[key][1] += coef
    else:
        terms[key] = [atom, coef]


class StructuralKeys:
    """Structural keys of atoms: equal keys for equal expressions (variables by identity).

    A key is a small tuple of the node's own data and its children's keys, interned to an
    int so that keys of deep expressions stay flat. Every node keyed is remembered (and kept
    alive, so ids stay unique): asking again for a node or one that shares its subexpressions
    costs only the new nodes, not a walk of the whole expression each time."""

    def __init__(self) -> None:
        self.table: dict[tuple, int] = {}
        self.memo: dict[int, tuple[Any, int]] = {}  # id -> (node, key), for fold

    def of(self, e: PrimExpr) -> Any:
        if isinstance(e, Var):
            return ("var", id(e))
        # values (node, key): the memo keeps the nodes it has keys of alive
        return fold(e, lambda n, kids: (n, self._key(n, [k for _, k in kids])),
                    memo=self.memo)[1]

    def _key(self, n: Any, kids: list[int]) -> int:
        if isinstance(n, Var):
            own: Any = ("var", id(n))
        else:
            own = tuple(_plain(v) for k, v in vars(n).items() if k != "dtype")
        key = (type(n).__name__, n.dtype, own, tuple(kids))
        return self.table.setdefault(key, len(self.table))


def _plain(v: Any) -> Any:
    # A field's own data; sub-expressions are represented by the children's keys.
    if isinstance(v, (PrimExpr, Stmt)):
        return None
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    return v if isinstance(v, (str, int, float)) else id(v)


def _rebuild(terms: dict[Any, list], c: int, dtype: str) -> PrimExpr:
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


class _Context:
    """One simplification: the ranges, and linear forms of the results so far (a chain of
    additions is put in linear form once per node, not once per enclosing node)."""

    def __init__(self, ranges: Ranges) -> None:
        self.ranges = ranges
        self.keys = StructuralKeys()
        self.known: dict[int, Linear] = {}
        self.keep: list[PrimExpr] = []  # results whose ids ``known`` uses stay alive
        # loop variable -> key of its run-time extent (the loop starts at 0): x // n is 0
        # and x % n is x inside ``for x in [0, n)``, which bounds alone cannot show
        self.below: dict[Var, Any] = {}

    def linear(self, e: PrimExpr) -> Linear | None:
        return _linear(e, self.known, self.keys)

    def simplify_linear(self, e: PrimExpr) -> PrimExpr:
        lin = self.linear(e)
        if lin is None:
            return e
        lin = _merge_divmod(lin, self)
        out = _rebuild(lin[0], lin[1], e.dtype)
        self.known[id(out)] = lin
        self.keep.append(out)
        return out


def _merge_divmod(lin: Linear, ctx: _Context) -> Linear:
    """Fold ``(x // c) * (k * c) + (x % c) * k`` into ``x * k`` (floor division, c > 0),
    repeatedly: the index of a loop fused from several axes over a contiguous tensor,
    ``((i / 56) / 56) * 50176 + ((i / 56) % 56) * 896 + (i % 56) * 16``, becomes ``i * 16``
    (no divisions left in the innermost loops of elementwise kernels). A divisor known only
    at run time folds too, as ``((x // n) * n) * k + (x % n) * k`` (a symbolic dimension)."""
    terms, k = lin
    while True:
        pair = _divmod_pair(terms, ctx)
        if pair is None:
            return terms, k
        dkey, mkey = pair
        x, scale = terms[mkey][0].a, terms[mkey][1]
        merged = {key: t for key, t in terms.items() if key not in (dkey, mkey)}
        sub = ctx.linear(x)
        if sub is None:
            return terms, k
        for key, (atom, coef) in sub[0].items():
            _add_term(merged, key, atom, coef * scale)
        terms, k = merged, k + sub[1] * scale


def _divmod_pair(terms: dict[Any, list], ctx: _Context) -> tuple[Any, Any] | None:
    """Keys of a term ``(x // c) * c * k`` (or ``(x // c) * (c * k)``, c constant) and a term
    ``(x % c) * k`` of ``terms``, if there are such."""
    keys = ctx.keys
    mods = {(keys.of(atom.a), keys.of(atom.b)): key for key, (atom, coef) in terms.items()
            if isinstance(atom, FloorMod) and coef != 0}
    for dkey, (atom, coef) in terms.items():
        div, times = _div_times(atom, keys)
        if div is None:
            continue
        mkey = mods.get((keys.of(div.a), keys.of(div.b)))
        if mkey is None:
            continue
        if coef == terms[mkey][1] * times:
            return dkey, mkey
    return None


def _div_times(atom: Any, keys: StructuralKeys) -> tuple[Any, int]:
    """(``x // c``, 1) for an atom ``(x // c) * c``; (``x // c``, c) for ``x // c`` with a
    positive constant c (its coefficient carries c); else (None, 0)."""
    if isinstance(atom, FloorDiv) and isinstance(atom.b, IntImm) and atom.b.value > 0:
        return atom, atom.b.value
    if isinstance(atom, Mul):
        for d, m in ((atom.a, atom.b), (atom.b, atom.a)):
            if isinstance(d, FloorDiv) and keys.of(d.b) == keys.of(m):
                return d, 1
    return None, 0


def _divmod_const(e: Any, ctx: _Context) -> PrimExpr | None:
    """floordiv/floormod by a positive constant: pull out multiples, drop in-range parts."""
    c = e.b.value
    lin = ctx.linear(e.a)
    if lin is None or c <= 0:
        return None
    terms, k = lin
    outer = {key: [a, co // c] for key, (a, co) in terms.items() if co % c == 0}
    inner = {key: [a, co] for key, (a, co) in terms.items() if co % c != 0}
    q, r = divmod(k, c)
    rest = _rebuild(inner, r, e.dtype)
    lo, hi = bound(rest, ctx.ranges)
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
    return ctx.simplify_linear(_rebuild(outer, q, e.dtype) + div_rest)


def _divmod_symbolic(e: Any, ctx: _Context) -> PrimExpr | None:
    """floordiv/floormod by a divisor ``n`` known only at run time (a symbolic dimension):
    ``(y * n + r) // n`` is ``y + r // n`` and ``(y * n + r) % n`` is ``r % n``, where ``r``
    of the form ``x % n`` is its own remainder (``r // n`` is 0); ``(x % n) % n`` is
    ``x % n``, and so is a loop variable ``x`` of ``for x in [0, n)``. These undo the
    division a loop fused over symbolic axes introduced, and the one a reshape's index
    introduces over a loop of run-time extent."""
    n = ctx.keys.of(e.b)
    lin = ctx.linear(e.a)
    if lin is None:
        return None
    outer: dict[Any, list] = {}
    inner: dict[Any, list] = {}
    for key, (atom, coef) in lin[0].items():
        y = _times_divisor(atom, n, ctx.keys)
        if y is None:
            inner[key] = [atom, coef]
        else:
            _add_term(outer, ctx.keys.of(y), y, coef)
    rest = _rebuild(inner, lin[1], e.dtype)
    own = isinstance(rest, FloorMod) and ctx.keys.of(rest.b) == n or \
        isinstance(rest, Var) and ctx.below.get(rest) == n
    if not outer and not own:
        return None
    if isinstance(e, FloorMod):
        return rest if own else FloorMod(rest, e.b, e.dtype)
    quotient = _rebuild(outer, 0, e.dtype)
    return quotient if own else ctx.simplify_linear(quotient + FloorDiv(rest, e.b, e.dtype))


def _times_divisor(atom: Any, n: Any, keys: StructuralKeys) -> PrimExpr | None:
    """``y`` when ``atom`` is ``y * n`` (either order, ``n`` by key), else None."""
    if isinstance(atom, Mul):
        for y, m in ((atom.a, atom.b), (atom.b, atom.a)):
            if keys.of(m) == n:
                return y
    return None


def replace_equal(node: Any, pairs: list[tuple[PrimExpr, PrimExpr]]) -> Any:
    """``node`` with every subexpression structurally equal to the first of a pair (variables
    by identity) replaced by the second."""
    keys = StructuralKeys()
    table = {keys.of(a): b for a, b in pairs}
    return transform(node, lambda n: table.get(keys.of(n)) if isinstance(n, PrimExpr) and
                     not isinstance(n, Var) else None)


def simplify_linear(e: PrimExpr) -> PrimExpr:
    """``e`` rebuilt from its linear form (terms in order of first appearance)."""
    return _Context({}).simplify_linear(e)


# -- the rule table ---------------------------------------------------------------------------
def _is(e: Any, v: float) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == v


def _rule_binary(e: BinaryOp, ctx: _Context) -> PrimExpr | None:
    a, b = e.a, e.b
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return binary(type(e), a, b)
    if isinstance(e, (Add, Sub, Mul)) and is_int(e.dtype) and e.dtype != "bool":
        return ctx.simplify_linear(e)
    if isinstance(e, Add) and (_is(b, 0) or _is(a, 0)):
        return a if _is(b, 0) else b
    if isinstance(e, Sub) and _is(b, 0):
        return a
    if isinstance(e, Mul) and (_is(a, 1) or _is(b, 1)):
        return b if _is(a, 1) else a
    if isinstance(e, (FloorDiv, Div)) and _is(b, 1):
        return a
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(b, IntImm) and is_int(e.dtype):
        return _divmod_const(e, ctx)
    if isinstance(e, (FloorDiv, FloorMod)) and is_int(e.dtype):
        return _divmod_symbolic(e, ctx)
    if isinstance(e, (Div, Mod)) and isinstance(b, IntImm) and is_int(e.dtype) and b.value > 0:
        lo, _ = bound(a, ctx.ranges)
        if lo is not None and lo >= 0:  # C division of a non-negative value is floor division
            return _divmod_const((FloorDiv if isinstance(e, Div) else FloorMod)(a, b, e.dtype),
                                 ctx)
    if isinstance(e, _COMPARISONS):
        p = prove(e, ctx.ranges, ctx)
        if p is None:
            p = _below_extent(e, ctx)
        return _quotient_compare(e, ctx) if p is None else const(p)
    if isinstance(e, (Min, Max)) and is_int(e.dtype):
        for inner, other in ((a, b), (b, a)):  # max(max(x, y), y) is max(x, y)
            if type(inner) is type(e) and ctx.keys.of(other) in (ctx.keys.of(inner.a),
                                                                   ctx.keys.of(inner.b)):
                return inner
        p = prove(LE(a, b, "bool"), ctx.ranges, ctx)
        if p is None and prove(GE(a, b, "bool"), ctx.ranges, ctx):
            p = False  # a >= b: equal operands are either (max(d, 0) is d for a size d)
        if p is not None:
            return (a if p else b) if isinstance(e, Min) else (b if p else a)
    if isinstance(e, And) and (_is(a, 1) or _is(b, 1)):
        return b if _is(a, 1) else a
    if isinstance(e, And) and (_is(a, 0) or _is(b, 0)):
        return const(False)
    if isinstance(e, Or) and (_is(a, 0) or _is(b, 0)):
        return b if _is(a, 0) else a
    return None


def _below_extent(e: Any, ctx: _Context) -> bool | None:
    """``x < n`` is true and ``x >= n`` false inside ``for x in [0, n)`` for a run-time
    ``n`` (a reflect pad's test on a batch axis that it does not pad), either way round."""
    below = ctx.below
    if isinstance(e, (LT, GE)) and e.a in below and below[e.a] == ctx.keys.of(e.b):
        return isinstance(e, LT)
    if isinstance(e, (GT, LE)) and e.b in below and below[e.b] == ctx.keys.of(e.a):
        return isinstance(e, GT)
    return None


def _quotient_compare(e: Any, ctx: _Context) -> PrimExpr | None:
    """``x / d < c`` as ``x < c * d`` (and ``<=``, ``>``, ``>=``) for a run-time divisor
    ``d`` and ``x``, ``d`` >= 0: a fused loop's index split back into axes by a run-time
    size, compared with a constant extent (a pad's ``i / w < 129``: a division per element,
    which kept the dynamic build's pad 5x slower than the static one's ``i / 5``). At
    ``d == 0`` the quotient is undefined: any value serves. In int64: ``c * d`` may pass
    int32's range where the quotient does not."""
    q, c = e.a, e.b
    if not isinstance(e, (LT, LE, GT, GE)) or not isinstance(q, (Div, FloorDiv)) or \
            not isinstance(c, IntImm) or isinstance(q.b, IntImm) or not is_int(q.dtype) or \
            q.dtype == "bool":
        return None
    x, d = q.a, q.b
    lo_x, lo_d = bound(x, ctx.ranges)[0], bound(d, ctx.ranges)[0]
    if lo_x is None or lo_x < 0 or lo_d is None or lo_d < 0:
        return None
    limit = c.value + (1 if isinstance(e, (LE, GT)) else 0)  # q <= c is q < c + 1
    product = Mul(const(limit, "int64"), cast(d, "int64"), "int64")
    if isinstance(e, (LT, LE)):
        return LT(cast(x, "int64"), product, e.dtype)
    return GE(cast(x, "int64"), product, e.dtype)


def _rule_select(e: Any, ctx: _Context) -> PrimExpr | None:
    cond = e.condition if isinstance(e, Select) else e.args[0]
    then, other = (e.true_value, e.false_value) if isinstance(e, Select) else e.args[1:3]
    if isinstance(cond, IntImm):
        return then if cond.value else other
    if then is other or ctx.keys.of(then) == ctx.keys.of(other):
        return then  # where(c, x, x): an Expand written as a where on a template of its shape
    if isinstance(cond, EQ) and _is(then, 0) and isinstance(other, Var) and other in ctx.below:
        # ``n == 1 ? 0 : x`` (a broadcast read) is x inside ``for x in [0, n)``: x is 0 there
        # when n is 1
        n = cond.a if _is(cond.b, 1) else cond.b if _is(cond.a, 1) else None
        if n is not None and ctx.below[other] == ctx.keys.of(n):
            return other
    return None


def _rule_call(e: Call, ctx: _Context) -> PrimExpr | None:
    if e.op == "if_then_else":
        return _rule_select(e, ctx)
    if e.op == "pow" and isinstance(e.args[1], FloatImm) and e.args[1].value in (1.0, 2.0):
        # x ** 2 as x * x (one rounding, as pow's correctly rounded result; a libm call per
        # element otherwise: YOLOv5's box decode squares every width and height); the C
        # emitter computes a repeated operand once
        x = e.args[0]
        return x if e.args[1].value == 1.0 else Mul(x, x, x.dtype)
    return None


def _rule_cast(e: Cast, ctx: _Context) -> PrimExpr | None:
    return cast(e.value, e.dtype) if isinstance(e.value, (IntImm, FloatImm)) else None


def _rule_not(e: Not, ctx: _Context) -> PrimExpr | None:
    return const(not e.a.value) if isinstance(e.a, IntImm) else None


_RULES: dict[type, Callable] = {Select: _rule_select, Call: _rule_call, Cast: _rule_cast,
                                Not: _rule_not}


def _apply_rules(node: PrimExpr, ctx: _Context) -> PrimExpr:
    # Up to four rules in a row on the node itself (its children are simplified already).
    for _ in range(4):
        rule = _rule_binary if isinstance(node, BinaryOp) else _RULES.get(type(node))
        new = rule(node, ctx) if rule else None
        if new is None or new is node:
            return node
        if is_float(node.dtype) != is_float(new.dtype):
            new = cast(new, node.dtype)
        node = new
    return node


# -- the driver -------------------------------------------------------------------------------
def simplify(node: Any, ranges: Ranges | None = None) -> Any:
    """Simplify an expression or a statement (loop variables get the range of their loop)."""
    ctx = _Context(dict(ranges or {}))
    if isinstance(node, Stmt):
        return _simplify_stmt(node, ctx)
    if isinstance(node, PrimExpr):
        return _simplify_expr(node, ctx)
    return node


def _simplify_expr(e: PrimExpr, ctx: _Context) -> PrimExpr:
    return transform(e, lambda n: _apply_rules(n, ctx))


def _simplify_stmt(root: Stmt, ctx: _Context) -> Stmt:
    """Statements in order (a loop's range is known inside its body), with an explicit
    stack: ``enter`` may replace a statement (a loop of one iteration by its body, an ``if``
    on a constant by its branch); ``leave`` rebuilds it on its simplified children."""
    memo: dict[int, Stmt] = {}
    loops: dict[int, tuple[PrimExpr, PrimExpr]] = {}  # id(For) -> simplified (min, extent)
    keep: list[Stmt] = []
    stack: list[tuple[Stmt, int, Any]] = [(root, 0, None)]
    while stack:
        s, state, repl = stack.pop()
        if state == 2:
            memo[id(s)] = memo[id(repl)]
        elif state == 1:
            memo[id(s)] = _leave(s, ctx, memo, loops)
        elif id(s) not in memo:
            repl = _enter(s, ctx, loops)
            if repl is not None:
                keep.append(repl)
                stack += [(s, 2, repl), (repl, 0, None)]
                continue
            stack.append((s, 1, None))
            stack.extend((c, 0, None) for c in reversed(children(s)) if isinstance(c, Stmt))
    return memo[id(root)]


def _enter(s: Stmt, ctx: _Context, loops: dict[int, tuple[PrimExpr, PrimExpr]]) -> Stmt | None:
    ranges = ctx.ranges
    if isinstance(s, For):
        ext = _simplify_expr(s.extent, ctx)
        mn = _simplify_expr(s.min, ctx)
        lo, hi = bound(mn, ranges)
        _, ehi = bound(ext, ranges)
        ranges[s.loop_var] = (lo, None if hi is None or ehi is None else hi + ehi - 1)
        # a variable may head sibling loops over other ranges (partition_guards' parts): what
        # an earlier loop said of it does not hold here
        ctx.below.pop(s.loop_var, None)
        if not isinstance(ext, IntImm) and isinstance(mn, IntImm) and mn.value == 0:
            ctx.below[s.loop_var] = ctx.keys.of(ext)
        if isinstance(ext, IntImm) and ext.value == 1:
            return substitute(s.body, {s.loop_var: mn})
        loops[id(s)] = (mn, ext)
    elif isinstance(s, IfThenElse):
        cond = _simplify_expr(s.condition, ctx)
        if isinstance(cond, IntImm):
            chosen = s.then_case if cond.value else s.else_case
            return SeqStmt(()) if chosen is None else chosen
    return None


def _leave(s: Stmt, ctx: _Context, memo: dict[int, Stmt],
           loops: dict[int, tuple[PrimExpr, PrimExpr]]) -> Stmt:
    if isinstance(s, For):
        mn, ext = loops.pop(id(s))
        return For(s.loop_var, mn, ext, s.kind, memo[id(s.body)], s.annotations)
    return map_children(s, lambda c: memo[id(c)] if isinstance(c, Stmt)
                        else _simplify_expr(c, ctx))
