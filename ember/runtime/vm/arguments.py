"""The VM's arguments: binding positional and named values to parameters, and converting each
to a VM value after checking it against the parameter's declared type.

A tensor parameter (``TensorInfo``) takes what every executor takes (``executor_common``: an
NDArray, a numpy array or a Python number / nested list, exact dtype for arrays, lossless
conversion for Python values, the declared shape with ``?`` extents free). An NDArray of the
right type is used as it is (no copy); anything else is copied into a new NDArray *after* the
check, so no allocation is ever sized by an unchecked argument. A list-typed parameter
(``ListInfo``) takes a Python list; an untyped one (tuples, closures) any VM value.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..container import ADT, Array, tuple_object
from ..errors import ArgumentError, ArgumentTypeError
from ..executor_common import input_array
from ..ndarray import NDArray, array
from .program import ListInfo, TensorInfo, VMFunction
from .steps import VMClosure


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()
_SCALAR_DTYPES = ((bool, "bool"), (int, "int32"), (float, "float32"))


def bind(func: VMFunction, args: Sequence[Any], kwargs: Mapping[str, Any], where: str
         ) -> list[Any]:
    """Positional and named arguments in parameter order (names fill their slots, the
    positional ones fill the rest in order), as in the Relay-era ``set_input``."""
    slots: list[Any] = [UNSET] * func.arity
    for name, value in kwargs.items():
        if name not in func.params:
            raise ArgumentError(f"{where}: no parameter named {name!r}; its parameters are "
                                f"{', '.join(map(repr, func.params)) or '(none)'}")
        slots[func.params.index(name)] = value
    free = [i for i, v in enumerate(slots) if v is UNSET]
    if len(args) != len(free):
        named = f" and {len(kwargs)} named" if kwargs else ""
        raise ArgumentError(f"{where}: expected {func.arity} arguments "
                            f"({', '.join(func.params)}), got {len(args)}{named}")
    for i, value in zip(free, args):
        slots[i] = value
    return slots


def convert_all(func: VMFunction, values: Sequence[Any], where: str) -> list[Any]:
    """Every argument checked and converted (see the module docstring)."""
    return [convert(func, i, v, f"{where}: argument {i} ({func.params[i]})")
            for i, v in enumerate(values)]


def convert(func: VMFunction, i: int, value: Any, what: str) -> Any:
    """Argument ``i`` of ``func`` as a VM value; ``what`` starts the error messages."""
    ty = func.param_types[i] if func.param_types else None
    if isinstance(ty, TensorInfo):
        src = input_array(value, ty.dtype, ty.shape, what)
        return value if isinstance(value, NDArray) else array(src, dtype=ty.dtype)
    if isinstance(ty, ListInfo):
        if not isinstance(value, (list, tuple, ADT)):
            raise ArgumentTypeError(f"{what}: expected a list, got {type(value).__name__}")
        if isinstance(value, ADT):
            return value
        return ty.to_adt(value, lambda x: to_value(x, f"{what} element"))
    return to_value(value, what)


def to_value(arg: Any, where: str) -> Any:
    """An untyped argument as a VM value: NDArray, ADT or closure (numbers and arrays are
    copied; Python ints are int32 and floats float32, as the Relay-era VM made them)."""
    if isinstance(arg, (NDArray, ADT, VMClosure)):
        return arg
    if isinstance(arg, (np.ndarray, np.generic)):
        try:
            return array(np.asarray(arg))
        except (TypeError, ValueError) as err:
            raise ArgumentTypeError(f"{where}: {err}") from None
    for kind, dtype in _SCALAR_DTYPES:
        if isinstance(arg, kind):
            try:
                return array(np.array(arg, dtype=dtype))
            except OverflowError:
                raise ArgumentError(f"{where}: {arg} does not fit in {dtype}") from None
    if isinstance(arg, (tuple, list, Array)):
        return tuple_object([to_value(a, f"{where}[{i}]") for i, a in enumerate(arg)])
    raise ArgumentTypeError(f"{where}: cannot pass a {type(arg).__name__} to the VM (expected "
                            "an NDArray, numpy array, number, tuple/list or ADT)")


def summary(value: Any) -> str:
    """A value in one line, for messages: ``float32[2, 3]``, ``ADT(tag=0, 2 fields)``."""
    if isinstance(value, NDArray):
        return str(TensorInfo(value.dtype, value.shape)).replace("?", "-1")
    if isinstance(value, ADT):
        return f"ADT(tag={value.tag}, {len(value.fields)} fields)"
    return "an empty register" if value is None else repr(value)


def dynamic_arguments(func: VMFunction, args: Sequence[Any]) -> list[str]:
    """``a = float32[1, 3, 1, 1] (declared float32[1, 3, ?, ?])`` for each argument whose
    declared type leaves something to run time: where a shape error can come from."""
    types: Sequence[Any] = func.param_types or (None,) * len(args)
    lines = []
    for name, value, ty in zip(func.params, args, types):
        if ty is None or (isinstance(ty, TensorInfo) and any(d < 0 for d in ty.shape)):
            declared = f" (declared {ty})" if ty is not None else ""
            lines.append(f"{name} = {summary(value)}{declared}")
    return lines


def checked_key(func: VMFunction, key: Any, where: str) -> int:
    """The parameter index of ``key`` (a name or a non-negative index)."""
    from ..executor_common import Inputs, InputSpec

    return Inputs([InputSpec(p, None) for p in func.params]).slot(key, where)


__all__ = ["UNSET", "bind", "checked_key", "convert", "convert_all",
           "dynamic_arguments", "summary", "to_value"]
