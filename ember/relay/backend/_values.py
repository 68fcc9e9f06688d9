"""Runtime values of the reference interpreter and their conversions.

Tensors are ``NDArray``; tuples ``ADT`` (tag 0); constructed ADT values ``ConstructorValue``;
mutable cells ``RefValue``; functions ``Closure``. Python arguments (numpy arrays, scalars,
lists, tuples) are converted with the parameter's type and checked against it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...ir.adt import (
    Constructor,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
)
from ...ir.expr import Constant, Function, RelayExpr, Var
from ...ir.op import Op
from ...ir.types import Any as AnyDim
from ...ir.types import (
    FuncType,
    GlobalTypeVar,
    RelayRefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    fold_type,
)
from ...runtime import ndarray as nd
from ...runtime.container import ADT
from ...runtime.errors import InternalError, TVMError
from ...runtime.ndarray import NDArray

if TYPE_CHECKING:
    from .interpreter import Evaluator

def make_tuple(fields: Sequence[Any]) -> ADT:
    return ADT(0, list(fields))


def is_tuple(value: Any) -> bool:
    return isinstance(value, ADT)


class ConstructorValue:
    """A value built by an ADT constructor: ``Cons(x, xs)`` is (tag, [x, xs], Cons)."""

    __slots__ = ("constructor", "fields", "tag")

    def __init__(self, tag: int, fields: Sequence[Any], constructor: Constructor) -> None:
        self.tag, self.fields, self.constructor = int(tag), tuple(fields), constructor

    def __getitem__(self, i: int) -> Any:
        return self.fields[i]

    def __len__(self) -> int:
        return len(self.fields)

    def __repr__(self) -> str:
        return describe_value(self, depth=3)


class RefValue:
    """A mutable reference cell (``ref(v)``); ``value`` is what it holds now."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"RefValue({describe_value(self.value)})"


class Closure:
    """A function value: a Relay Function plus the values of its free variables.

    Calling it from Python converts the arguments with the parameter types and runs it.
    """

    __slots__ = ("_evaluator", "env", "func", "name")

    def __init__(self, func: Function, env: dict[Var, Any], evaluator: Evaluator,
                 name: str | None = None) -> None:
        self.func, self.env, self.name, self._evaluator = func, env, name, evaluator

    def describe(self) -> str:
        return self.name or f"fn ({', '.join('%' + p.name_hint for p in self.func.params)})"

    def bind_args(self, args: Sequence[Any]) -> dict[Any, Any]:
        """A new activation frame: the captured values plus the parameters."""
        params = self.func.params
        if len(args) != len(params):
            raise TVMError(f"{self.describe()}: expected {len(params)} argument(s) "
                           f"({_param_names(params)}), got {len(args)}")
        frame: dict[Any, Any] = dict(self.env)
        frame.update(zip(params, args))
        return frame

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = convert_args(self.func, args, kwargs, self.describe(), self._evaluator.eval)
        return self._evaluator.call(self, values)

    def __repr__(self) -> str:
        return f"<Closure {self.describe()}>"


def _param_names(params: Sequence[Var]) -> str:
    return ", ".join(p.name_hint for p in params) or "none"


# -- describing values and types ---------------------------------------------------------------
def _dim_text(d: Any) -> str:
    if isinstance(d, AnyDim):
        return "?"
    return d.name if isinstance(d, ShapeVar) else str(d)


def type_text(ty: Any) -> str:
    """Short text of a type for messages: ``float32[1, ?]``, ``(int32[], List)``."""
    return str(fold_type(ty, _type_text))


def _type_text(ty: Any, kids: list[str]) -> str:
    if isinstance(ty, TensorType):
        return f"{ty.dtype}[{', '.join(_dim_text(d) for d in ty.shape)}]"
    if isinstance(ty, TupleType):
        return "(" + ", ".join(kids) + ")"
    if isinstance(ty, TypeCall):
        return f"{kids[0]}[{', '.join(kids[1:])}]"
    if isinstance(ty, GlobalTypeVar):
        return ty.name_hint
    if isinstance(ty, FuncType):
        return "a function"
    return getattr(ty, "name_hint", type(ty).__name__)


def describe_value(v: Any, depth: int = 2) -> str:
    """Short text of a runtime value for messages: ``float32[2, 3]``, ``Cons(int32[], Nil)``."""
    if isinstance(v, NDArray):
        text = f"{v.dtype}[{', '.join(str(d) for d in v.shape)}]"
        return f"{text} {np.asarray(v).item()!r}" if v.shape == () else text
    if isinstance(v, ConstructorValue):
        name = v.constructor.name_hint
        if not v.fields:
            return name
        if depth <= 0:
            return f"{name}(...)"
        return f"{name}({', '.join(describe_value(f, depth - 1) for f in v.fields)})"
    if is_tuple(v):
        return "(" + ", ".join(describe_value(f, depth - 1) for f in v) + ")"
    if isinstance(v, Closure):
        return f"the closure {v.describe()}"
    if isinstance(v, (Op, Constructor)):
        return f"the {'operator' if isinstance(v, Op) else 'constructor'} " \
               f"{getattr(v, 'name', None) or v.name_hint}"
    if isinstance(v, RefValue):
        return "a reference"
    return f"a Python {type(v).__name__}"


# -- pattern matching ---------------------------------------------------------------------------
def match_pattern(pat: Pattern, value: Any, binds: dict[Var, Any]) -> bool:
    """Whether ``value`` matches ``pat``; the variables it binds are added to ``binds``.
    Left to right from a stack (patterns may nest deeply)."""
    stack = [(pat, value)]
    while stack:
        p, v = stack.pop()
        if isinstance(p, PatternWildcard):
            continue
        if isinstance(p, PatternVar):
            binds[p.var] = v
            continue
        if isinstance(p, PatternConstructor):
            ok = (isinstance(v, ConstructorValue) and v.tag == p.constructor.tag
                  and len(v.fields) == len(p.patterns))
            fields = v.fields if ok else ()
        elif isinstance(p, PatternTuple):
            ok = is_tuple(v) and len(v) == len(p.patterns)
            fields = v if ok else ()
        else:
            raise TVMError(f"match: unknown pattern kind {type(p).__name__}")
        if not ok:
            return False
        stack.extend(reversed(list(zip(p.patterns, fields))))
    return True


# -- operator arguments and results --------------------------------------------------------------
def to_numpy(v: Any, op_name: str, index: int) -> Any:
    """An operator argument for a numpy reference: a read-only view (tuples as tuples)."""
    if isinstance(v, NDArray):
        view = np.asarray(v).view()
        view.flags.writeable = False  # references must not write into the interpreter's values
        return view
    if is_tuple(v):
        return tuple(to_numpy(f, op_name, index) for f in v)
    raise TVMError(f"{op_name}: argument {index} is {describe_value(v)}, expected a tensor")


def from_numpy(out: Any, ty: Type | None, op_name: str) -> Any:
    """Wrap a reference's result; cast to the inferred dtype and check static dimensions."""
    if isinstance(out, (tuple, list)):
        fields = ty.fields if isinstance(ty, TupleType) else [None] * len(out)
        return make_tuple([from_numpy(o, t, op_name) for o, t in zip(out, fields)])
    arr = np.asarray(out)
    if isinstance(ty, TensorType):
        if str(arr.dtype) != ty.dtype:
            arr = arr.astype(ty.dtype)
        dims_ok = arr.ndim == len(ty.shape) and all(
            not isinstance(d, int) or d == s for d, s in zip(ty.shape, arr.shape))
        if not dims_ok:
            raise InternalError(f"{op_name}: the numpy reference returned shape {arr.shape} but "
                                f"type inference says {type_text(ty)}")
    return nd.array(arr)


# -- Python arguments ---------------------------------------------------------------------------
_VALUE_TYPES = (NDArray, ADT, ConstructorValue, RefValue, Closure, Op, Constructor)


def _py_array(x: Any, dtype: str | None) -> np.ndarray:
    arr = np.asarray(x, dtype=dtype)
    if dtype is None and arr.dtype == np.float64:  # Relay's rule for Python literals
        arr = arr.astype("float32")
    elif dtype is None and arr.dtype == np.int64:
        arr = arr.astype("int32")
    return arr


def to_value(x: Any, ty: Type | None, where: str,
             evaluate: Callable[[RelayExpr], Any] | None = None) -> Any:
    """Convert a Python argument to a runtime value, using ``ty`` (if known) for dtypes.

    A (closed) Relay expression, e.g. a Function, is evaluated when ``evaluate`` is given.
    """
    if isinstance(x, _VALUE_TYPES):
        return x
    if isinstance(x, Constant):
        return x.data
    if isinstance(x, RelayExpr) and evaluate is not None:
        return evaluate(x)
    if isinstance(x, (np.ndarray, np.generic)):
        return nd.array(x)
    if isinstance(x, (tuple, list)) and isinstance(ty, TupleType):
        if len(x) != len(ty.fields):
            raise TVMError(f"{where}: expected a tuple of {len(ty.fields)} fields, got {len(x)}")
        return make_tuple([to_value(v, t, f"{where}.{i}") for i, (v, t) in
                           enumerate(zip(x, ty.fields))])
    if isinstance(x, tuple) and ty is None:
        return make_tuple([to_value(v, None, f"{where}.{i}") for i, v in enumerate(x)])
    if isinstance(x, (bool, int, float, list, tuple)):
        dtype = ty.dtype if isinstance(ty, TensorType) else None
        try:
            return nd.array(_py_array(x, dtype))
        except (ValueError, TypeError, OverflowError) as err:
            target = f"a {dtype} tensor" if dtype else "a tensor"
            raise TVMError(f"{where}: cannot convert {x!r} to {target}: {err}") from err
    raise TVMError(f"{where}: cannot pass a Python {type(x).__name__} to the interpreter; use an "
                   "NDArray, a numpy array, a Python number or list, a tuple or an ADT value")


def _check_tensor(v: Any, ty: TensorType, where: str, dims: dict[ShapeVar, int]) -> None:
    if not isinstance(v, NDArray):
        raise TVMError(f"{where}: expected a tensor {type_text(ty)}, got {describe_value(v)}")
    ok = v.dtype == ty.dtype and v.ndim == len(ty.shape)
    for d, s in zip(ty.shape, v.shape) if ok else ():
        if isinstance(d, ShapeVar):
            ok = ok and dims.setdefault(d, s) == s  # the same symbol means the same size
        elif isinstance(d, int):
            ok = ok and d == s
    if not ok:
        raise TVMError(f"{where}: expected {type_text(ty)}, got {describe_value(v)}")


def check_value(v: Any, ty: Type | None, where: str, dims: dict[ShapeVar, int]) -> None:
    """Raise a TVMError naming ``where`` if ``v`` cannot be a value of type ``ty``."""
    if isinstance(ty, TensorType):
        _check_tensor(v, ty, where, dims)
    elif isinstance(ty, TupleType):
        if not is_tuple(v) or len(v) != len(ty.fields):
            raise TVMError(f"{where}: expected a tuple {type_text(ty)}, got {describe_value(v)}")
        for i, (f, t) in enumerate(zip(v, ty.fields)):
            check_value(f, t, f"{where}.{i}", dims)
    elif isinstance(ty, (TypeCall, GlobalTypeVar)):
        adt = ty.func if isinstance(ty, TypeCall) else ty
        owner = v.constructor.belong_to if isinstance(v, ConstructorValue) else None
        if owner is None or getattr(owner, "name_hint", None) != getattr(adt, "name_hint", None):
            raise TVMError(f"{where}: expected a {type_text(adt)} value, got {describe_value(v)}")
    elif isinstance(ty, FuncType) and not isinstance(v, (Closure, Op, Constructor)):
        raise TVMError(f"{where}: expected a function, got {describe_value(v)}")
    elif isinstance(ty, RelayRefType) and not isinstance(v, RefValue):
        raise TVMError(f"{where}: expected a reference, got {describe_value(v)}")


def convert_args(func: Function, args: Sequence[Any], kwargs: Mapping[str, Any],
                 fn_name: str, evaluate: Callable[[RelayExpr], Any] | None = None) -> list[Any]:
    """Match positional and keyword arguments to ``func``'s parameters; convert and check."""
    params = func.params
    names = [p.name_hint for p in params]
    if len(args) > len(params):
        raise TVMError(f"{fn_name}: expected {len(params)} argument(s) ({_param_names(params)}), "
                       f"got {len(args) + len(kwargs)}")
    slots: list[Any] = list(args) + [_UNSET] * (len(params) - len(args))
    for key, value in kwargs.items():
        if key not in names:
            raise TVMError(f"{fn_name}: no parameter named {key!r}; parameters are "
                           f"{_param_names(params)}")
        i = names.index(key)
        if slots[i] is not _UNSET:
            raise TVMError(f"{fn_name}: argument {key!r} given twice")
        slots[i] = value
    missing = [n for n, s in zip(names, slots) if s is _UNSET]
    if missing:
        raise TVMError(f"{fn_name}: expected {len(params)} argument(s) ({_param_names(params)}), "
                       f"got {len(params) - len(missing)}; missing {', '.join(missing)}")
    dims: dict[ShapeVar, int] = {}
    out = []
    for p, x in zip(params, slots):
        ty = p.checked_type_ if p.checked_type_ is not None else p.type_annotation
        where = f"{fn_name}: argument {p.name_hint!r}"
        value = to_value(x, ty, where, evaluate)
        check_value(value, ty, where, dims)
        out.append(value)
    return out


_UNSET = object()
