"""What the executors share of the module-based interface: naming inputs, checking the values
given for them, output indices, devices and benchmark arguments, and the user-facing wrapper
class (``GraphModule``, ``AotModule``) that delegates to an executor Module.

Every check here only reads its arguments: an executor validates a whole call first and
changes its state after, so a rejected call leaves it as it was. Messages name the call, the
input (name and index), what was expected and what was given::

    set_input('data'): expected float32[1, 3, 224, 224], got float64[1, 3, 224, 224] (input 0
    of 2)

Conversion rules (``input_array``), the same for every executor:

- NDArray, numpy array or anything with ``__array__``: the dtype must be the input's exactly
  (a byte-swapped equal dtype is accepted); any strides, read-only and broadcast (zero-stride)
  views are fine, as the value is only read. An NDArray must be in host memory (a CPU device;
  every CPU device id is the same memory).
- Python numbers and nested lists carry no dtype: they take the input's, if that loses
  nothing (no float into an integer input, no integer out of the dtype's range, no finite float
  that overflows). ``str``, ``bytes``, ``None``, dicts and other objects are refused.
- The shape must match exactly: a smaller array is never broadcast.
"""
from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .device import Device, cpu
from .errors import ArgumentError, ArgumentIndexError, ArgumentTypeError, TVMError
from .module import Module
from .ndarray import NDArray, _parse_dtype
from .packed_func import CPackedFunc, PackedFunc

DLTENSOR_CODE = 7  # kTVMDLTensorHandle
KDL_CPU = 1
# The names the executors used before the shared classes; callers may catch either.
GraphInputError = ArgumentError
GraphIndexError = ArgumentIndexError


def type_str(dtype: str, shape: Sequence[int]) -> str:
    """``float32[1, 3, 224, 224]`` (``?`` for an extent known at run time only)."""
    return f"{dtype}[{', '.join('?' if d < 0 else str(d) for d in shape)}]"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def is_index(key: Any) -> bool:
    """Whether ``key`` is an integer index (bools are not)."""
    return isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_))


@dataclass(frozen=True)
class InputSpec:
    """An input's name and type; ``dtype`` None means "any value" (a VM parameter of a
    non-tensor type), a ``-1`` extent "any size"."""

    name: str
    dtype: str | None
    shape: tuple[int, ...] = ()

    def __str__(self) -> str:
        return "a value" if self.dtype is None else type_str(self.dtype, self.shape)


class Inputs:
    """The inputs of an executor, in order: resolves names and indices, checks values.

    Negative indices are refused (``IndexError``), as a C executor would: ``-1`` is far more
    often a bug than a request for the last input.
    """

    def __init__(self, specs: Sequence[InputSpec]) -> None:
        self.specs = list(specs)
        self.index = {s.name: k for k, s in enumerate(self.specs)}
        # (numpy dtype, storage shape) of each fully known tensor input: the fast path of
        # ``check`` for the common value, an array of exactly that type.
        self._exact = [_exact_type(s) for s in self.specs]

    def __len__(self) -> int:
        return len(self.specs)

    def names(self) -> str:
        return ", ".join(repr(s.name) for s in self.specs) or "(none)"

    def slot(self, key: Any, where: str) -> int:
        """The index of input ``key`` (a name or an index)."""
        if isinstance(key, str):
            k = self.index.get(key)
            if k is None:
                raise ArgumentError(f"{where}: no input named {key!r}; this model's inputs are "
                                    f"{self.names()}")
            return k
        if is_index(key):
            if not 0 <= key < len(self.specs):
                raise ArgumentIndexError(f"{where}: input index {key} out of range (this model "
                                         f"has {plural(len(self.specs), 'input')})")
            return int(key)
        raise ArgumentTypeError(f"{where}: inputs are named by str or int, got "
                                f"{type(key).__name__}")

    def label(self, k: int, where: str) -> str:
        """``set_input('data')``: the call and the input, for messages."""
        return f"{where}({self.specs[k].name!r})"

    def suffix(self, k: int) -> str:
        return f" (input {k} of {len(self.specs)})"

    def check(self, k: int, value: Any, where: str) -> np.ndarray | Any:
        """``value`` checked for input ``k``: a numpy array of its dtype and shape (maybe a
        view of ``value``), or ``value`` itself for an untyped input."""
        exact = self._exact[k]
        if exact is not None:
            if type(value) is np.ndarray and value.dtype == exact[0] and value.shape == exact[1]:
                return value
            if (type(value) is NDArray and value._np.dtype == exact[0]
                    and value._np.shape == exact[1] and value._device.device_type == KDL_CPU
                    and value._dtype.lanes == exact[2]):
                return value._np
        spec = self.specs[k]
        if spec.dtype is None:
            return value
        try:
            return input_array(value, spec.dtype, spec.shape, self.label(k, where))
        except TVMError as err:
            raise type(err)(f"{err}{self.suffix(k)}") from None

    def check_call(self, key: Any, value: Any, params: Mapping[str, Any], where: str
                   ) -> list[tuple[int, Any]]:
        """``set_input(key, value, **params)`` checked whole: ``[(index, checked value)]``."""
        if not params and key is not None:  # one input: the common call
            k = self.slot(key, where)
            return [(k, self.check(k, value, where))]
        items: list[tuple[Any, Any]] = list(params.items())
        if key is not None:
            items.insert(0, (key, value))
        elif value is not None:
            raise ArgumentError(f"{where}: a value was given without an input name or index")
        out: list[tuple[int, Any]] = []
        seen: set[int] = set()
        for name, val in items:
            k = self.slot(name, where)
            if k in seen:
                raise ArgumentError(f"{self.label(k, where)}: input given twice{self.suffix(k)}")
            seen.add(k)
            out.append((k, self.check(k, val, where)))
        return out


def _exact_type(spec: InputSpec) -> tuple[np.dtype, tuple[int, ...], int] | None:
    """(numpy dtype, storage shape, lanes) of a tensor input with no ``?`` extent."""
    if spec.dtype is None or any(d < 0 for d in spec.shape):
        return None
    dt, lane = _parse_dtype(spec.dtype)
    return lane, tuple(spec.shape) + ((dt.lanes,) if dt.lanes > 1 else ()), dt.lanes


def input_array(value: Any, dtype: str, shape: Sequence[int], what: str) -> np.ndarray:
    """``value`` as a numpy array of ``dtype`` and ``shape`` (``-1`` = any extent) without a
    lossy conversion, following the rules of the module docstring; the array may be a view
    of ``value``. Raises ArgumentError / ArgumentTypeError starting with ``what``."""
    dt, lane = _parse_dtype(dtype)
    want = tuple(shape) + ((dt.lanes,) if dt.lanes > 1 else ())
    if isinstance(value, NDArray):
        if value.device.device_type != KDL_CPU:
            raise ArgumentError(f"{what}: the array is on {value.device}; ember runs on the CPU, "
                                f"copy it to cpu(0) first")
        src, got_dtype = value._np, value._dtype == dt
    elif isinstance(value, (np.ndarray, np.generic)) or _array_like(value):
        src = _as_numpy(value, what)
        got_dtype = src.dtype == lane or src.dtype.newbyteorder("=") == lane
    elif isinstance(value, (bool, int, float, list, tuple)):
        src = _from_python(value, dtype, lane, what)
        got_dtype = True
    else:
        raise ArgumentTypeError(f"{what}: expected an array (NDArray, numpy array, number or "
                                f"nested list) for {type_str(dtype, shape)}, got "
                                f"{type(value).__name__}")
    if not got_dtype or not _shape_matches(src.shape, want):
        got = (value.dtype, value.shape) if isinstance(value, NDArray) else \
            (dtype if isinstance(value, (bool, int, float, list, tuple)) else src.dtype,
             src.shape)
        raise ArgumentError(f"{what}: expected {type_str(dtype, shape)}, got "
                            f"{type_str(str(got[0]), got[1])}")
    return src


def _array_like(value: Any) -> bool:
    return hasattr(value, "__array__") or hasattr(value, "__array_interface__")


def _as_numpy(value: Any, what: str) -> np.ndarray:
    try:
        src = np.asarray(value)
    except Exception as err:  # noqa: BLE001  (a foreign __array__ may raise anything)
        raise ArgumentTypeError(f"{what}: cannot read {type(value).__name__} as an array: "
                                f"{err}") from None
    if src.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"{what}: cannot use an array of {src.dtype} as a tensor")
    return src


def _shape_matches(got: tuple[int, ...], want: tuple[int, ...]) -> bool:
    return len(got) == len(want) and all(w < 0 or w == g for g, w in zip(got, want))


def _from_python(value: Any, dtype: str, lane: np.dtype, what: str) -> np.ndarray:
    """Python numbers / nested lists converted to ``lane`` only when nothing is lost."""
    try:
        natural = np.asarray(value)
    except (ValueError, TypeError) as err:  # ragged lists
        raise ArgumentError(f"{what}: cannot convert the {type(value).__name__} to {dtype}: "
                            f"{err}") from None
    kind = natural.dtype.kind
    if natural.dtype == object and natural.size and all(type(x) is int for x in natural.flat):
        raise ArgumentError(f"{what}: integer values out of the range of {dtype}")
    if kind not in "biuf":
        raise ArgumentTypeError(f"{what}: cannot convert a {type(value).__name__} of "
                                f"{_kind_name(natural)} to {dtype}")
    if kind == "f" and lane.kind in "biu":
        raise ArgumentError(f"{what}: float values would be truncated to {dtype}; "
                            f"pass integers or a numpy array of {dtype}")
    with np.errstate(all="ignore"):
        out = natural.astype(lane)
    if kind in "iu" and not np.array_equal(out.astype(natural.dtype), natural):
        raise ArgumentError(f"{what}: integer values out of the range of {dtype} (or not exact "
                            f"in it)")
    if kind == "f" and not np.array_equal(np.isfinite(out), np.isfinite(natural)):
        raise ArgumentError(f"{what}: float values overflow {dtype}")
    return out


def _kind_name(arr: np.ndarray) -> str:
    if arr.dtype.kind in "US":
        return "strings"
    if arr.dtype == object:
        items = {type(x).__name__ for x in arr.flat} if arr.size else {"objects"}
        return "/".join(sorted(items))
    return str(arr.dtype)


def check_output_index(index: Any, count: int, where: str = "get_output") -> int:
    """``index`` as an int in ``[0, count)``, else ArgumentTypeError / ArgumentIndexError."""
    if not is_index(index):
        raise ArgumentTypeError(f"{where}: index must be an int, got {type(index).__name__}")
    if not 0 <= index < count:
        raise ArgumentIndexError(f"{where}: index {index} out of range (this model has "
                                 f"{plural(count, 'output')})")
    return int(index)


def check_out(out: Any, like: NDArray, what: str) -> NDArray:
    """``out=`` of ``get_output``/``get_input``: an NDArray of ``like``'s dtype and shape."""
    if not isinstance(out, NDArray):
        raise ArgumentTypeError(f"{what}: out must be an NDArray, got {type(out).__name__}")
    if out._dtype != like._dtype or out.shape != like.shape:
        raise ArgumentError(f"{what}: out is {type_str(out.dtype, out.shape)}, expected "
                            f"{type_str(like.dtype, like.shape)}")
    if not out._np.flags.writeable:
        raise ArgumentError(f"{what}: out is read-only")
    return out


def one_device(dev: Any, who: str) -> Device:
    """The one CPU device an executor runs on: ``dev``, or a list holding only it."""
    if dev is None:
        return cpu(0)
    if isinstance(dev, (list, tuple)):
        if len(dev) != 1:
            raise ArgumentError(f"{who}: runs on one device, got {len(dev)}: {list(dev)}")
        dev = dev[0]
    if not isinstance(dev, Device):
        raise ArgumentTypeError(f"{who}: expected a Device (e.g. ember.cpu(0)), got "
                                f"{type(dev).__name__}")
    try:
        dev.check_supported()
    except TVMError as err:
        raise ArgumentError(f"{who}: {err}") from None
    return dev


def check_timing(number: Any, repeat: Any, min_repeat_ms: Any, where: str) -> None:
    """The counts of ``benchmark``/``run_individual``: positive ints and a duration >= 0."""
    for name, value in (("number", number), ("repeat", repeat)):
        if not is_index(value):
            raise ArgumentTypeError(f"{where}: {name} must be an int, got {type(value).__name__}")
        if value < 1:
            raise ArgumentError(f"{where}: {name} must be >= 1, got {value}")
    if min_repeat_ms is not None:
        if isinstance(min_repeat_ms, bool) or not isinstance(min_repeat_ms, (int, float,
                                                                             np.number)):
            raise ArgumentTypeError(f"{where}: min_repeat_ms must be a number, got "
                                    f"{type(min_repeat_ms).__name__}")
        if not (math.isfinite(min_repeat_ms) and min_repeat_ms >= 0):
            raise ArgumentError(f"{where}: min_repeat_ms must be >= 0, got {min_repeat_ms}")


def check_name(name: Any, where: str) -> str:
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{where}: expected a name (str), got {type(name).__name__}")
    return name


class PlannedCall(ctypes.Structure):
    """``EmberPlannedCall`` of backend.c: a packed call with its argument arrays."""

    _fields_ = [("func", ctypes.c_void_p), ("args", ctypes.c_void_p),
                ("codes", ctypes.c_void_p), ("num_args", ctypes.c_int32)]


class CPlan:
    """One C call (``EmberRunCalls``) that makes the planned calls in order: ``plan()``
    returns 0, or -1 - the index of the call that failed. ``written``: the addresses of the
    DLTensors the calls write (their outputs), where the executor tells them (None: unknown);
    a model call writes its outputs straight into the caller's arrays only where known."""

    __slots__ = ("_calls", "_count", "_failed", "_funcs", "_runner", "_table", "lib", "written")

    def __init__(self, runner: Any, funcs: Sequence[CPackedFunc],
                 calls: Sequence[functools.partial[int]], lib: Any = None,
                 written: frozenset[int] | None = None) -> None:
        table = (PlannedCall * max(len(calls), 1))()
        for slot, func, call in zip(table, funcs, calls):
            vals, codes, n = call.args[:3]
            slot.func, slot.num_args = func.address, n
            slot.args, slot.codes = ctypes.addressof(vals), ctypes.addressof(codes)
        self._runner, self._table, self._count = runner, table, len(calls)
        self._failed = (ctypes.c_int32 * 1)()
        self._calls = calls  # the table points into their argument arrays
        self._funcs = list(funcs)  # and at the functions: their library stays loaded
        self.lib = lib  # the ctypes handle of the library whose EmberRunCalls this is
        self.written = written

    def __call__(self) -> int:
        if self._runner(self._table, self._count, self._failed) == 0:
            return 0
        return -1 - int(self._failed[0])


def c_plan(funcs: Sequence[CPackedFunc], calls: Sequence[functools.partial[int]],
           written: frozenset[int] | None = None) -> CPlan | None:
    """A CPlan of ``calls`` (from ``c_call``, of ``funcs``; ``written``: see CPlan); None
    when the library lacks ``EmberRunCalls`` (built before it existed)."""
    lib = getattr(funcs[0]._owner, "_lib", None) if funcs else None
    runner = getattr(lib, "EmberRunCalls", None)
    if runner is None or any(not f.address for f in funcs):
        return None
    runner.argtypes = None
    runner.restype = ctypes.c_int
    return CPlan(runner, funcs, calls, lib, written)


def c_call(func: CPackedFunc, args: Sequence[NDArray]) -> Callable[[], int]:
    """A no-argument call of compiled ``func`` on ``args``: arrays packed once, here."""
    return c_call_at(func, [a._dl_addr for a in args])


def c_call_at(func: CPackedFunc, addresses: Sequence[int]) -> functools.partial[int]:
    """``c_call`` on DLTensors given by address (they must outlive the call)."""
    n = len(addresses)
    vals = (ctypes.c_int64 * max(n, 1))(*addresses)
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
            raise ArgumentTypeError(f"{type(self).__name__}: expected {self.kind} Module, got "
                                    f"{type(module).__name__}")
        self.module: Module = module

    def __getattr__(self, name: str) -> Any:
        # Delegation rather than ten wrappers.
        if name.startswith("__") or name == "module":
            raise AttributeError(name)
        mod = self.__dict__.get("module")
        if isinstance(mod, self.executor_type) or hasattr(type(mod), name):
            value = getattr(mod, name)
            if callable(value) and not name.startswith("_"):
                # The executor's bound method, kept: later calls skip this lookup (set_input,
                # run and get_output are per-call paths).
                self.__dict__[name] = value
            return value
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


__all__ = ["ExecutorWrapper", "InputSpec", "Inputs", "c_call", "c_call_at", "check_name",
           "check_out", "check_output_index", "check_timing", "input_array", "one_device",
           "plural", "type_str"]
