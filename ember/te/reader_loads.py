"""The loads a stage makes through its inlined producers, in the stage's own variables.

A root stage's body reads inlined stages (a transpose, a reshape, a layout transform fused
into it), which read others in turn; what the stage finally reads from memory, and at which
indices, shows only once each inlined body is substituted at the indices it is read at.
``reader_loads(sch, op)`` does that substitution (without building the whole inlined body) and
returns every load it meets as ``(tensor, indices)``, the indices in ``op``'s axis variables:
the loads of inlined stages it went through, and those of stages computed elsewhere. Used to
decide how a stage's loops split (``piecewise.piece_source``; the injective schedule's inner
block).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tir.expr import PrimExpr, ProducerLoad
from ..tir.functor import post_order, substitute

# Loads followed through inlined stages before giving up (a guard against chains that read
# their producers many times over; callers then keep their plain, always-correct form).
MAX_LOADS = 256


def reader_loads(sch: Any, op: Any, stop: Callable[[Any], bool] = lambda op: False
                 ) -> list[tuple[Any, list[PrimExpr]]] | None:
    """Every load of ``op``'s body and of the inlined stages it reads (not descending into
    those for which ``stop(op)`` holds), indices in ``op``'s variables; None past
    ``MAX_LOADS`` distinct inlined loads."""
    out: list[tuple[Any, list[PrimExpr]]] = []
    seen: set[tuple] = set()
    stack: list[tuple[PrimExpr, dict]] = [(b, {}) for b in op.body]
    while stack:  # each inlined stage's body with its axis variables as op's expressions
        expr, vmap = stack.pop()
        for n in post_order(expr):
            if not isinstance(n, ProducerLoad):
                continue
            t = sch.current(n.producer)
            idx = [substitute(i, vmap) for i in n.indices] if vmap else list(n.indices)
            out.append((t, idx))
            if sch[t.op].attach_type != "inline" or stop(t.op):
                continue
            key = (id(t.op), t.value_index, *map(str, idx))
            if key not in seen:
                if len(seen) >= MAX_LOADS:
                    return None
                seen.add(key)
                stack.append((t.op.body[t.value_index],
                              {iv.var: i for iv, i in zip(t.op.axis, idx)}))
    return out
