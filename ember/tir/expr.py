"""Loop-IR expressions: a handful of small node kinds with uniform fields.

Every node has a ``dtype`` string (``"int32"``, ``"float32"``, ``"bool"``, ``"handle"`` ...) and
compares by identity; ``a == b`` on expressions builds an ``EQ`` node whose truth value is
``a.same_as(b)``, as in TVM, so expressions still work as dict keys. Structural comparison is
:func:`ember.tir.structural_equal`. Python operators build nodes through :mod:`ember.tir.op`,
which promotes dtypes and folds constants.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..runtime.object import Object

if TYPE_CHECKING:
    from .buffer import Buffer


def _op() -> Any:
    from . import op  # late import: op builds nodes of this module

    return op


class PrimExpr(Object):
    """Base of all loop-IR expressions."""

    __slots__ = ()
    dtype: str

    def __add__(self, o: Any) -> PrimExpr:
        return _op().add(self, o)

    def __radd__(self, o: Any) -> PrimExpr:
        return _op().add(o, self)

    def __sub__(self, o: Any) -> PrimExpr:
        return _op().sub(self, o)

    def __rsub__(self, o: Any) -> PrimExpr:
        return _op().sub(o, self)

    def __mul__(self, o: Any) -> PrimExpr:
        return _op().mul(self, o)

    def __rmul__(self, o: Any) -> PrimExpr:
        return _op().mul(o, self)

    def __truediv__(self, o: Any) -> PrimExpr:
        return _op().div(self, o)

    def __rtruediv__(self, o: Any) -> PrimExpr:
        return _op().div(o, self)

    def __floordiv__(self, o: Any) -> PrimExpr:
        return _op().floordiv(self, o)

    def __rfloordiv__(self, o: Any) -> PrimExpr:
        return _op().floordiv(o, self)

    def __mod__(self, o: Any) -> PrimExpr:
        return _op().floormod(self, o)

    def __rmod__(self, o: Any) -> PrimExpr:
        return _op().floormod(o, self)

    def __neg__(self) -> PrimExpr:
        return _op().sub(_op().const(0, self.dtype), self)

    def __lt__(self, o: Any) -> PrimExpr:
        return _op().binary(LT, self, o)

    def __le__(self, o: Any) -> PrimExpr:
        return _op().binary(LE, self, o)

    def __gt__(self, o: Any) -> PrimExpr:
        return _op().binary(GT, self, o)

    def __ge__(self, o: Any) -> PrimExpr:
        return _op().binary(GE, self, o)

    def __eq__(self, o: object) -> PrimExpr:  # type: ignore[override]
        return EqualOp(self, o)

    def __ne__(self, o: object) -> PrimExpr:  # type: ignore[override]
        return NotEqualOp(self, o)

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        raise ValueError(f"cannot use the expression {self} as a Python bool; use tir.all/"
                         "tir.any or te.if_then_else to build a condition")

    def __and__(self, o: Any) -> PrimExpr:
        return _op().logical_and(self, o)

    def __or__(self, o: Any) -> PrimExpr:
        return _op().logical_or(self, o)

    def __invert__(self) -> PrimExpr:
        return _op().logical_not(self)

    def astype(self, dtype: str) -> PrimExpr:
        """Cast to ``dtype`` (a no-op when the dtype already matches)."""
        return _op().cast(self, dtype)

    def equal(self, o: Any) -> PrimExpr:
        """The EQ node ``self == o``."""
        return _op().binary(EQ, self, o)

    def __str__(self) -> str:
        from .printer import expr_str

        return expr_str(self)

    __repr__ = __str__


class EqualOp:
    """Result of ``a == b``: converts to an EQ node, and to bool by identity (as TVM)."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def __bool__(self) -> bool:
        ca, cb = _const_value(self.a), _const_value(self.b)
        if ca is not None and cb is not None:  # IntImm(1) == 1 is true, as in TVM
            return bool(ca == cb)
        return self.a is self.b

    def asobject(self) -> PrimExpr:
        return _op().binary(EQ, self.a, self.b)


class NotEqualOp(EqualOp):
    """Result of ``a != b``: an NE node, or ``a is not b`` as a bool."""

    def __bool__(self) -> bool:
        return not EqualOp.__bool__(self)

    def asobject(self) -> PrimExpr:
        return _op().binary(NE, self.a, self.b)


def _const_value(v: Any) -> Any:
    if isinstance(v, (IntImm, FloatImm)):
        return v.value
    if isinstance(v, (bool, int, float)):
        return v
    return None


# -- leaves -----------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class Var(PrimExpr):
    """A scalar variable (loop index, shape variable, buffer data pointer when ``handle``)."""

    name: str = "v"
    dtype: str = "int32"

    @property
    def name_hint(self) -> str:
        return self.name


@dataclass(eq=False, repr=False)
class SizeVar(Var):
    """A variable known to be >= 0 (a symbolic dimension)."""


@dataclass(eq=False, repr=False)
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    dtype: str
    value: int

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return self.value != 0


@dataclass(eq=False, repr=False)
class FloatImm(PrimExpr):
    """A floating-point constant."""

    dtype: str
    value: float

    def __float__(self) -> float:
        return float(self.value)

    def __bool__(self) -> bool:
        return self.value != 0


@dataclass(eq=False, repr=False)
class StringImm(PrimExpr):
    """A string constant (for call_packed names and assert messages)."""

    value: str
    dtype: str = "handle"


# -- operators --------------------------------------------------------------------------------
@dataclass(eq=False, repr=False)
class BinaryOp(PrimExpr):
    """Base of the two-operand nodes; ``sym`` is the operator's printed form."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = "int32"
    sym = "?"


def _binary(name: str, sym: str) -> type:
    cls = type(name, (BinaryOp,), {"sym": sym, "__doc__": f"``a {sym} b``."})
    return dataclass(eq=False, repr=False)(cls)


Add = _binary("Add", "+")
Sub = _binary("Sub", "-")
Mul = _binary("Mul", "*")
Div = _binary("Div", "/")  # C semantics: truncation for integers
Mod = _binary("Mod", "%")  # C semantics: sign of the dividend
FloorDiv = _binary("FloorDiv", "//")
FloorMod = _binary("FloorMod", "%%")
Min = _binary("Min", "min")
Max = _binary("Max", "max")
EQ = _binary("EQ", "==")
NE = _binary("NE", "!=")
LT = _binary("LT", "<")
LE = _binary("LE", "<=")
GT = _binary("GT", ">")
GE = _binary("GE", ">=")
And = _binary("And", "&&")
Or = _binary("Or", "||")
COMPARE_OPS = (EQ, NE, LT, LE, GT, GE)


@dataclass(eq=False, repr=False)
class Not(PrimExpr):
    """Logical negation."""

    a: PrimExpr
    dtype: str = "bool"


@dataclass(eq=False, repr=False)
class Select(PrimExpr):
    """``condition ? true_value : false_value`` (both sides may be evaluated)."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = ""

    def __post_init__(self) -> None:
        if not self.dtype:  # tir.Select(cond, t, f) as in TVM: promote, take t's dtype
            t, f = _op()._promote(self.true_value, self.false_value)
            self.condition, self.true_value, self.false_value = _op().convert(self.condition), t, f
            self.dtype = t.dtype


@dataclass(eq=False, repr=False)
class Cast(PrimExpr):
    """Convert ``value`` to ``dtype``."""

    dtype: str
    value: PrimExpr


@dataclass(eq=False, repr=False)
class Call(PrimExpr):
    """A call of an intrinsic by name (``"exp"``, ``"tir.call_packed"``, ``"if_then_else"``)."""

    dtype: str
    op: str
    args: tuple[Any, ...]


@dataclass(eq=False, repr=False)
class Let(PrimExpr):
    """``let var = value in body``."""

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str = ""

    def __post_init__(self) -> None:
        self.dtype = self.dtype or self.body.dtype


@dataclass(eq=False, repr=False)
class BufferLoad(PrimExpr):
    """Read ``buffer[indices]`` (one index per buffer dimension)."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = "float32"


@dataclass(eq=False, repr=False)
class ProducerLoad(PrimExpr):
    """Read a te tensor at ``indices`` (before lowering turns it into a BufferLoad)."""

    producer: Any
    indices: tuple[PrimExpr, ...]
    dtype: str = "float32"


@dataclass(eq=False, repr=False)
class CommReducer(Object):
    """A commutative reducer: ``result(lhs, rhs)`` combines, ``identity`` starts."""

    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[PrimExpr, ...]
    identity_element: tuple[PrimExpr, ...]
    name: str = "reduce"


@dataclass(eq=False, repr=False)
class Reduce(PrimExpr):
    """Reduction of ``source`` over ``axis`` (te IterVars) where ``condition`` holds."""

    combiner: CommReducer
    source: tuple[PrimExpr, ...]
    axis: tuple[Any, ...]
    condition: PrimExpr
    value_index: int = 0
    dtype: str = "float32"
    init: tuple[PrimExpr, ...] = field(default=())


@dataclass(eq=False, repr=False)
class Any_(PrimExpr):
    """A dimension unknown until run time (``tvm.tir.Any()``)."""

    dtype: str = "int32"


def is_const_int(e: Any, value: int | None = None) -> bool:
    """True when ``e`` is an IntImm (equal to ``value`` if given)."""
    return isinstance(e, IntImm) and (value is None or e.value == value)
