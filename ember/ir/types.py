"""Relay types: tensors (with static, ``Any`` or symbolic dimensions), tuples, functions,
type variables and ADT type calls.

Types are small value objects (equality and hashing by content), except the variables
(``TypeVar``, ``GlobalTypeVar``, ``IncompleteType``, ``ShapeVar``), which are compared by
identity: two type variables with the same name are different variables.

Types nest as deeply as the program's tuples do, so their equality and hashing, and the
walks below (``type_children``, ``fold_type``), use explicit stacks, never recursion.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING
from typing import Any as _Any

from ..runtime.dtype import DataType
from ..runtime.object import register_object
from .base import Node, Span

if TYPE_CHECKING:
    from .adt import Constructor  # noqa: F401


class TypeKind(IntEnum):
    Type = 0
    ShapeVar = 1
    BaseType = 2
    Constraint = 4
    AdtHandle = 5
    TypeData = 6


@register_object("relay.Any")
@dataclass(frozen=True, slots=True)
class Any(Node):
    """A dimension unknown until run time (``?`` in the text format). All ``Any`` are equal."""

    def __repr__(self) -> str:
        return "Any()"


_shape_var_ids = itertools.count()


@register_object("tir.SizeVar")
@dataclass(frozen=True, slots=True, eq=False)
class ShapeVar(Node):
    """A named symbolic dimension (``tvm.tir.Var("n", "int64")``); compared by identity.

    The same ShapeVar in two places of a type means the two dimensions are equal.
    """

    name: str
    dtype: str = "int64"

    def __repr__(self) -> str:
        return f"ShapeVar({self.name!r})"


Dim = int | Any | ShapeVar


def normalize_dim(d: _Any) -> Dim:
    """Accept ints, numpy ints, IntImm-likes (``.value``), ``Any`` and ShapeVars."""
    if isinstance(d, (Any, ShapeVar)):
        return d
    if d is None:
        return Any()
    if hasattr(d, "value") and not isinstance(d, (int, float)):
        d = d.value
    try:
        v = int(d)
    except (TypeError, ValueError):
        raise TypeError(f"a tensor dimension must be an int, Any() or a shape variable, "
                        f"got {d!r}") from None
    if v < 0 and v != -1:
        raise ValueError(f"a tensor dimension must be >= 0, got {v}")
    return Any() if v == -1 else v


class Type(Node):
    """Base of all types."""

    __slots__ = ()


@register_object("relay.TensorType")
@dataclass(frozen=True, slots=True)
class TensorType(Type):
    """``Tensor[(1, 3, ?), float32]``: a tensor of ``dtype`` with ``shape``."""

    shape: tuple[Dim, ...] = ()
    dtype: str = "float32"
    span: Span | None = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        shape = self.shape
        if isinstance(shape, (int, Any, ShapeVar)):
            shape = (shape,)
        object.__setattr__(self, "shape", tuple(normalize_dim(d) for d in shape))
        object.__setattr__(self, "dtype", str(DataType(self.dtype)))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        """The shape as ints; ValueError if a dimension is ``Any`` or symbolic."""
        if not self.is_static:
            raise ValueError(f"{self} has a dynamic shape")
        return tuple(self.shape)  # type: ignore[arg-type]

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)


def scalar_type(dtype: str) -> TensorType:
    """The type of a 0-d tensor of ``dtype``."""
    return TensorType((), dtype)


@register_object("relay.TupleType")
@dataclass(frozen=True, slots=True)
class TupleType(Type):
    fields: tuple[Type, ...] = ()
    span: Span | None = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def __eq__(self, other: object) -> bool:
        return type_equal(self, other)

    def __hash__(self) -> int:
        return type_hash(self)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, i: int) -> Type:
        return self.fields[i]


@register_object("relay.TypeVar")
@dataclass(frozen=True, slots=True, eq=False)
class TypeVar(Type):
    """A type variable bound by a polymorphic function or a type definition."""

    name_hint: str
    kind: TypeKind = TypeKind.Type
    span: Span | None = field(default=None, repr=False, compare=False, kw_only=True)


@register_object("relay.GlobalTypeVar")
@dataclass(frozen=True, slots=True, eq=False)
class GlobalTypeVar(Type):
    """The name of a type definition in an IRModule (``List`` in ``type List[A] {...}``)."""

    name_hint: str
    kind: TypeKind = TypeKind.AdtHandle
    span: Span | None = field(default=None, repr=False, compare=False, kw_only=True)

    def __call__(self, *args: Type) -> TypeCall:
        return TypeCall(self, args)


@register_object("relay.TypeCall")
@dataclass(frozen=True, slots=True)
class TypeCall(Type):
    """An ADT applied to type arguments: ``List[Tensor[(), int32]]``."""

    func: Type
    args: tuple[Type, ...] = ()
    span: Span | None = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))

    def __eq__(self, other: object) -> bool:
        return type_equal(self, other)

    def __hash__(self) -> int:
        return type_hash(self)


@register_object("relay.TypeConstraint")
@dataclass(frozen=True, slots=True, eq=False)
class TypeConstraint(Type):
    """Base of constraints that may appear in FuncType.type_constraints."""


@register_object("relay.FuncType")
@dataclass(frozen=True, slots=True)
class FuncType(Type):
    """``fn [A](A, Tensor[(3), float32]) -> A``."""

    arg_types: tuple[Type, ...]
    ret_type: Type
    type_params: tuple[TypeVar, ...] = ()
    type_constraints: tuple[TypeConstraint, ...] = ()
    span: Span | None = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arg_types", tuple(self.arg_types))
        object.__setattr__(self, "type_params", tuple(self.type_params or ()))
        object.__setattr__(self, "type_constraints", tuple(self.type_constraints or ()))

    def __eq__(self, other: object) -> bool:
        return type_equal(self, other)

    def __hash__(self) -> int:
        return type_hash(self)


@register_object("relay.IncompleteType")
@dataclass(frozen=True, slots=True, eq=False)
class IncompleteType(Type):
    """A type still to be found by inference (``_`` in the text format)."""

    kind: TypeKind = TypeKind.Type


@register_object("relay.RefType")
@dataclass(frozen=True, slots=True)
class RelayRefType(Type):
    """The type of a mutable reference cell holding a value of ``value``."""

    value: Type

    def __eq__(self, other: object) -> bool:
        return type_equal(self, other)

    def __hash__(self) -> int:
        return type_hash(self)


def is_dynamic(ty: Type) -> bool:
    """True if any tensor in ``ty`` (or in its tuples) has an ``Any`` or symbolic dimension."""
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TensorType) and not t.is_static:
            return True
        if isinstance(t, TupleType):
            stack.extend(t.fields)
    return False


# -- walking types ----------------------------------------------------------------------------
def type_children(ty: _Any) -> tuple[_Any, ...]:
    """The types directly inside ``ty`` (tuple fields, argument and result types, ...)."""
    if isinstance(ty, TupleType):
        return ty.fields
    if isinstance(ty, FuncType):
        return (*ty.arg_types, ty.ret_type)
    if isinstance(ty, TypeCall):
        return (ty.func, *ty.args)
    if isinstance(ty, RelayRefType):
        return (ty.value,)
    return ()


def fold_type(ty: _Any, fn: Callable[[_Any, list[_Any]], _Any]) -> _Any:
    """``fn(t, [value of each child])`` for every type in ``ty``, children first, once per
    distinct node; the value of ``ty``."""
    memo: dict[int, _Any] = {}
    stack: list[tuple[_Any, bool]] = [(ty, False)]
    while stack:
        t, ready = stack.pop()
        if id(t) in memo:
            continue
        kids = type_children(t)
        if ready or not kids:
            memo[id(t)] = fn(t, [memo[id(k)] for k in kids])
        else:
            stack.append((t, True))
            stack.extend((k, False) for k in reversed(kids))
    return memo[id(ty)]


_COMPOSITE = ()  # filled below: the types compared and hashed through their children


def _own(ty: _Any) -> tuple[_Any, ...]:
    """What a composite type holds besides its child types (type variables by identity)."""
    if isinstance(ty, TupleType):
        return (len(ty.fields),)
    if isinstance(ty, FuncType):
        return (len(ty.arg_types), ty.type_params, ty.type_constraints)
    if isinstance(ty, TypeCall):
        return (len(ty.args),)
    return ()


def type_equal(a: _Any, b: _Any) -> bool:
    """``a == b`` for types, by content (variables by identity); iterative."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if type(x) is not type(y):
            return False
        if isinstance(x, _COMPOSITE):
            if _own(x) != _own(y):
                return False
            stack.extend(zip(type_children(x), type_children(y)))
        elif x != y:
            return False
    return True


def type_hash(ty: _Any) -> int:
    """A hash consistent with ``type_equal``; iterative."""
    return fold_type(ty, lambda t, kids: hash((type(t).__name__, *_own(t), *kids))
                     if isinstance(t, _COMPOSITE) else hash(t))


_COMPOSITE = (TupleType, FuncType, TypeCall, RelayRefType)  # type: ignore[assignment]


def map_tuple_leaves(ty: _Any, leaf: Callable[[_Any], _Any],
                     node: Callable[[list[_Any]], _Any] = tuple) -> _Any:
    """``ty`` with each type that is not a tuple replaced by ``leaf(t)`` (called left to
    right, once per occurrence) and each tuple type by ``node([its fields' results])``:
    the nested value (or storage) layout of a tuple type. Iterative."""
    results: list[_Any] = []
    stack: list[tuple[_Any, int]] = [(ty, -1)]
    while stack:
        t, n = stack.pop()
        if n >= 0:  # the n fields of tuple t are done
            items = results[len(results) - n:]
            del results[len(results) - n:]
            results.append(node(items))
        elif isinstance(t, TupleType):
            stack.append((t, len(t.fields)))
            stack.extend((f, -1) for f in reversed(t.fields))
        else:
            results.append(leaf(t))
    return results[0]
