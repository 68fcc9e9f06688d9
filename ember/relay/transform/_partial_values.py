"""What PartialEvaluate knows about values while it runs: partial values, let lists, the store.

A partial value (``PV``) has a static part (what is known at compile time: a tensor, a tuple
of partial values, a closure with its captured partial values, a reference, a constructor
application) and/or a dynamic part (an atomic expression of the residual program that
computes it at run time). The dynamic part of a static value is built on demand
(``materialize`` in ``partial_evaluate``) and remembered with the let list it was bound in,
which is where it may be used: in that list and in those nested inside it.

The store maps references to what is known of their contents. Each branch of a dynamic ``if``
or ``match`` works on its own copy. A reference *escapes* when residual code may read or write
it (it is passed to an unknown function, captured by a residual closure, or its contents are
no longer known after a branch); from then on its contents live in a residual ``ref``, created
where the reference was created, and nothing more is known of them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir.adt import Constructor
from ...ir.expr import Constant, Function, GlobalVar, Let, RelayExpr, Var
from ...ir.op import Op

_names = itertools.count()


class LetList:
    """Residual bindings of one scope, in order; nested scopes point to their parent."""

    def __init__(self, parent: LetList | None = None) -> None:
        self.parent = parent
        self.binds: list[tuple[Var, RelayExpr]] = []

    def push(self, expr: RelayExpr, name: str = "x") -> RelayExpr:
        """``expr`` bound to a fresh variable (atoms are returned as they are)."""
        if isinstance(expr, (Var, Constant, GlobalVar, Op, Constructor)):
            return expr
        var = Var(f"{name}{next(_names)}")
        self.binds.append((var, expr))
        return var

    def sees(self, other: LetList | None) -> bool:
        """Whether bindings of ``other`` are in scope here (None: everywhere)."""
        node: LetList | None = self
        while node is not None:
            if node is other:
                return True
            node = node.parent
        return other is None

    def wrap(self, body: RelayExpr) -> RelayExpr:
        for var, value in reversed(self.binds):
            body = Let(var, value, body)
        return body


@dataclass(eq=False)
class PV:
    """A partial value: ``static`` (or None) and ``dyn``, valid in let list ``where``."""

    static: Any = None
    dyn: RelayExpr | None = None
    where: LetList | None = None


@dataclass(eq=False)
class STensor:
    value: np.ndarray


@dataclass(eq=False)
class STuple:
    fields: list[PV]


@dataclass(eq=False)
class SClosure:
    """A function and the partial values of its free variables; ``self_var`` is the variable
    a recursive ``let`` binds it to, ``recursive`` whether it may call itself."""

    func: Function
    env: dict[Var, PV]
    self_var: Var | None = None
    recursive: bool = False


@dataclass(eq=False)
class SRef:
    """A reference created during evaluation: ``home`` is the let list of its creation,
    ``init`` its first contents, ``residual`` its run-time ref once it escaped."""

    home: LetList
    init: PV
    residual: RelayExpr | None = None


@dataclass(eq=False)
class SCtor:
    ctor: Constructor
    fields: list[PV]


@dataclass(eq=False)
class RefState:
    known: PV | None
    escaped: bool = False


@dataclass(eq=False)
class Store:
    """What is known of each reference's contents (copied for each branch)."""

    refs: dict[SRef, RefState] = field(default_factory=dict)

    def copy(self) -> Store:
        return Store({r: RefState(s.known, s.escaped) for r, s in self.refs.items()})


def refs_reachable(pvs: list[PV]) -> list[SRef]:
    """The references a value can reach (through tuples, constructors, closures)."""
    out: list[SRef] = []
    seen: set[int] = set()
    stack = list(pvs)
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        s = p.static
        if isinstance(s, SRef):
            out.append(s)  # (its contents escape with it, when they are materialized)
        elif isinstance(s, (STuple, SCtor)):
            stack.extend(s.fields)
        elif isinstance(s, SClosure):
            stack.extend(s.env.values())
    return out
