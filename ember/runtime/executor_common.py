"""What the graph and AOT executors share of the module-based interface: input copying with
its checks, output index checks, error classes, and the user-facing wrapper class
(``GraphModule``, ``AotModule``) that delegates to an executor Module."""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import TVMError
from .module import Module
from .ndarray import NDArray
from .packed_func import CPackedFunc, PackedFunc

DLTENSOR_CODE = 7  # kTVMDLTensorHandle


class GraphInputError(TVMError, ValueError):
    """A bad input: 'set_input('data'): expected float32[1, 3], got float64[1, 3]'."""


class GraphIndexError(TVMError, IndexError):
    """An input or output index out of range; the message names the count."""


def type_str(dtype: str, shape: Sequence[int]) -> str:
    """``float32[1, 3, 224, 224]``: how messages spell a tensor type."""
    return f"{dtype}[{', '.join(str(d) for d in shape)}]"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def copy_input(dst: NDArray, key: str | int, value: Any) -> None:
    """Copy ``value`` into the input tensor ``dst``. Shape and, for arrays, dtype must match
    (no silent casts); lists and scalars carry no dtype and take the input's."""
    if type(value) is NDArray:
        src, same = value._np, value._dtype == dst._dtype
    elif isinstance(value, np.ndarray):
        src, same = value, value.dtype == dst._np.dtype
    else:
        try:
            src, same = np.asarray(value, dtype=dst._np.dtype), True
        except (TypeError, ValueError) as err:
            raise GraphInputError(f"set_input({key!r}): cannot convert {type(value).__name__} "
                                  f"to {dst.dtype}: {err}") from None
    if not same or src.shape != dst._np.shape:
        got = (value.dtype, value.shape) if isinstance(value, NDArray) else (src.dtype, src.shape)
        raise GraphInputError(f"set_input({key!r}): expected {type_str(dst.dtype, dst.shape)}, "
                              f"got {type_str(str(got[0]), got[1])}")
    np.copyto(dst._np, src)


def check_output_index(index: Any, count: int) -> int:
    """``index`` as an int in ``[0, count)``, else a TypeError / GraphIndexError naming it."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"get_output: index must be an int, got {type(index).__name__}")
    if not 0 <= index < count:
        raise GraphIndexError(f"get_output: index {index} out of range (this model has "
                              f"{plural(count, 'output')})")
    return int(index)


def c_call(func: CPackedFunc, args: Sequence[NDArray]) -> Callable[[], int]:
    """A no-argument call of compiled ``func`` on ``args``: arrays packed once, here."""
    n = len(args)
    vals = (ctypes.c_int64 * max(n, 1))(*(a._dl_addr for a in args))
    codes = (ctypes.c_int * max(n, 1))(*([DLTENSOR_CODE] * n))
    ret, ret_code = (ctypes.c_int64 * 1)(), (ctypes.c_int * 1)()
    return functools.partial(func._cfn, vals, codes, n, ret, ret_code, None)


class ExecutorWrapper:
    """``GraphModule(factory["default"](dev))``-style wrapper: its methods are the wrapped
    executor's (``set_input``, ``run``, ``get_output``, ...); any other module (a remote one)
    answers with its packed functions. ``module`` is the wrapped Module."""

    executor_type: type = Module
    kind = "executor"

    def __init__(self, module: Module) -> None:
        if isinstance(module, ExecutorWrapper):
            module = module.module
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}: expected {self.kind} Module, got "
                            f"{type(module).__name__}")
        self.module: Module = module

    def __getattr__(self, name: str) -> Any:
        # Delegation rather than ten wrappers.
        if name.startswith("__") or name == "module":
            raise AttributeError(name)
        mod = self.__dict__.get("module")
        if isinstance(mod, self.executor_type) or hasattr(type(mod), name):
            return getattr(mod, name)
        try:
            return mod.get_function(name)  # type: ignore[union-attr]
        except AttributeError:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}") from None

    def __getitem__(self, name: str) -> PackedFunc:
        return self.module[name]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.module!r})"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self.module)))
