"""PackedFunc: one callable type for Python functions and compiled C functions.

``PackedFunc(f)`` wraps a Python callable; ``CPackedFunc`` wraps a C function with the
PackedFunc signature (see ``ember/include/ember/c_packed_func.h``). Both check and convert
their arguments the same way: what cannot cross the FFI raises TypeError naming the argument
position and type; lists, tuples and dicts become ``Array``/``Map``; callables become
PackedFuncs.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

import numpy as np

from . import _bridge
from ._bridge import FLOAT, INT, NULL, ArgBuffer, pack_arg, raise_error, unpack
from .device import Device
from .dtype import DataType
from .ndarray import NDArray
from .object import Object

# Argument and return types a Python-backed PackedFunc passes through unchanged.
_PASS: set[type] = {int, float, bool, str, bytes, type(None), NDArray, DataType, Device}
_FAST_CAP = 8  # arguments that fit the per-function preallocated buffer
_HANDLE_CODES = (_bridge.OBJECT, _bridge.MODULE, _bridge.FUNC, _bridge.OBJECT_RV)


class PackedFunc:
    """A type-erased function: call it with any number of FFI-compatible arguments.

    ``PackedFunc(f, name)`` wraps a Python callable. Arguments are converted as for a
    compiled function (see ``convert``), so a function behaves the same whether it is
    called from Python or from C.
    """

    __slots__ = ("_func", "name", "__weakref__")

    def __init__(self, func: Callable[..., Any] | None, name: str | None = None) -> None:
        self._func = func
        self.name = name or getattr(func, "__name__", None) or "<packed function>"

    def __call__(self, *args: Any) -> Any:
        for a in args:
            if type(a) not in _PASS:
                args = tuple(_convert(x, self.name, i) for i, x in enumerate(args))
                break
        result = self._func(*args)  # type: ignore[misc]
        return result if type(result) in _PASS else _convert(result, self.name, None)

    def __repr__(self) -> str:
        return f"PackedFunc({self.name})"


class CPackedFunc(PackedFunc):
    """A compiled C function with the PackedFunc signature, called through ctypes.

    The hot path reuses one preallocated argument buffer per function; a re-entrant call
    (a callback calling the same function) or a concurrent one from another thread takes a
    fresh buffer instead, detected with a non-blocking lock.
    """

    __slots__ = ("_cfn", "_lock", "_buf", "_take_error", "_owner", "address", "_time_loop")

    def __init__(self, cfn: Any, name: str, take_error: Callable[[], bytes | None],
                 owner: Any = None, address: int = 0, time_loop: Any = None) -> None:
        super().__init__(None, name)
        # argtypes deliberately unset: the arguments are always ctypes arrays, a Python int and
        # None, which ctypes passes as pointers/int without a per-call conversion step (~40%
        # cheaper than c_void_p argtypes).
        cfn.argtypes = None
        cfn.restype = ctypes.c_int
        self._cfn = cfn
        self._lock = threading.Lock()
        self._buf = ArgBuffer(_FAST_CAP)
        self._take_error = take_error
        self._owner = owner  # keeps the library (module) alive
        self.address = address
        self._time_loop = time_loop

    def __call__(self, *args: Any) -> Any:
        # The hot path is written out in full (no helper call): it is most of the cost of
        # calling a compiled operator with NDArrays. _invoke below is the same for a fresh buffer.
        if len(args) > _FAST_CAP or not self._lock.acquire(False):
            return self._invoke(ArgBuffer(max(len(args), 1)), args)
        buf = self._buf
        vals, codes, ret_code = buf.vals, buf.codes, buf.ret_code
        i = 0
        try:
            for a in args:
                if type(a) is NDArray:
                    vals[i] = a._dl_addr
                    codes[i] = 7
                else:
                    pack_arg(buf, i, a, self.name)
                i += 1
            ret_code[0] = NULL
            if self._cfn(vals, codes, i, buf.ret, ret_code, None):
                raise_error(self._take_error, self.name)
            code = ret_code[0]
            if code == NULL:
                return None
            if code == INT:
                return buf.ret[0]
            return buf.retd[0] if code == FLOAT else self._unpack_ret(code, buf.ret[0], args)
        finally:
            if buf.keep or buf.handles:
                buf.release()
            self._lock.release()

    def _invoke(self, buf: ArgBuffer, args: tuple[Any, ...]) -> Any:
        vals, codes, ret_code = buf.vals, buf.codes, buf.ret_code
        try:
            for i, a in enumerate(args):
                pack_arg(buf, i, a, self.name)
            ret_code[0] = NULL
            if self._cfn(vals, codes, len(args), buf.ret, ret_code, None):
                raise_error(self._take_error, self.name)
            code = ret_code[0]
            if code == NULL:
                return None
            if code == INT:
                return buf.ret[0]
            return buf.retd[0] if code == FLOAT else self._unpack_ret(code, buf.ret[0], args)
        finally:
            buf.release()

    @staticmethod
    def _unpack_ret(code: int, v: int, args: tuple[Any, ...]) -> Any:
        if code in (_bridge.DLTENSOR, _bridge.NDARRAY):
            for a in args:  # a function returning one of its arguments gets that NDArray back
                if isinstance(a, NDArray) and a._dl_addr == v:
                    return a
        value = unpack(code, v)
        if code in _HANDLE_CODES:
            _bridge.free_handle(v)  # a returned handle is owned by the receiver: us
        return value

    def time_loop(self, args: tuple[Any, ...]) -> Callable[[int], float] | None:
        """``run(number) -> seconds`` calling this function ``number`` times from C."""
        if self._time_loop is None:
            return None
        buf = ArgBuffer(max(len(args), 1))
        for i, a in enumerate(args):
            pack_arg(buf, i, a, self.name)
        out = ctypes.c_double()

        def run(number: int) -> float:
            if self._time_loop(self.address, buf.vals, buf.codes, len(args), number,
                               ctypes.byref(out)):
                raise_error(self._take_error, self.name)
            return out.value

        run.buffer = buf  # type: ignore[attr-defined]  # keeps packed strings alive
        return run

    def __repr__(self) -> str:
        return f"PackedFunc({self.name}, compiled, {self.address:#x})"


# ---- conversion of Python values -------------------------------------------------------------
def _array(items: list[Any]) -> Any:
    try:
        from .container import Array
    except ImportError:  # pragma: no cover - before containers exist lists stay lists
        return items
    return Array(items)


def _map(d: dict[Any, Any]) -> Any:
    try:
        from .container import Map
    except ImportError:  # pragma: no cover
        return d
    return Map(d)


def _convert(value: Any, fname: str | None, pos: int | None) -> Any:
    t = type(value)
    if t in _PASS or isinstance(value, (NDArray, Object, PackedFunc, DataType, Device)):
        return value
    if t in (list, tuple):
        return _array([_convert(v, fname, pos) for v in value])
    if t is dict:
        return _map({_convert(k, fname, pos): _convert(v, fname, pos) for k, v in value.items()})
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (str, bytes, int, float)):
        return value  # subclasses, e.g. IntEnum members
    if any(isinstance(value, k) for k in _EXTRA_PASS):
        return value
    if callable(value):
        return PackedFunc(value)
    where = "return value" if pos is None else f"argument {pos}"
    raise TypeError(f"{fname}: {where} has type {t.__module__}.{t.__qualname__}, which cannot be "
                    "passed to a PackedFunc (expected int, float, bool, str, bytes, None, "
                    "DataType, Device, NDArray, Module, PackedFunc, a callable, an Object, or "
                    "a list/tuple/dict of those)")


_EXTRA_PASS: list[type] = []  # e.g. Module, added by module.py


def register_pass_type(cls: type, code: int) -> None:
    """Let instances of ``cls`` pass through Python PackedFuncs and travel to C as handles."""
    _EXTRA_PASS.append(cls)
    _PASS.add(cls)
    _bridge.register_arg_type(cls, code)


def convert(value: Any) -> Any:
    """``value`` as an FFI value: list/tuple -> Array, dict -> Map, callable -> PackedFunc,
    numpy scalars -> Python numbers; FFI values unchanged. TypeError for anything else."""
    return _convert(value, "convert", 0)


def as_packed_func(f: Callable[..., Any], name: str | None = None) -> PackedFunc:
    """``f`` itself if it is a PackedFunc, else a PackedFunc wrapping it."""
    return f if isinstance(f, PackedFunc) else PackedFunc(f, name)


_bridge._packed_func_type = PackedFunc
_bridge.register_arg_type(PackedFunc, _bridge.FUNC)
_PASS.update((PackedFunc, CPackedFunc))
