"""Concatenations of run-time size that a plan makes in place: no copy, the parts written
where the output has them.

The compiler writes a static concatenation in place itself (``ManifestAlloc._place_concats``):
each part is allocated at its offset in the output. Where the sizes are known only at run
time, it cannot: every tensor of symbolic shape gets a storage block of its own, sized by its
shape function, and the concatenation is a kernel call copying the parts into the output
(squeezenet with a run-time height and width: eight such copies, 5-12% of a run). The
compiler lists the kernels that are only such a concatenation (each param once, along an
axis whose preceding axes have extent 1, so each part is one contiguous byte range of the
output: ``Program.concat_kernels``, ``memory_alloc.run_time_concat_order``) and keeps their
calls, so the interpreter still copies.

A plan, which knows every block's size once its shape phase ran, drops such a call when the
output and each part are blocks of run-time size sized by the shape phase, of no result and
of nothing the shape or value phase touches, each part a distinct block that is part of no
other concatenation made in place: each part's block then lives inside the output's block,
at the sum of the earlier parts' sizes (its producer writes it there), recomputed per
signature (``StaticPlan._realias`` in Python, the alias program of ``csrc/dynamic_call.h`` in
C). A part's block has no storage of its own; the output's block lives from its first part's
producer to its last reader or any part's (``plan_share.lifetimes``). A concatenation whose
output is a part of a later one (nested) falls out: its parts are placed after it is. Each
signature checks that the parts' sizes sum to the output's (``Check`` "sum"): a mismatch
raises an error naming the concatenation, never overlapping bytes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .plan_phase import Early
from .plan_walk import Block, Call, Check, Tensor


class Concat(NamedTuple):
    """A concatenation made in place: call ``call`` (dropped) of kernel ``name`` writes
    ``out``, whose bytes are ``parts``' laid end to end (blocks, in output order)."""

    call: int
    name: str
    out: Block
    parts: tuple[Block, ...]


def in_place_concats(calls: list[Call], concat_kernels: dict[int, tuple[int, ...]],
                     names: list[str], hoisted: set[int], results: set[int], early: Early,
                     in_arena: Callable[[Tensor], bool]) -> list[Concat]:
    """The concatenations of ``calls`` a plan makes in place (see the module doc), in call
    order. ``hoisted``: the calls of the shape and value phases; ``results``: the result
    blocks; ``in_arena``: whether a size tensor is an int64 of the plan's arena."""
    touched = {t.base.index for k in hoisted for t in calls[k].args if type(t.base) is Block}
    # blocks some tensor's run-time shape or some block's size lives in: not data
    holders = {t.shape.base.index for c in calls for t in c.args
               if type(t.shape) is not tuple and type(t.shape.base) is Block}
    # blocks a kernel sees at an offset: not one tensor (as ManifestAlloc makes them) whose
    # bytes its block's size counts
    holders |= {t.base.index for c in calls for t in c.args
                if t.offset != 0 and type(t.base) is Block}
    taken: set[int] = set()  # blocks already a part of a concatenation made in place
    found: list[Concat] = []
    for k, call in enumerate(calls):
        order = concat_kernels.get(call.kernel)
        if order is None or k in hoisted or call.outputs != 1 or \
                len(call.args) != len(order) + 1:
            continue
        out = call.args[-1]
        parts = [call.args[j] for j in order]
        blocks = [t.base for t in parts]
        if not all(_movable(t, out, results, touched, holders, early, in_arena)
                   for t in [out, *parts]):
            continue
        indices = {b.index for b in blocks}
        # (an output already a part was read before this call writes it: not in place)
        if len(indices) != len(blocks) or out.base.index in indices | taken or \
                indices & taken:
            continue
        taken |= indices
        found.append(Concat(k, names[call.kernel] if call.kernel < len(names) else
                            f"kernel {call.kernel}", out.base, tuple(blocks)))
    return found


def _movable(t: Tensor, out: Tensor, results: set[int], touched: set[int], holders: set[int],
             early: Early, in_arena: Callable[[Tensor], bool]) -> bool:
    """Whether tensor ``t`` (the output or a part) is all of a block of run-time size that
    may move: sized by the shape phase (in the arena), no result, untouched by the shape
    and value phases, holding no shape nor other tensor, of the output's dtype."""
    b = t.base
    return (type(b) is Block and b.size is not None and t.offset == 0 and
            t.dtype == out.dtype and b.index not in results and b.index not in touched and
            b.index not in holders and early.holds(b.size) and in_arena(b.size))


def sum_checks(concats: list[Concat]) -> list[Check]:
    """Per concatenation, the check that its parts' sizes sum to its output's (made with the
    shape phase's checks)."""
    return [Check(c.call, "sum", c) for c in concats]


def aliases(concats: list[Concat]) -> list[tuple[int, int, tuple[Any, ...]]]:
    """(part block, the block it lies in, the size tensors of the parts before it) per part,
    in the order their addresses are computed: a later concatenation first, so that an
    output that is itself a part (a nested concatenation) is placed before its parts."""
    out: list[tuple[int, int, tuple[Any, ...]]] = []
    for c in reversed(concats):
        for j, part in enumerate(c.parts):
            out.append((part.index, c.out.index, tuple(p.size for p in c.parts[:j])))
    return out


def roots(concats: list[Concat]) -> dict[int, int]:
    """Part block -> the block of run-time size whose storage holds it (the outermost
    concatenation's output)."""
    parent = {p.index: c.out.index for c in concats for p in c.parts}
    found: dict[int, int] = {}
    for index in parent:
        top = index
        while top in parent:  # (a chain as deep as the nesting: outputs of later calls)
            top = parent[top]
        found[index] = top
    return found


__all__ = ["Concat", "aliases", "in_place_concats", "roots", "sum_checks"]
