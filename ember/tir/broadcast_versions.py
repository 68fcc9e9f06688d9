"""A second version of a kernel for run-time sizes that broadcast against each other but are
equal at run time (the usual case).

An op over two symbolic sizes that broadcast (``?`` against ``?``: scores (8, ?, ?) plus a
mask (1, 1, ?, ?) sliced to the sequence length at run time) loops to ``max(a, b)`` and reads
each operand at ``a == 1 ? 0 : i``; with a reshape in the fusion its index also divides by the
run-time sizes. The C compiler vectorises none of it (a transformer's scaled, masked scores ran
22x slower than the same kernel with static sizes). ``version_broadcasts`` wraps the body in
``if (a == b && ...) { body with b := a } else { body }``: the first version is exact where
it runs (the sizes are equal there), and simplifies to plain loops (``max(a, a)`` is ``a``,
``a == 1 ? 0 : i`` is ``i`` inside ``for i in [0, a)``, divisions by ``a`` of such an ``i``
go). The general version stays for real broadcasts.
"""
from __future__ import annotations

from typing import Any

from .expr import EQ, And, Max, PrimExpr, Var
from .functor import post_order, substitute
from .simplify import simplify
from .stmt import For, IfThenElse, Stmt

MAX_PAIRS = 4  # more pairs of sizes than this: one version (the condition grows, gains shrink)


def _pairs(body: Stmt) -> list[tuple[Var, Var]]:
    """Pairs of distinct integer size variables whose max is a loop's extent."""
    seen: dict[tuple[int, int], tuple[Var, Var]] = {}
    for node in post_order(body):
        if not isinstance(node, For):
            continue
        for e in post_order(node.extent):
            if isinstance(e, Max) and isinstance(e.a, Var) and isinstance(e.b, Var) and \
                    e.a is not e.b and "int" in e.a.dtype:
                key = tuple(sorted((id(e.a), id(e.b))))
                seen.setdefault(key, (e.a, e.b))  # type: ignore[arg-type]
    return list(seen.values())


def version_broadcasts(body: Stmt) -> Stmt:
    """``body``, and before it a version for equal broadcast sizes (see the module doc);
    ``body`` itself when no loop runs to the max of two size variables."""
    pairs = _pairs(body)
    if not pairs or len(pairs) > MAX_PAIRS:
        return body
    # merge each pair into one representative (the first variable met)
    rep: dict[int, Var] = {}

    def find(v: Var) -> Var:
        while id(v) in rep and rep[id(v)] is not v:
            v = rep[id(v)]
        return v

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra is not rb:
            rep[id(rb)] = ra
    subst: dict[Any, PrimExpr] = {}
    for a, b in pairs:
        for v in (a, b):
            if find(v) is not v:
                subst[v] = find(v)
    conds = [EQ(v, r, "bool") for v, r in subst.items()]
    cond = conds[0]
    for c in conds[1:]:
        cond = And(cond, c, "bool")
    equal = simplify(substitute(body, subst))
    return IfThenElse(cond, equal, body)
