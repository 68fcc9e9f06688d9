"""A second version of a kernel for run-time sizes that broadcast against each other but are
equal at run time (the usual case).

An op over two symbolic sizes that broadcast (``?`` against ``?``: scores (8, ?, ?) plus a
mask (1, 1, ?, ?) sliced to the sequence length at run time) loops to ``max(a, b)`` (or to
the output's size ``n``, given by the caller: ``te.lower``) and reads each operand at
``a == 1 ? 0 : i``; with a reshape in the fusion its index also divides by the run-time
sizes. The C compiler vectorises none of it (a transformer's scaled, masked scores ran 22x
slower than the same kernel with static sizes). ``version_broadcasts`` wraps the body in
``if (a == n && ...) { body with a := n } else { body }``: the first version is exact where
it runs (the sizes are equal there), and simplifies to plain loops (``max(a, a)`` is ``a``,
``a == 1 ? 0 : i`` is ``i`` inside ``for i in [0, a)``, divisions by ``a`` of such an ``i``
go). The general version stays for real broadcasts.

The sizes paired are two size variables in a loop's ``max`` extent, and an operand's size
``a`` in a broadcast read ``a == 1 ? 0 : i`` with the extent of ``i``'s loop. A read whose
size is an expression (``max(a, b)`` of an inner broadcast, a slice's ``min(1, a) * b``)
that is still not the loop's extent once the variables are merged is paired as such: the
condition checks the expression once, and the equal version reads it as the extent.
"""
from __future__ import annotations

from typing import Any

from .expr import EQ, And, BufferLoad, Call, IntImm, Let, Max, PrimExpr, Select, Var
from .functor import post_order, substitute
from .simplify import replace_equal, simplify
from .stmt import For, IfThenElse, LetStmt, Stmt

MAX_PAIRS = 12  # more pairs of sizes than this: one version (the condition grows, gains shrink)
EXPR_ROUNDS = 3


def _max_pairs(body: Stmt) -> list[tuple[Var, Var]]:
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


def _read_pairs(body: Stmt) -> list[tuple[PrimExpr, Var]]:
    """(size, extent) of each broadcast read ``size == 1 ? 0 : i`` in ``body`` whose ``i`` is
    a loop of a variable extent other than ``size`` (sizes free of loop variables and loads),
    each once."""
    nodes = list(post_order(body))
    extents = {id(n.loop_var): n.extent for n in nodes
               if isinstance(n, For) and isinstance(n.extent, Var)}
    inner = {id(n.var if isinstance(n, (LetStmt, Let)) else n.loop_var) for n in nodes
             if isinstance(n, (For, LetStmt, Let))}  # not defined where the versions split
    out: dict[tuple[int, int], tuple[PrimExpr, Var]] = {}
    for node in nodes:
        read = _broadcast_read(node)
        if read is None:
            continue
        size, i = read
        extent = extents.get(id(i))
        if extent is None or size is extent or id(extent) in inner or any(
                isinstance(n, BufferLoad) or id(n) in inner for n in post_order(size)):
            continue
        out.setdefault((id(size), id(extent)), (size, extent))
    return list(out.values())


def _broadcast_read(node: Any) -> tuple[PrimExpr, Var] | None:
    """(size, i) of ``size == 1 ? 0 : i`` (a Select or an if_then_else), also where ``i`` is
    itself such a read (broadcasts in a row: ``a == 1 ? 0 : (max(a, b) == 1 ? 0 : i)``),
    else None."""
    if isinstance(node, Select):
        cond, then, other = node.condition, node.true_value, node.false_value
    elif isinstance(node, Call) and node.op == "if_then_else":
        cond, then, other = node.args
    else:
        return None
    if not (isinstance(cond, EQ) and _is_int(then, 0)):
        return None
    if not isinstance(other, Var):
        inner = _broadcast_read(other)
        if inner is None:
            return None
        other = inner[1]
    size = cond.a if _is_int(cond.b, 1) else cond.b if _is_int(cond.a, 1) else None
    return None if size is None or "int" not in size.dtype else (size, other)


def _is_int(e: Any, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def _merge(pairs: list[tuple[Var, Var]], extents: set[int]) -> dict[Any, PrimExpr]:
    """Each variable of ``pairs`` -> the representative of its class (a loop extent where
    the class has one: the output's indexing stays as it is), for those that are not."""
    rep: dict[int, Var] = {}

    def find(v: Var) -> Var:
        while id(v) in rep and rep[id(v)] is not v:
            v = rep[id(v)]
        return v

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra is rb:
            continue
        if id(rb) in extents and id(ra) not in extents:
            ra, rb = rb, ra
        rep[id(rb)] = ra
    return {v: find(v) for a, b in pairs for v in (a, b) if find(v) is not v}


def _all(conds: list[PrimExpr]) -> PrimExpr:
    cond = conds[0]
    for c in conds[1:]:
        cond = And(cond, c, "bool")
    return cond


def version_broadcasts(body: Stmt) -> Stmt:
    """``body``, and before it a version for equal broadcast sizes (see the module doc);
    ``body`` itself when no loop runs over sizes that broadcast."""
    reads = _read_pairs(body)
    pairs = _max_pairs(body) + [(a, n) for a, n in reads if isinstance(a, Var)]
    if not pairs and not reads:
        return body
    extents = {id(n) for _, n in reads}
    subst = _merge(pairs, extents)
    equal = simplify(substitute(body, subst)) if subst else body
    conds: list[PrimExpr] = [EQ(v, r, "bool") for v, r in subst.items()]
    for _ in range(EXPR_ROUNDS):  # a size inside another one's expression: the next round
        exprs = _read_pairs(equal)  # sizes that are expressions, still not the loop's extent
        if not exprs or len(conds) + len(exprs) > MAX_PAIRS:
            break
        conds += [EQ(a, n, "bool") for a, n in exprs]
        equal = simplify(replace_equal(equal, exprs))
    if not conds or len(conds) > MAX_PAIRS:
        return body
    return IfThenElse(_all(conds), equal, body)
