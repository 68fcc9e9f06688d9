"""Piecewise computes: a stage whose domain splits along one axis into boxes, each with its own
body (concatenate: box ``k`` copies input ``k``).

Written as one ``te.compute``, such a stage picks its piece per element with a chain of
``if_then_else`` on the axis index, which C compilers neither hoist nor vectorise: a concat of
three inputs costs a compare-and-branch ladder per element, and a reshape inlined into it its
div/mod chain too. The lowering (``te/lower.py``) instead gives each piece a loop nest of its
own over its box, with the piece's body, whose axis index then starts at the piece's offset:
inside a box the index arithmetic of inlined producers simplifies (``(i // 80) * 80 + i % 80``
is ``i`` once ``i < 6400`` is known), and each piece is a contiguous copy per row.

A stage that reads a piecewise stage elementwise (``relu(concat(...))`` fused into one kernel,
as in DenseNet: every load of it, through any chain of inlined stages, at the reader's own
indices, and the same shape) is split by the same pieces: in its piece ``k`` the inlined
piecewise stage reads as its body ``k`` (:func:`piece_source`).

The whole-domain body stays the op's ``body`` (what every other reader of the stage sees: an
inlined concat, a cache stage); ``Pieces`` rides in the op's attrs under ``PIECES`` and names
that body, so a copy of the op with another body (``cache_write``) is lowered the plain way.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..tir import op as _op
from ..tir.expr import IntImm, PrimExpr, ProducerLoad
from ..tir.functor import post_order
from .tensor import ComputeOp, Tensor, compute

PIECES = "piecewise"


@dataclass(frozen=True)
class Pieces:
    """Along ``axis``, piece ``k`` covers ``[offsets[k], offsets[k] + extents[k])`` and
    computes ``bodies[k]`` (in the op's axis variables, the axis index absolute); ``whole``
    is the op's own body, whose pieces these are."""

    axis: int
    offsets: tuple[PrimExpr, ...]
    extents: tuple[PrimExpr, ...]
    bodies: tuple[PrimExpr, ...]
    whole: PrimExpr


def piecewise_compute(shape: Sequence[Any], axis: int, extents: Sequence[PrimExpr],
                      fpiece: Callable[..., PrimExpr], name: str, tag: str) -> Tensor:
    """A tensor of ``shape`` whose slice ``k`` along ``axis`` (``extents[k]`` long, in order)
    is ``fpiece(k, *idx)`` with ``idx[axis]`` relative to the slice's start.

    Raises ``ValueError`` when ``extents`` is empty."""
    if not extents:
        raise ValueError(f"piecewise_compute {name}: needs at least one piece along axis {axis}")
    offsets, total = [], _op.const(0)
    for e in extents:
        offsets.append(total)
        total = total + e

    def shifted(k: int, idx: tuple) -> PrimExpr:
        return fpiece(k, *(idx[:axis] + (idx[axis] - offsets[k],) + idx[axis + 1:]))

    def whole(*idx: PrimExpr) -> PrimExpr:
        j = idx[axis]
        out = shifted(len(extents) - 1, idx)
        for k in reversed(range(len(extents) - 1)):
            out = _op.if_then_else(j < offsets[k] + extents[k], shifted(k, idx), out)
        return out

    out = compute(shape, whole, name=name, tag=tag)
    op: ComputeOp = out.op
    idx = tuple(iv.var for iv in op.axis)
    op.attrs[PIECES] = Pieces(axis, tuple(offsets), tuple(extents),
                              tuple(shifted(k, idx) for k in range(len(extents))), op.body[0])
    return out


def pieces_of(op: ComputeOp) -> Pieces | None:
    """The pieces of ``op`` when it is a piecewise compute whose body is still theirs."""
    pieces = op.attrs.get(PIECES)
    if isinstance(pieces, Pieces) and len(op.body) == 1 and op.body[0] is pieces.whole:
        return pieces
    return None


def piece_source(sch: Any, op: Any) -> ComputeOp | None:
    """The piecewise op whose pieces may split the loops of ``op`` (a root stage of ``sch``):
    ``op`` itself, or the first inlined piecewise op that ``op`` reads only elementwise (every
    load of it, through inlined stages read at their readers' own indices, at ``op``'s own
    indices, with ``op``'s shape); None if there is none."""
    if not isinstance(op, ComputeOp) or len(op.body) != 1 or op.reduce_axis:
        return None
    if pieces_of(op) is not None:
        return op
    shape = _shape_key(op)
    elementwise: dict[int, tuple[ComputeOp, bool]] = {}
    seen: set[tuple[int, bool]] = set()
    stack: list[tuple[PrimExpr, tuple | None]] = [(op.body[0], tuple(iv.var for iv in op.axis))]
    while stack:  # inlined stages, each with its own axis vars where read at identity
        expr, own = stack.pop()
        for n in post_order(expr):
            if not isinstance(n, ProducerLoad):
                continue
            t = sch.current(n.producer)
            if sch[t.op].attach_type != "inline":
                continue
            same = own is not None and _shape_key(t.op) == shape and _at_own(n.indices, own,
                                                                              shape)
            if pieces_of(t.op) is not None:
                before = elementwise.get(id(t.op), (t.op, True))[1]
                elementwise[id(t.op)] = (t.op, before and same)
            elif (id(t.op), same) not in seen:
                seen.add((id(t.op), same))
                stack.append((t.op.body[t.value_index],
                              tuple(iv.var for iv in t.op.axis) if same else None))
    return next((src for src, ok in elementwise.values() if ok), None)


def _at_own(indices: Sequence[PrimExpr], own: Sequence[PrimExpr],
            shape: tuple[str, ...]) -> bool:
    # Each index is the reader's own axis variable, or 0 on an axis of extent 1 (broadcasts
    # write the index of a unit axis as 0).
    return len(indices) == len(own) and all(
        i is v or (d == "1" and isinstance(i, IntImm) and i.value == 0)
        for i, v, d in zip(indices, own, shape))


def _shape_key(op: Any) -> tuple[str, ...]:
    return tuple(str(d) for d in op.output(0).shape)
