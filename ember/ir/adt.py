"""Algebraic data types: constructors, type definitions, patterns and ``match``."""
from __future__ import annotations

from dataclasses import dataclass

from ..runtime.object import register_object
from .base import Node
from .expr import RelayExpr, Var
from .types import FuncType, GlobalTypeVar, Type, TypeCall, TypeVar


@register_object("relay.Constructor")
@dataclass(frozen=True, slots=True, eq=False)
class Constructor(RelayExpr):
    """A constructor of an ADT (``Cons``), callable like a function: ``Cons(h, t)``.

    ``tag`` is its index in the type definition, filled in when the TypeData is made.
    """

    name_hint: str
    inputs: tuple[Type, ...] = ()
    belong_to: GlobalTypeVar | None = None
    tag: int = -1

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))


@register_object("relay.TypeData")
@dataclass(frozen=True, slots=True, eq=False)
class TypeData(Node):
    """``type List[A] { Cons(A, List[A]), Nil }``: header, type params and constructors."""

    header: GlobalTypeVar
    type_vars: tuple[TypeVar, ...]
    constructors: tuple[Constructor, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "type_vars", tuple(self.type_vars))
        ctors = tuple(self.constructors)
        result = TypeCall(self.header, self.type_vars)
        for i, c in enumerate(ctors):
            # Tags are positions in the definition; the constructor knows its type, which the
            # definition fixes (``fn[vars](inputs) -> Head[vars]``): a fact of construction.
            object.__setattr__(c, "tag", i)
            if c.belong_to is None:
                object.__setattr__(c, "belong_to", self.header)
            if c.checked_type_ is None:
                object.__setattr__(c, "checked_type_",
                                   FuncType(c.inputs, result, self.type_vars))
        object.__setattr__(self, "constructors", ctors)


class Pattern(Node):
    __slots__ = ()


@register_object("relay.PatternWildcard")
@dataclass(frozen=True, slots=True, eq=False)
class PatternWildcard(Pattern):
    """``_``: matches anything, binds nothing."""


@register_object("relay.PatternVar")
@dataclass(frozen=True, slots=True, eq=False)
class PatternVar(Pattern):
    """``%x``: matches anything and binds it to ``var``."""

    var: Var


@register_object("relay.PatternConstructor")
@dataclass(frozen=True, slots=True, eq=False)
class PatternConstructor(Pattern):
    """``Cons(%h, %t)``: matches values built by ``constructor``, then the sub-patterns."""

    constructor: Constructor
    patterns: tuple[Pattern, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns or ()))


@register_object("relay.PatternTuple")
@dataclass(frozen=True, slots=True, eq=False)
class PatternTuple(Pattern):
    """``(%a, _)``: matches a tuple field by field."""

    patterns: tuple[Pattern, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns or ()))


@register_object("relay.Clause")
@dataclass(frozen=True, slots=True, eq=False)
class Clause(Node):
    """``lhs => rhs`` in a match."""

    lhs: Pattern
    rhs: RelayExpr


@register_object("relay.Match")
@dataclass(frozen=True, slots=True, eq=False)
class Match(RelayExpr):
    """``match (data) { clauses }``; ``complete=False`` is ``match?`` (may fall through)."""

    data: RelayExpr
    clauses: tuple[Clause, ...]
    complete: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "clauses", tuple(self.clauses))


def pattern_vars(pat: Pattern) -> list[Var]:
    """The variables a pattern binds, left to right (iterative: patterns may nest deeply)."""
    out: list[Var] = []
    stack = [pat]
    while stack:
        p = stack.pop()
        if isinstance(p, PatternVar):
            out.append(p.var)
        elif isinstance(p, (PatternConstructor, PatternTuple)):
            stack.extend(reversed(p.patterns))
    return out
