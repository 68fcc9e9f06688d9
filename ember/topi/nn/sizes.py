"""Sizes that are static or known only at run time, for the C kernels' cost models.

A kernel of a product or a convolution with ``?`` dimensions (batch, rows, height, width) takes
those sizes as run-time arguments, and so do the blocking parameters that depend on them (rows
per work item, strip widths, whether to launch threads). The cost models are written once, over
loop-IR expressions: with static sizes every expression folds to a constant (the tiles a static
build gets), with run-time sizes it becomes a few integer operations the kernel's wrapper
evaluates at each call, giving the same tiles a static build of that shape would get.

    mc = tir.min(mc, tir.max(MR, ceildiv(M, MR) * MR))   # an int when M is, else an expression
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...runtime.errors import OpError
from ...tir import op as tir
from ...tir.expr import EQ, FloatImm, IntImm, PrimExpr, StringImm, Var
from ...tir.functor import children, post_order, rebuild
from ...tir.stmt import AssertStmt, Evaluate, LetStmt, Stmt

Dim = int | PrimExpr  # a static size, or an expression of the kernel's run-time sizes
Check = tuple[PrimExpr, str]  # a condition on run-time sizes and the message if it fails


def dims(shape: Iterable[Any]) -> list[Dim]:
    """Static sizes as ints, run-time ones as they are."""
    return [int(d.value) if isinstance(d, IntImm) else d for d in shape]


def is_static(*values: Any) -> bool:
    """True when every value is a compile-time integer (int or IntImm)."""
    return all(isinstance(v, (int, IntImm)) for v in values)


def prod(values: Sequence[Dim]) -> Dim:
    """The product, an int when every factor is one."""
    out: Dim = 1
    for d in values:
        out = out * d if isinstance(out, int) and isinstance(d, int) else tir.mul(out, d)
    return out


def ceildiv(a: Any, b: Any) -> PrimExpr:
    """``ceil(a / b)`` for a >= 0, b > 0 (folds when both are constants)."""
    return tir.floordiv(tir.convert(a) + b - 1, b)


def i64(x: Any) -> PrimExpr:
    """``x`` as an int64 expression (products of sizes overflow int32)."""
    return tir.cast(tir.convert(x), "int64")


def widest(widths: Sequence[int], limit: Any) -> PrimExpr:
    """The first of ``widths`` (in decreasing order) that is at most ``limit``, else 1."""
    out: PrimExpr = tir.const(1)
    for w in reversed(widths):
        out = tir.Select_(tir.convert(limit) >= w, w, out)
    return out


def folded(x: Any, what: str) -> int:
    """The int of an expression that must have folded (the sizes it depends on are static)."""
    if isinstance(x, int):
        return x
    assert isinstance(x, IntImm), f"{what}: static sizes gave the expression {x}"
    return int(x.value)


def must_equal(a: Dim, b: Dim, message: str, static_message: str = "") -> list[Check]:
    """Sizes that must agree: an OpError now when both are static (``static_message``, else
    ``message``), else the check the kernel makes at run time (none for one expression)."""
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise OpError(static_message or message)
        return []
    return [] if a is b else [(tir.convert(a).equal(b), message)]


def succeeds(call: PrimExpr, message: str) -> Stmt:
    """A kernel call (a C entry point returning 0, or -1 when its workspace or parallel launch
    fails) whose failure stops the function with ``message`` instead of leaving its output
    unwritten."""
    return AssertStmt(EQ(call, tir.const(0)), StringImm(message), Evaluate(tir.const(0)))


def calls_succeed(calls: Sequence[PrimExpr]) -> Stmt:
    """Kernel calls in order, each returning 0, or -1 with an error it set itself (one that
    names what was wrong in the data); the first failure stops the function, its error kept."""
    body: Stmt = Evaluate(tir.const(0))
    for call in reversed(calls):
        body = AssertStmt(EQ(call, tir.const(0)), StringImm(""), body)
    return body


def checked(body: Stmt, checks: Sequence[Check]) -> Stmt:
    """``body`` run after ``checks``, each failing with its message (in order)."""
    for cond, message in reversed(checks):
        body = AssertStmt(cond, StringImm(message), body)
    return body


def let_shared(call: PrimExpr, body: Callable[[PrimExpr], Stmt], prefix: str) -> Stmt:
    """``body(call)`` with each integer sub-expression that ``call`` uses more than once (the
    same object: a cost model's run-time choice, reused by the choices after it) computed once
    into a local (``const int32_t <prefix>_<i> = ...;`` before the call): the printed C would
    otherwise repeat it at every use, and the uses of the uses (a conv's tile width, used by
    its strip, used by its work split: 16 KB of C per call). A call of constants (a static
    build's) is returned as it was."""
    uses: dict[int, int] = {}
    for node in post_order(call):
        for kid in children(node):
            uses[id(kid)] = uses.get(id(kid), 0) + 1
    lets: list[tuple[Var, PrimExpr]] = []
    memo: dict[int, PrimExpr] = {}
    for node in post_order(call):  # children first: a local's value uses earlier locals
        new = rebuild(node, memo)
        if (uses.get(id(node), 0) >= 2 and not isinstance(node, (Var, IntImm, FloatImm))
                and node.dtype in ("int32", "int64")):
            var = Var(f"{prefix}_{len(lets)}", node.dtype)
            lets.append((var, new))
            new = var
        memo[id(node)] = new
    out = body(memo[id(call)])
    for var, value in reversed(lets):
        out = LetStmt(var, value, out)
    return out


def static_or_expr(x: PrimExpr) -> Dim:
    """An int for a folded constant, else the expression."""
    return int(x.value) if isinstance(x, IntImm) else x


__all__ = ["Check", "Dim", "ceildiv", "checked", "dims", "folded", "i64", "is_static",
           "let_shared", "must_equal", "prod", "static_or_expr", "widest"]
