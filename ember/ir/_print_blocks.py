"""Where the printer binds each temporary.

A shared expression is bound once, in the innermost block (function body, branch, clause,
``let`` block) that encloses all of its uses, so that sharing survives a print/parse round
trip and nothing is evaluated in a branch that did not ask for it. ``BlockPlan`` computes that
block for every node in one pass over the graph, parents before children.
"""
from __future__ import annotations

from typing import Any

from .adt import Constructor, Match
from .expr import (Call, Function, If, Let, RefCreate, RefRead, RefWrite, RelayExpr, Tuple,
                   TupleGetItem)
from .scope_tree import Scope, common_scope
from .visitor import children, post_order


class Block(Scope):
    """A block of the printed text; ``parent`` is the enclosing block."""

    __slots__ = ()


def common_block(a: Block, b: Block) -> Block:
    """The innermost block enclosing both ``a`` and ``b``."""
    out: Block = common_scope(a, b)  # type: ignore[assignment]
    return out


def dataflow_children(e: RelayExpr) -> tuple[RelayExpr, ...]:
    """Children printed in the same block as ``e`` (not function bodies, branches, clauses)."""
    if isinstance(e, Call):
        return (e.op, *e.args)
    if isinstance(e, Tuple):
        return e.fields
    if isinstance(e, If):
        return (e.cond,)
    if isinstance(e, Match):
        return (e.data,)
    if isinstance(e, TupleGetItem):
        return (e.tuple_value,)
    if isinstance(e, (RefCreate, RefRead, RefWrite)):
        return children(e)
    return ()


def is_nullary_ctor_call(e: RelayExpr) -> bool:
    """``Nil()``: printed as the bare name ``Nil``, which reads back as this call."""
    return isinstance(e, Call) and isinstance(e.op, Constructor) and not e.args


class BlockPlan:
    """Use counts and the home block of every node reachable from ``root``."""

    def __init__(self, root: RelayExpr) -> None:
        self.uses: dict[int, int] = {}
        self.home: dict[int, Block] = {}
        self.blocks: dict[tuple[int, int], Block] = {}  # (owner id, slot) -> block
        self.top = Block(None)
        order = list(post_order(root))
        for node in order:
            for child in children(node):
                self.uses[id(child)] = self.uses.get(id(child), 0) + 1
        self.home[id(root)] = self.top
        chain = {id(root)}  # lets printed as statements of their block
        for node in reversed(order):  # parents before children
            where = self.home.get(id(node), self.top)
            for child, block, in_chain in self._placed(node, where, id(node) in chain):
                if in_chain and isinstance(child, Let) and self.uses_of(child) <= 1:
                    chain.add(id(child))
                old = self.home.get(id(child))
                self.home[id(child)] = block if old is None else common_block(old, block)

    def uses_of(self, e: RelayExpr) -> int:
        return self.uses.get(id(e), 0)

    def _placed(self, e: RelayExpr, where: Block, in_chain: bool) -> list[Any]:
        """(child, block it is used in, whether it starts/continues a chain of statements)."""
        if isinstance(e, Function):
            return [(e.body, self._new(e, 0, where), True)]
        if isinstance(e, If):
            return [(e.cond, where, False), (e.true_branch, self._new(e, 0, where), True),
                    (e.false_branch, self._new(e, 1, where), True)]
        if isinstance(e, Match):
            return [(e.data, where, False)] + [(c.rhs, self._new(e, i, where), True)
                                               for i, c in enumerate(e.clauses)]
        if isinstance(e, Let):
            inner = where if in_chain else self._new(e, 0, where)
            return [(e.value, inner, False), (e.body, inner, True)]
        return [(c, where, False) for c in dataflow_children(e)]

    def _new(self, owner: RelayExpr, slot: int, parent: Block) -> Block:
        block = self.blocks[(id(owner), slot)] = Block(parent)
        return block

    def block(self, owner: RelayExpr, slot: int, parent: Block | None) -> Block:
        """The block planned for slot ``slot`` of ``owner`` (a new child of ``parent`` for
        nodes outside the plan)."""
        block = self.blocks.get((id(owner), slot))
        if block is None:
            block = self.blocks[(id(owner), slot)] = Block(parent)
        return block
