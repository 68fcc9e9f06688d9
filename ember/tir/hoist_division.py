"""Integer divisions by a run-time size that an innermost loop's body repeats unchanged.

A kernel with symbolic shapes indexes its buffers through divisions by those shapes (a fused
loop split back into axes: ``x / (n + 1)``, ``x % (n + 1)``). When such a division does not
depend on the innermost loop, the C compiler still leaves it inside: a division by a value
that may be zero may trap, so GCC neither hoists it nor vectorises the loop (``no vectype
for stmt``). The static build of the same kernel divides by constants and vectorises; a
dynamic build ran wav2vec2's grouped positional conv 20x slower (2.9 ms against 0.13 ms).
The C generator computes each such division once, before the loop, under a test that its
divisor is not zero where that is not proven (the loop may run no trip, or the division may
sit under a condition: its value is then unused), and so too a floor division by a constant
whose dividend may be negative (its helper branches).
"""
from __future__ import annotations

from collections.abc import Callable

from .expr import BufferLoad, Call, Div, FloorDiv, FloorMod, Let, Mod, PrimExpr, Var
from .functor import children, post_order
from .op import is_int
from .stmt import For, LetStmt

DIVISIONS = (Div, Mod, FloorDiv, FloorMod)


def invariant_divisions(loop: For, wanted: Callable[[PrimExpr], bool]) -> list[PrimExpr]:
    """The integer divisions in the body of ``loop`` (an innermost loop) that read no memory
    and no variable bound in the loop and that are ``wanted``, inner ones first."""
    bound_inside: set[int] = {id(loop.loop_var)}
    nodes: list[object] = []
    for n in post_order(loop.body):  # stops at the first inner loop: an outer loop's body
        if isinstance(n, For):  # is not walked whole for each of its loops
            return []  # not innermost
        if isinstance(n, (LetStmt, Let)):
            bound_inside.add(id(n.var))
        nodes.append(n)
    return _invariant(nodes, bound_inside, wanted)


def _operands(n: PrimExpr) -> list[PrimExpr]:
    return [c for c in children(n) if isinstance(c, PrimExpr)]


def body_divisions(loop: For, wanted: Callable[[PrimExpr], bool]) -> list[PrimExpr]:
    """The integer divisions anywhere in the body of ``loop`` (inner loops included) that read
    no memory and no variable bound inside the body (the loop's own variable may be read)
    and that are ``wanted``, inner ones first: computed once at the top of each trip instead
    of in every trip of the inner loops (a fused parallel loop split back into its axes by
    run-time sizes: ``q / (w + 3) / 4`` and ``% h`` per accumulator of a conv tile)."""
    bound_inside: set[int] = set()
    nodes = list(post_order(loop.body))
    for n in nodes:
        if isinstance(n, For):
            bound_inside.add(id(n.loop_var))
        elif isinstance(n, (LetStmt, Let)):
            bound_inside.add(id(n.var))
    if not any(isinstance(n, For) for n in nodes):
        return []  # an innermost loop: invariant_divisions hoists before it
    return _invariant(nodes, bound_inside, wanted)


def _invariant(nodes: list[object], bound_inside: set[int],
               wanted: Callable[[PrimExpr], bool]) -> list[PrimExpr]:
    varying: set[int] = set()
    found: list[PrimExpr] = []
    for n in nodes:
        if isinstance(n, (BufferLoad, Call)) or (isinstance(n, Var) and id(n) in bound_inside):
            varying.add(id(n))
            continue
        if not isinstance(n, PrimExpr) or isinstance(n, Var):
            continue
        if any(id(c) in varying for c in _operands(n)):
            varying.add(id(n))
        elif isinstance(n, DIVISIONS) and is_int(n.dtype) and wanted(n):
            found.append(n)
    return found
