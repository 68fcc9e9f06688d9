"""Relay expressions: frozen, slotted dataclasses compared by identity.

``a is b`` (``a.same_as(b)``) means the same node; structural comparison is
``ember.ir.structural_equal``. Children are tuples. ``checked_type_`` is the one mutable
slot: a cache that ``InferType`` fills in.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..runtime.ndarray import NDArray, array as _nd_array
from ..runtime.object import register_object
from .attrs import Attrs, DictAttrs, make_attrs
from .base import Node, Span
from .types import FuncType, TensorType, Type, TypeVar

if TYPE_CHECKING:
    from .op import Op  # noqa: F401


class BaseExpr(Node):
    __slots__ = ()


@dataclass(frozen=True, slots=True, eq=False)
class RelayExpr(BaseExpr):
    """Base of Relay expressions. Use ``expr.checked_type`` after InferType."""

    span: Span | None = field(default=None, repr=False, kw_only=True)
    checked_type_: Type | None = field(default=None, repr=False, kw_only=True)

    @property
    def checked_type(self) -> Type:
        ty = self.checked_type_
        if ty is None:
            from .printer import short_text

            raise ValueError(f"no type yet for {short_text(self)}; "
                             "run relay.transform.InferType() first")
        return ty

    # Operator sugar as in Relay's Python API: x + y builds relay.add(x, y), etc.
    def __add__(self, other: Any) -> "Call":
        return _binary("add", self, other)

    def __radd__(self, other: Any) -> "Call":
        return _binary("add", other, self)

    def __sub__(self, other: Any) -> "Call":
        return _binary("subtract", self, other)

    def __rsub__(self, other: Any) -> "Call":
        return _binary("subtract", other, self)

    def __mul__(self, other: Any) -> "Call":
        return _binary("multiply", self, other)

    def __rmul__(self, other: Any) -> "Call":
        return _binary("multiply", other, self)

    def __truediv__(self, other: Any) -> "Call":
        return _binary("divide", self, other)

    def __rtruediv__(self, other: Any) -> "Call":
        return _binary("divide", other, self)

    def __neg__(self) -> "Call":
        return _call_op("negative", self)

    def __lt__(self, other: Any) -> "Call":
        return _binary("less", self, other)

    def __gt__(self, other: Any) -> "Call":
        return _binary("greater", self, other)

    def __le__(self, other: Any) -> "Call":
        return _binary("less_equal", self, other)

    def __ge__(self, other: Any) -> "Call":
        return _binary("greater_equal", self, other)

    def __call__(self, *args: Any) -> "Call":
        """``f(x, y)`` builds ``Call(f, (x, y))``, for any expression that may be called: a
        Function, a GlobalVar, a Var of function type, a Constructor, a call returning a
        function (as Relay's ``ExprWithOp``). Numbers become constants."""
        return Call(self, tuple(_as_expr(a) for a in args))

    def astype(self, dtype: str) -> "Call":
        from .op import Op

        return Call(Op.get("cast"), (self,), Op.get("cast").make_attrs(dtype=dtype))

    # Python's default object hashing/equality (identity); dataclass eq=False keeps them.
    __hash__ = object.__hash__


Expr = RelayExpr


def _as_expr(v: Any) -> RelayExpr:
    if isinstance(v, RelayExpr):
        return v
    if isinstance(v, (int, float, bool, np.ndarray, np.generic, NDArray)):
        return const(v)
    raise TypeError(f"cannot use {type(v).__name__} {v!r} as a Relay expression")


def _call_op(name: str, *args: Any) -> "Call":
    from .op import Op

    return Call(Op.get(name), tuple(_as_expr(a) for a in args))


def _binary(name: str, lhs: Any, rhs: Any) -> "Call":
    # A Python scalar takes the dtype of the tensor it meets (as Relay's sugar does).
    if not isinstance(lhs, RelayExpr) and isinstance(rhs, Var) and rhs.type_annotation is not None:
        lhs = const(lhs, getattr(rhs.type_annotation, "dtype", None))
    if not isinstance(rhs, RelayExpr) and isinstance(lhs, Var) and lhs.type_annotation is not None:
        rhs = const(rhs, getattr(lhs.type_annotation, "dtype", None))
    return _call_op(name, lhs, rhs)


@register_object("relay.Constant")
@dataclass(frozen=True, slots=True, eq=False)
class Constant(RelayExpr):
    """A constant tensor (``data`` is an NDArray)."""

    data: NDArray

    def __post_init__(self) -> None:
        if not isinstance(self.data, NDArray):
            object.__setattr__(self, "data", _nd_array(self.data))

    @property
    def is_scalar(self) -> bool:
        return len(self.data.shape) == 0


@register_object("relay.Tuple")
@dataclass(frozen=True, slots=True, eq=False)
class Tuple(RelayExpr):
    fields: tuple[RelayExpr, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(_as_expr(f) for f in self.fields))

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, i: int) -> RelayExpr:
        return self.fields[i]

    def astuple(self) -> "Tuple":
        return self


@register_object("relay.Var")
@dataclass(frozen=True, slots=True, eq=False)
class Var(RelayExpr):
    """A local variable (``%x``), bound by a Function, Let or pattern."""

    name_hint: str
    type_annotation: Type | None = None

    @property
    def vid(self) -> "Var":
        return self


@register_object("relay.GlobalVar")
@dataclass(frozen=True, slots=True, eq=False)
class GlobalVar(RelayExpr):
    """The name of a global function of an IRModule (``@main``)."""

    name_hint: str


@register_object("relay.Call")
@dataclass(frozen=True, slots=True, eq=False)
class Call(RelayExpr):
    """``op(args...)`` where op is an Op, a function, a GlobalVar, a Var or a Constructor."""

    op: RelayExpr
    args: tuple[RelayExpr, ...] = ()
    attrs: Attrs | None = None
    type_args: tuple[Type, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(_as_expr(a) for a in self.args))
        object.__setattr__(self, "type_args", tuple(self.type_args or ()))


@register_object("relay.Let")
@dataclass(frozen=True, slots=True, eq=False)
class Let(RelayExpr):
    """``let %var = value; body``."""

    var: Var
    value: RelayExpr
    body: RelayExpr


@register_object("relay.If")
@dataclass(frozen=True, slots=True, eq=False)
class If(RelayExpr):
    """``if (cond) { true_branch } else { false_branch }``; cond is a 0-d bool tensor."""

    cond: RelayExpr
    true_branch: RelayExpr
    false_branch: RelayExpr


@register_object("relay.TupleGetItem")
@dataclass(frozen=True, slots=True, eq=False)
class TupleGetItem(RelayExpr):
    """``%t.0``: field ``index`` of a tuple."""

    tuple_value: RelayExpr
    index: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", int(self.index))


@register_object("relay.RefCreate")
@dataclass(frozen=True, slots=True, eq=False)
class RefCreate(RelayExpr):
    value: RelayExpr


@register_object("relay.RefRead")
@dataclass(frozen=True, slots=True, eq=False)
class RefRead(RelayExpr):
    ref: RelayExpr


@register_object("relay.RefWrite")
@dataclass(frozen=True, slots=True, eq=False)
class RefWrite(RelayExpr):
    ref: RelayExpr
    value: RelayExpr


class BaseFunc(RelayExpr):
    __slots__ = ()


@register_object("relay.Function")
@dataclass(frozen=True, slots=True, eq=False)
class Function(BaseFunc):
    """``fn (%x: T, ...) -> R { body }``. ``attrs`` holds e.g. ``Primitive=1``."""

    params: tuple[Var, ...]
    body: RelayExpr
    ret_type: Type | None = None
    type_params: tuple[TypeVar, ...] = ()
    attrs: DictAttrs | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "type_params", tuple(self.type_params or ()))
        object.__setattr__(self, "attrs", make_attrs(self.attrs))
        for p in self.params:
            if not isinstance(p, Var):
                raise TypeError(f"Function: every parameter must be a relay.Var, got {p!r}")

    def with_attr(self, key: str, value: Any) -> "Function":
        attrs = (self.attrs or DictAttrs()).with_attr(key, value)
        return Function(self.params, self.body, self.ret_type, self.type_params, attrs,
                        span=self.span)

    def get_attr(self, key: str, default: Any = None) -> Any:
        return default if self.attrs is None else self.attrs.get(key, default)

    @property
    def func_type_annotation(self) -> FuncType | None:
        """The declared type, if every parameter and the result are annotated."""
        args = [p.type_annotation for p in self.params]
        if any(a is None for a in args) or self.ret_type is None:
            return None
        return FuncType(args, self.ret_type, self.type_params)  # type: ignore[arg-type]


def var(name_hint: str, type_annotation: Type | str | None = None,
        shape: Sequence[Any] | None = None, dtype: str = "float32") -> Var:
    """``relay.var("x", shape=(1, 3), dtype="float32")`` or with an explicit type.

    A string ``type_annotation`` is a dtype and gives a scalar of that dtype; giving both a
    ``type_annotation`` and a ``shape`` is an error (as in Relay).
    """
    if type_annotation is not None and shape is not None:
        raise ValueError("relay.var: give either type_annotation or shape, not both")
    if isinstance(type_annotation, str):
        type_annotation = TensorType((), type_annotation)  # (shape is None here)
    elif shape is not None:
        type_annotation = TensorType(tuple(shape), dtype)
    return Var(name_hint, type_annotation)


def const(value: Any, dtype: str | None = None, span: Span | None = None) -> Constant:
    """A constant from a Python scalar, list or numpy array.

    Python floats become float32 and ints int32 unless ``dtype`` says otherwise (Relay's rule).
    """
    if isinstance(value, NDArray):
        return Constant(value if dtype is None else _nd_array(value.numpy(), dtype=dtype), span=span)
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        return Constant(_nd_array(arr, dtype=dtype), span=span)
    arr = np.asarray(value)
    if dtype is None:
        if arr.dtype == np.float64:
            dtype = "float32"
        elif arr.dtype == np.int64:
            dtype = "int32"
    return Constant(_nd_array(arr, dtype=dtype), span=span)


def bind(expr: RelayExpr, binds: dict[Var, RelayExpr]) -> RelayExpr:
    """Substitute free variables (or a Function's parameters) by expressions."""
    from .visitor import bind as _bind

    return _bind(expr, binds)
