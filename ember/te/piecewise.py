"""Piecewise computes: a stage whose domain splits along one axis into boxes, each with its own
body (concatenate: box ``k`` copies input ``k``).

Written as one ``te.compute``, such a stage picks its piece per element with a chain of
``if_then_else`` on the axis index, which C compilers neither hoist nor vectorise: a concat of
three inputs costs a compare-and-branch ladder per element, and a reshape inlined into it its
div/mod chain too. The lowering (``te/lower.py``) instead gives each piece a loop nest of its
own over its box, with the piece's body, whose axis index then starts at the piece's offset:
inside a box the index arithmetic of inlined producers simplifies (``(i // 80) * 80 + i % 80``
is ``i`` once ``i < 6400`` is known), and each piece is a contiguous copy per row.

A stage that reads a piecewise stage along the piece axis at one of its own axes
(``relu(concat(...))`` fused into one kernel, as in DenseNet; a transpose of a concat), or at
``outer * f + inner`` (a layout transform to ``NCHW8c`` of a concat along the channels whose
pieces are multiples of 8: SegFormer's decoder, a concat of resized maps before a blocked
conv), every load of it through any chain of inlined stages, is split by the same pieces
along that axis of its own: in its piece ``k`` the inlined piecewise stage reads as its body
``k`` (:func:`piece_source`).

The whole-domain body stays the op's ``body`` (what every other reader of the stage sees: an
inlined concat, a cache stage); ``Pieces`` rides in the op's attrs under ``PIECES`` and names
that body, so a copy of the op with another body (``cache_write``) is lowered the plain way.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..tir import op as _op
from ..tir.expr import Add, IntImm, Mul, PrimExpr
from .reader_loads import reader_loads
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


@dataclass(frozen=True)
class PieceSplit:
    """How the pieces of ``source`` split a reader's loops: along the reader's axis ``axis``,
    piece ``k`` covers ``[offsets[k] // factor, (offsets[k] + extents[k]) // factor)``.
    ``factor`` is 1 where the reader reads the piece axis at one of its own axes, and the
    inner block size where it reads it at ``outer * factor + inner`` (a layout transform to
    ``NCHW8c`` of a concat along the channels)."""

    source: ComputeOp
    axis: int
    factor: int


def piece_source(sch: Any, op: Any) -> PieceSplit | None:
    """How a piecewise op's pieces may split the loops of ``op`` (a root stage of ``sch``):
    ``op`` itself, or the first inlined piecewise op that ``op`` reads (through any chain of
    inlined stages) only at an index along the piece axis that is one of ``op``'s axes, or
    ``outer * f + inner`` with ``inner`` an axis of extent ``f`` that divides every piece's
    bounds; the reader's axis must span the piece axis exactly. None if there is none."""
    if not isinstance(op, ComputeOp) or len(op.body) != 1 or op.reduce_axis:
        return None
    if (own := pieces_of(op)) is not None:
        return PieceSplit(op, own.axis, 1)
    loads = reader_loads(sch, op, stop=lambda o: pieces_of(o) is not None)
    found: dict[int, PieceSplit | None] = {}
    for t, idx in loads or ():
        pieces = pieces_of(t.op)
        if pieces is None or sch[t.op].attach_type != "inline":
            continue
        split = _split_at(idx[pieces.axis], op, t.op, pieces)
        before = found.get(id(t.op), split)
        same = before is not None and split is not None and \
            (before.axis, before.factor) == (split.axis, split.factor)
        found[id(t.op)] = split if same else None
    return next((split for split in found.values() if split is not None), None)


def _split_at(index: PrimExpr, reader: ComputeOp, source: ComputeOp, pieces: Pieces
              ) -> PieceSplit | None:
    # ``index`` (the piece axis's, in the reader's variables) as ``v`` or ``v * f + u``.
    axes = {id(iv.var): k for k, iv in enumerate(reader.axis)}
    extents = [iv.dom.extent for iv in reader.axis]
    total = source.output(0).shape[pieces.axis]
    if id(index) in axes:
        k = axes[id(index)]
        return PieceSplit(source, k, 1) if str(extents[k]) == str(total) else None
    outer_inner = _scaled_sum(index)
    if outer_inner is None or id(outer_inner[0]) not in axes or id(outer_inner[2]) not in axes:
        return None
    outer, factor, inner = outer_inner
    k, u = axes[id(outer)], axes[id(inner)]
    bounds = [*pieces.offsets, *pieces.extents, total, extents[k], extents[u]]
    if k == u or not all(isinstance(b, IntImm) for b in bounds):
        return None
    if extents[u].value != factor or extents[k].value * factor != total.value or any(
            b.value % factor for b in (*pieces.offsets, *pieces.extents)):
        return None
    return PieceSplit(source, k, factor)


def _scaled_sum(e: PrimExpr) -> tuple[PrimExpr, int, PrimExpr] | None:
    # (v, f, u) when ``e`` is ``v * f + u`` (either operand order, ``f`` a constant > 1)
    if not isinstance(e, Add):
        return None
    for prod, rest in ((e.a, e.b), (e.b, e.a)):
        if isinstance(prod, Mul):
            for v, f in ((prod.a, prod.b), (prod.b, prod.a)):
                if isinstance(f, IntImm) and f.value > 1:
                    return v, f.value, rest
    return None
