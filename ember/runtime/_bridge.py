"""The ctypes bridge between Python values and the C PackedFunc ABI.

- ``ArgBuffer``: preallocated TVMValue/type-code arrays for one call.
- packers (Python value -> TVMValue + code) and unpackers (the reverse), dispatched on
  ``type(value)`` / the type code through dicts, not isinstance ladders.
- the handle table: Python objects handed to C (PackedFunc, Module, Object) travel as
  integer handles that index ``_HANDLES``; an unknown handle is an error, never a crash.
- the host table: C function pointers (ctypes callbacks, kept alive here forever) that
  backend.c calls to look up functions, call Python, free handles and load modules.
- error transport: a Python exception raised in a callback called from C is stored per
  thread, reported to C as "<TypeName>: <msg>", and re-raised (the original object) by the
  Python caller that sees the failure come back.
"""
from __future__ import annotations

import ctypes
import itertools
import struct
import threading
import weakref
from ctypes import POINTER, c_char_p, c_double, c_int, c_int32, c_int64, c_void_p
from typing import Any, Callable

import numpy as np

from ._abi import ArgTypeCode, DLTensor, TVMByteArray
from .device import Device
from .dtype import DataType
from . import errors
from .errors import TVMError, add_note
from .ndarray import NDArray, from_dltensor_address
from .object import Object

INT, UINT, FLOAT, HANDLE, NULL = 0, 1, 2, 3, 4
DTYPE, DEVICE, DLTENSOR, OBJECT, MODULE, FUNC, STR, BYTES, NDARRAY, OBJECT_RV = range(5, 15)
assert (DEVICE, STR, OBJECT_RV) == (ArgTypeCode.DEVICE, ArgTypeCode.STR,
                                    ArgTypeCode.OBJECT_RVALUE_REF_ARG), "_abi.py out of step"
# Lookup flags of EmberHostTable.get_function (backend.c).
LOOKUP_SELF, LOOKUP_IMPORTS, LOOKUP_GLOBAL, LOOKUP_ENV = 1, 2, 4, 8
HOST_TABLE_VERSION = 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_Q = struct.Struct("=q")
_D = struct.Struct("=d")
_DT = struct.Struct("=BBH4x")  # DLDataType in the low 4 bytes of a TVMValue
_DEV = struct.Struct("=ii")  # DLDevice fills the 8 bytes


def _f64_bits(x: float) -> int:
    bits: int = _Q.unpack(_D.pack(x))[0]
    return bits


def _bits_f64(v: int) -> float:
    x: float = _D.unpack(_Q.pack(v))[0]
    return x


# ---- the handle table ---------------------------------------------------------------------
_HANDLES: dict[int, Any] = {}
_PERMANENT: set[int] = set()
_next_handle = itertools.count(0x1000).__next__  # never 0 (NULL); next() is atomic in CPython


class _WeakEntry:
    """A handle table entry that does not keep its object alive (a library's environment
    module: the table must not stop the module, and so its library, from being freed)."""

    __slots__ = ("ref",)

    def __init__(self, obj: Any) -> None:
        self.ref = weakref.ref(obj)


def new_handle(obj: Any, permanent: bool = False, weak: bool = False) -> int:
    """Enter ``obj`` in the handle table; the integer is what C sees as the handle.
    ``permanent``: ``free_handle`` leaves it (only ``release_handle`` drops it); ``weak``: the
    table holds a weak reference (a lookup after ``obj`` died is an error)."""
    h = _next_handle()
    _HANDLES[h] = _WeakEntry(obj) if weak else obj
    if permanent or weak:
        _PERMANENT.add(h)
    return h


def release_handle(h: int) -> None:
    """Drop a handle, permanent or not (its owner is being freed)."""
    _PERMANENT.discard(h)
    _HANDLES.pop(h, None)


def free_handle(h: int) -> None:
    """Drop one handle (permanent ones, owned by a module, stay)."""
    if h not in _PERMANENT:
        _HANDLES.pop(h, None)


def lookup_handle(h: int | None, what: str) -> Any:
    try:
        obj = _HANDLES[h]  # type: ignore[index]
    except KeyError:
        raise TVMError(f"invalid {what} handle {h!r}: not known to the ember runtime (handles "
                       "passed as arguments are valid only during the call)") from None
    if type(obj) is _WeakEntry:
        obj = obj.ref()
        if obj is None:
            raise TVMError(f"invalid {what} handle {h!r}: the {what} it named was freed")
    return obj


# ---- per-call buffers -----------------------------------------------------------------------
class ArgBuffer:
    """TVMValue (as int64 and float64 views), type-code and return slots for one call."""

    __slots__ = ("cap", "vals", "dvals", "codes", "ret", "retd", "ret_code", "keep", "handles")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.vals = (c_int64 * cap)()
        self.dvals = (c_double * cap).from_buffer(self.vals)
        self.codes = (c_int * cap)()
        self.ret = (c_int64 * 1)()
        self.retd = (c_double * 1).from_buffer(self.ret)
        self.ret_code = (c_int * 1)()
        self.keep: list[Any] = []  # encoded strings etc. that must outlive the call
        self.handles: list[int] = []  # handle-table entries made for this call

    def release(self) -> None:
        self.keep.clear()
        for h in self.handles:
            free_handle(h)
        self.handles.clear()


# ---- Python -> TVMValue ---------------------------------------------------------------------
def _str_addr(b: bytes, keep: list[Any]) -> int:
    p = c_char_p(b)  # points into b's own buffer; keeps b alive
    keep.append(p)
    return ctypes.cast(p, c_void_p).value or 0


def _p_int(buf: ArgBuffer, i: int, v: int) -> None:
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise OverflowError(f"int {v} does not fit in int64")
    buf.vals[i] = v
    buf.codes[i] = INT


def _p_bool(buf: ArgBuffer, i: int, v: Any) -> None:
    buf.vals[i] = 1 if v else 0
    buf.codes[i] = INT


def _p_float(buf: ArgBuffer, i: int, v: Any) -> None:
    buf.dvals[i] = v
    buf.codes[i] = FLOAT


def _p_none(buf: ArgBuffer, i: int, v: None) -> None:
    buf.vals[i] = 0
    buf.codes[i] = NULL


def _p_str(buf: ArgBuffer, i: int, v: str) -> None:
    buf.vals[i] = _str_addr(v.encode("utf-8"), buf.keep)
    buf.codes[i] = STR


def _p_bytes(buf: ArgBuffer, i: int, v: "bytes | bytearray") -> None:
    arr = TVMByteArray(_str_addr(bytes(v), buf.keep), len(v))
    buf.keep.append(arr)
    buf.vals[i] = ctypes.addressof(arr)
    buf.codes[i] = BYTES


def _p_dtype(buf: ArgBuffer, i: int, v: DataType) -> None:
    dl = v.to_dl()
    buf.vals[i] = _Q.unpack(_DT.pack(dl.code, dl.bits, dl.lanes))[0]
    buf.codes[i] = DTYPE


def _p_device(buf: ArgBuffer, i: int, v: Device) -> None:
    buf.vals[i] = _Q.unpack(_DEV.pack(v.device_type, v.device_id))[0]
    buf.codes[i] = DEVICE


def _p_ndarray(buf: ArgBuffer, i: int, v: NDArray) -> None:
    buf.vals[i] = v._dl_addr
    buf.codes[i] = DLTENSOR


def _p_dltensor(buf: ArgBuffer, i: int, v: DLTensor) -> None:
    buf.vals[i] = ctypes.addressof(v)
    buf.codes[i] = DLTENSOR


def _p_voidp(buf: ArgBuffer, i: int, v: c_void_p) -> None:
    buf.vals[i] = v.value or 0
    buf.codes[i] = HANDLE if v.value else NULL


def _handle_packer(code: int) -> Callable[[ArgBuffer, int, Any], None]:
    def pack(buf: ArgBuffer, i: int, v: Any) -> None:
        h = new_handle(v)
        buf.handles.append(h)
        buf.vals[i] = h
        buf.codes[i] = code

    return pack


_p_object = _handle_packer(OBJECT)


def _p_sequence(buf: ArgBuffer, i: int, v: Any) -> None:
    _p_object(buf, i, to_object(v))


def _p_callable(buf: ArgBuffer, i: int, v: Any) -> None:
    _PACKERS[_packed_func_type](buf, i, _packed_func_type(v))


_PACKERS: dict[type, Callable[[ArgBuffer, int, Any], None]] = {
    int: _p_int, bool: _p_bool, float: _p_float, type(None): _p_none, str: _p_str,
    bytes: _p_bytes, bytearray: _p_bytes, DataType: _p_dtype, Device: _p_device,
    NDArray: _p_ndarray, DLTensor: _p_dltensor, c_void_p: _p_voidp, Object: _p_object,
    list: _p_sequence, tuple: _p_sequence, dict: _p_sequence,
    np.bool_: _p_bool, np.float16: _p_float, np.float32: _p_float, np.float64: _p_float,
}
for _t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
    _PACKERS[_t] = lambda buf, i, v: _p_int(buf, i, int(v))
_packed_func_type: Any = None  # set by packed_func.py


def register_arg_type(cls: type, code: int | None = None,
                      packer: Callable[[ArgBuffer, int, Any], None] | None = None) -> None:
    """Teach the FFI to pass instances of ``cls``: as a handle with ``code``, or via ``packer``."""
    _PACKERS[cls] = packer if packer is not None else _handle_packer(code)  # type: ignore[arg-type]


def _find_packer(t: type) -> Callable[[ArgBuffer, int, Any], None] | None:
    # An Object that is also a tuple (ShapeTuple) travels as an object; one that is a str
    # (String) as a string, which is what C code can read.
    if issubclass(t, Object) and not issubclass(t, str):
        _PACKERS[t] = _PACKERS[Object]
        return _p_object
    for base in t.__mro__[1:]:
        if base in _PACKERS and base is not object:
            _PACKERS[t] = _PACKERS[base]  # cache the subclass
            return _PACKERS[t]
    return None


def pack_arg(buf: ArgBuffer, i: int, v: Any, fname: str) -> None:
    """Write argument ``i`` into ``buf``; TypeError/OverflowError name the function and position."""
    t = type(v)
    packer = _PACKERS.get(t) or _find_packer(t)
    if packer is None and callable(v):
        packer = _p_callable  # a plain Python function: wrapped as a PackedFunc
    if packer is None:
        raise TypeError(f"{fname}: argument {i} has type {t.__module__}.{t.__qualname__}, which "
                        "cannot be passed to a PackedFunc (expected int, float, bool, str, bytes, "
                        "None, DataType, Device, NDArray, Module, PackedFunc, a callable, an "
                        "Object, or a list/tuple/dict of those)")
    try:
        packer(buf, i, v)
    except UnicodeEncodeError as err:  # e.g. a lone surrogate; its class needs 5 arguments
        raise ValueError(f"{fname}: argument {i} (str) is not valid UTF-8: {err}") from None
    except (OverflowError, TypeError) as err:
        raise type(err)(f"{fname}: argument {i} ({t.__qualname__}): {err}") from None


def to_object(v: Any) -> Any:
    """Python containers as runtime objects: list/tuple -> Array, dict -> Map (when the
    container module provides them; plain lists/dicts otherwise). Elements are converted too."""
    from . import packed_func

    return packed_func.convert(v)


# ---- TVMValue -> Python ---------------------------------------------------------------------
def _u_tensor(v: int) -> NDArray:
    if not v:
        raise TVMError("received a NULL DLTensor*")
    return from_dltensor_address(v)  # a non-owning view: C owns the memory


def _u_str(v: int) -> str:
    return ctypes.string_at(v).decode("utf-8", "surrogateescape") if v else ""


def _u_bytes(v: int) -> bytes:
    if not v:
        return b""
    arr = TVMByteArray.from_address(v)
    return ctypes.string_at(arr.data, arr.size) if arr.size else b""


def _u_dtype(v: int) -> DataType:
    code, bits, lanes = _DT.unpack(_Q.pack(v))
    return DataType.from_dl(code, bits, lanes)


def _u_device(v: int) -> Device:
    return Device(*_DEV.unpack(_Q.pack(v)))


UNPACKERS: dict[int, Callable[[int], Any]] = {
    INT: lambda v: v, UINT: lambda v: v & 0xFFFFFFFFFFFFFFFF, FLOAT: _bits_f64,
    HANDLE: lambda v: c_void_p(v) if v else None, NULL: lambda v: None, DTYPE: _u_dtype,
    DEVICE: _u_device, DLTENSOR: _u_tensor, NDARRAY: _u_tensor, STR: _u_str, BYTES: _u_bytes,
    OBJECT: lambda v: lookup_handle(v, "object"), OBJECT_RV: lambda v: lookup_handle(v, "object"),
    MODULE: lambda v: lookup_handle(v, "module"), FUNC: lambda v: lookup_handle(v, "function"),
}


def unpack(code: int, v: int) -> Any:
    """The Python value of a TVMValue (given as its 64 raw bits) with type code ``code``."""
    try:
        return UNPACKERS[code](v)
    except KeyError:
        raise TVMError(f"unknown PackedFunc type code {code}") from None


# ---- errors across the boundary -------------------------------------------------------------
_tls = threading.local()
_ERR_MAX = 4095  # backend.c keeps 4096 bytes including the NUL


def _fail(exc: BaseException) -> int:
    """Record a callback's exception for the Python caller and its message for C; -1."""
    msg = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:_ERR_MAX]
    _tls.pending = (exc, msg)
    _tls.err = ctypes.create_string_buffer(msg)
    return -1


def raise_error(take_error: Callable[[], bytes | None], fname: str) -> None:
    """Raise for a failed C call: the original exception if a Python callback caused it (and C
    passed its message through unchanged), else TVMError with the C message."""
    msg = take_error() or b""
    pending = getattr(_tls, "pending", None)
    _tls.pending = None
    # The message check tells a callback failure that C passed on (backend.c's TVMFuncCall
    # copies it verbatim) from a stale one that C handled and then failed for its own reason.
    if pending is not None and msg == pending[1]:
        exc = pending[0]
        # The path it took, one line per C frame (a note, on Python 3.11+).
        add_note(exc, f"(passed up through compiled function {fname})")
        raise exc
    text = msg.decode("utf-8", "replace")
    if not text:
        raise TVMError(f"{fname}: returned an error code without setting an error message "
                       "(call TVMPackedFuncSetLastError before returning nonzero)")
    raise error_from_message(text)


# Builtin exception names a C message may start with, and the ember class (a TVMError that
# is also that builtin) raised for them.
_BUILTIN_KINDS = {"ValueError": "ArgumentError", "TypeError": "ArgumentTypeError",
                  "IndexError": "ArgumentIndexError"}


def error_class(kind: str) -> type[TVMError]:
    """The exception class an error message of kind ``kind`` (``"OpNotImplemented"``,
    ``"tvm.error.InternalError"``, ``"ValueError"``) is raised as: the ember error class of
    that name (ember.error), the TVMError subclass matching a builtin, else TVMError."""
    for prefix in ("tvm.error.", "ember.error."):
        if kind.startswith(prefix):
            kind = kind[len(prefix):]
    cls = getattr(errors, _BUILTIN_KINDS.get(kind, kind), None)
    return cls if isinstance(cls, type) and issubclass(cls, TVMError) else TVMError


def error_from_message(text: str) -> TVMError:
    """The exception for an error message from C: ``"<Kind>: <message>"`` gives the class of
    ``error_class(Kind)``, anything else a TVMError. The message is kept verbatim."""
    head = text.split("\n", 1)[0]
    kind = head.partition(": ")[0].strip() if ": " in head else ""
    cls = error_class(kind) if kind.replace(".", "").isidentifier() else TVMError
    exc = cls.__new__(cls)
    Exception.__init__(exc, text)  # verbatim: no class-specific decoration of the message
    return exc


# ---- the host table -------------------------------------------------------------------------
_GET_FUNCTION = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_int, POINTER(c_void_p))
_FUNC_CALL = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(c_int64), POINTER(c_int), c_int,
                              POINTER(c_int64), POINTER(c_int))
_HANDLE_FREE = ctypes.CFUNCTYPE(c_int, c_void_p)
_LAST_ERROR = ctypes.CFUNCTYPE(c_void_p)
_LOAD_MODULE = ctypes.CFUNCTYPE(c_int, c_char_p, c_char_p, POINTER(c_void_p))


class EmberHostTable(ctypes.Structure):
    _fields_ = [("version", c_int32), ("size", c_int32), ("get_function", _GET_FUNCTION),
                ("func_call", _FUNC_CALL), ("handle_free", _HANDLE_FREE),
                ("last_error", _LAST_ERROR), ("load_module", _LOAD_MODULE),
                ("parallel_launch", c_void_p)]


# Hooks filled in by module.py: (module or None, name, flags) -> PackedFunc | None, and
# (path, fmt) -> Module.
HOOKS: dict[str, Callable[..., Any]] = {}


def set_return(value: Any, ret: Any, ret_code: Any) -> None:
    """Write a Python return value into C's ret/ret_code slots. Strings stay alive until the
    next return on this thread; handles are owned by C (release with TVMFuncFree etc.)."""
    buf = ArgBuffer(1)
    pack_arg(buf, 0, value, "return value")
    # The callee's str/bytes (and an NDArray it made) must outlive the return: keep them
    # until the next return on this thread, by which time C has copied what it needs.
    _tls.ret_keep = (value, buf.keep)
    buf.handles.clear()  # C owns them now
    ret_code[0] = buf.codes[0]
    if ret:
        ret[0] = buf.vals[0]


def _host_func_call(h: int, args: Any, codes: Any, n: int, ret: Any, ret_code: Any) -> int:
    try:
        func = _HANDLES.get(h)
        if func is None or type(func) is _WeakEntry:
            func = lookup_handle(h, "function")
        if n:
            result = func(*[args[i] if codes[i] == INT else unpack(codes[i], args[i])
                            for i in range(n)])
        else:
            result = func()
        if ret_code:  # common results written directly; the rest through set_return
            if result is None:
                ret_code[0] = NULL
            elif type(result) is int and _INT64_MIN <= result <= _INT64_MAX and ret:
                ret[0] = result
                ret_code[0] = INT
            elif type(result) is float and ret:
                ret[0] = _f64_bits(result)
                ret_code[0] = FLOAT
            else:
                set_return(result, ret, ret_code)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every error must go back to C as -1
        return _fail(exc)


def _host_get_function(mod_h: int | None, name: bytes, flags: int, out: Any) -> int:
    try:
        mod = None if mod_h is None else lookup_handle(mod_h, "module")
        out[0] = HOOKS["lookup"](mod, name.decode("utf-8", "replace"), flags)
        return 0
    except BaseException as exc:  # noqa: BLE001
        return _fail(exc)


def _host_handle_free(h: int | None) -> int:
    if h is not None:
        free_handle(h)
    return 0


def _host_last_error() -> int:
    err = getattr(_tls, "err", None)
    return ctypes.addressof(err) if err is not None else 0


def _host_load_module(path: bytes, fmt: bytes, out: Any) -> int:
    try:
        out[0] = new_handle(HOOKS["load"](path.decode(), fmt.decode()))
        return 0
    except BaseException as exc:  # noqa: BLE001
        return _fail(exc)


# Module-level, so the ctypes callbacks are never freed while a library can call them.
_CALLBACKS = (_GET_FUNCTION(_host_get_function), _FUNC_CALL(_host_func_call),
              _HANDLE_FREE(_host_handle_free), _LAST_ERROR(_host_last_error),
              _LOAD_MODULE(_host_load_module))
HOST_TABLE = EmberHostTable(HOST_TABLE_VERSION, ctypes.sizeof(EmberHostTable), *_CALLBACKS)
