"""Payload encoding: fixed-width little-endian fields and tagged values (``docs/rpc.md``).

A value is a one-byte tag followed by its fields. Scalars, strings, bytes, devices, dtypes,
arrays by value, lists, maps and ADTs are encoded here; handles (server objects the other
side refers to by number) are written and read through a ``Side``: the client turns an array
handle into a RemoteNDArray, the server turns one into the array it stored. Decoding checks
every length against the bytes left and bounds nesting, so hostile payloads raise
ProtocolError and never exhaust memory or the stack.
"""
from __future__ import annotations

import enum
import math
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..container import ADT, Array, Map
from ..device import Device
from ..dtype import DataType
from ..ndarray import NDArray, _parse_dtype, empty
from .protocol import ProtocolError

MAX_DEPTH = 32  # nesting of lists, maps and ADTs
MAX_NDIM = 64
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_DEV = struct.Struct("<ii")


class Tag(enum.IntEnum):
    """The first byte of an encoded value."""

    NONE = 0
    INT = 1             # i64
    FLOAT = 2           # f64
    BOOL = 3            # u8
    STR = 4             # u32 length, UTF-8
    BYTES = 5           # u32 length, bytes
    DEVICE = 6          # i32 device type, i32 device id (as the server numbers devices)
    DTYPE = 7           # str
    NDARRAY = 8         # an array by value: dtype str, u32 ndim, i64 shape[ndim], u64 nbytes, data
    ARRAY_HANDLE = 9    # u64 handle, dtype str, u32 ndim, i64 shape[ndim], device (i32, i32)
    MODULE_HANDLE = 10  # u64 handle, str type key, u32 flags
    FUNC_HANDLE = 11    # u64 handle
    LIST = 12           # u32 count, values
    MAP = 13            # u32 count, (key value) pairs
    ADT = 14            # i32 tag, u32 count, values


MODULE_EXECUTOR = 1  # MODULE_HANDLE flag: the module offers set_input/run/get_output


class Writer:
    """Collects a payload as a list of parts (large buffers are not copied)."""

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []

    def u8(self, v: int) -> None:
        self.parts.append(bytes((v,)))

    def u32(self, v: int) -> None:
        self.parts.append(_U32.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def u64(self, v: int) -> None:
        self.parts.append(_U64.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def f64(self, v: float) -> None:
        self.parts.append(_F64.pack(v))

    def string(self, s: str) -> None:
        self.blob(s.encode("utf-8", "surrogatepass"))

    def blob(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        self.u32(view.nbytes)
        self.raw(view)

    def raw(self, data: bytes | memoryview) -> None:
        self.parts.append(data)

    def device(self, device_type: int, device_id: int) -> None:
        self.parts.append(_DEV.pack(device_type, device_id))

    def shape(self, shape: tuple[int, ...]) -> None:
        self.u32(len(shape))
        self.parts.append(struct.pack(f"<{len(shape)}q", *shape))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    """Reads fields off a payload; ProtocolError names the field when bytes run out."""

    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self.data = memoryview(data).cast("B")
        self.pos = 0
        self.what = what

    def take(self, n: int, field: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError(f"{self.what}: payload truncated reading {field} at byte "
                                f"{self.pos} (needs {n} bytes, {len(self.data) - self.pos} left)")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def left(self) -> int:
        return len(self.data) - self.pos

    def u8(self, field: str) -> int:
        return self.take(1, field)[0]

    def u32(self, field: str) -> int:
        return int(_U32.unpack(self.take(4, field))[0])

    def i32(self, field: str) -> int:
        return int(_I32.unpack(self.take(4, field))[0])

    def u64(self, field: str) -> int:
        return int(_U64.unpack(self.take(8, field))[0])

    def i64(self, field: str) -> int:
        return int(_I64.unpack(self.take(8, field))[0])

    def f64(self, field: str) -> float:
        return float(_F64.unpack(self.take(8, field))[0])

    def blob(self, field: str) -> memoryview:
        return self.take(self.u32(f"{field} length"), field)

    def string(self, field: str) -> str:
        try:
            return str(self.blob(field), "utf-8", "surrogatepass")
        except UnicodeDecodeError as err:
            raise ProtocolError(f"{self.what}: {field} is not UTF-8: {err}") from None

    def device(self, field: str) -> tuple[int, int]:
        dev_type, dev_id = _DEV.unpack(self.take(8, field))
        return int(dev_type), int(dev_id)

    def shape(self, field: str) -> tuple[int, ...]:
        ndim = self.u32(f"{field} ndim")
        if ndim > MAX_NDIM:
            raise ProtocolError(f"{self.what}: {field} has ndim {ndim} (at most {MAX_NDIM})")
        dims = struct.unpack(f"<{ndim}q", self.take(8 * ndim, field))
        if any(d < 0 for d in dims):
            raise ProtocolError(f"{self.what}: {field} has a negative dimension: {dims}")
        return tuple(int(d) for d in dims)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolError(f"{self.what}: {len(self.data) - self.pos} unexpected bytes after "
                                "the payload")


class Side:
    """How one end of a session writes and reads the values that are handles."""

    def encode_object(self, w: Writer, value: Any) -> bool:
        """Write ``value`` if this side knows it (devices, arrays, modules, functions); else
        False. Devices go as they are; a client subclass removes its session's mark first."""
        if isinstance(value, Device):
            w.u8(Tag.DEVICE)
            w.device(value.device_type, value.device_id)
            return True
        return False

    def decode_device(self, dev_type: int, dev_id: int) -> Any:
        return Device(dev_type, dev_id)

    def decode_array_handle(self, handle: int, dtype: str, shape: tuple[int, ...],
                            dev: tuple[int, int]) -> Any:
        raise ProtocolError("unexpected array handle")

    def decode_module_handle(self, handle: int, type_key: str, flags: int) -> Any:
        raise ProtocolError("unexpected module handle")

    def decode_func_handle(self, handle: int) -> Any:
        raise ProtocolError("unexpected function handle")


# ---- arrays by value ------------------------------------------------------------------------
def byte_view(arr: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array, without a copy (empty arrays included)."""
    return memoryview(arr.reshape(-1).view(np.uint8))  # type: ignore[arg-type]


def array_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes of a C-contiguous array of ``dtype`` and ``shape`` (lanes included)."""
    dt, scalar = _parse_dtype(dtype)
    return math.prod(shape) * scalar.itemsize * dt.lanes


def write_ndarray(w: Writer, arr: NDArray) -> None:
    """An NDArray by value (tag included)."""
    w.u8(Tag.NDARRAY)
    w.string(arr.dtype)
    w.shape(arr.shape)
    w.u64(arr.nbytes)
    w.raw(byte_view(arr._np))


def read_ndarray(r: Reader) -> NDArray:
    """An NDArray sent by value (after its tag), copied into a fresh aligned array."""
    dtype = r.string("array dtype")
    try:
        _parse_dtype(dtype)
    except (ValueError, TypeError) as err:
        raise ProtocolError(f"{r.what}: bad array dtype {dtype!r}: {err}") from None
    shape = r.shape("array shape")
    nbytes = r.u64("array byte count")
    if nbytes != array_nbytes(dtype, shape):
        raise ProtocolError(f"{r.what}: array {dtype}{list(shape)} needs "
                            f"{array_nbytes(dtype, shape)} bytes, the payload says {nbytes}")
    data = r.take(nbytes, "array data")
    arr = empty(shape, dtype)
    byte_view(arr._np)[:] = data
    return arr


# ---- values ---------------------------------------------------------------------------------
def encode_value(w: Writer, value: Any, side: Side, depth: int = 0) -> None:
    """Append ``value`` (tag and fields). TypeError for what cannot cross a session."""
    if depth > MAX_DEPTH:
        raise ValueError(f"value nested deeper than {MAX_DEPTH} levels cannot cross an RPC "
                         "session")
    if value is None:
        w.u8(Tag.NONE)
    elif isinstance(value, (bool, np.bool_)):
        w.u8(Tag.BOOL)
        w.u8(int(bool(value)))
    elif isinstance(value, (int, np.integer)):
        if not -(1 << 63) <= int(value) < (1 << 63):
            raise OverflowError(f"int {value} does not fit in 64 bits")
        w.u8(Tag.INT)
        w.i64(int(value))
    elif isinstance(value, (float, np.floating)):
        w.u8(Tag.FLOAT)
        w.f64(float(value))
    elif isinstance(value, str):
        w.u8(Tag.STR)
        w.string(value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        w.u8(Tag.BYTES)
        w.blob(value)
    elif isinstance(value, DataType):
        w.u8(Tag.DTYPE)
        w.string(str(value))
    elif side.encode_object(w, value):
        pass
    else:
        _encode_container(w, value, side, depth)


def _encode_container(w: Writer, value: Any, side: Side, depth: int) -> None:
    if isinstance(value, ADT):
        w.u8(Tag.ADT)
        w.i32(value.tag)
        w.u32(len(value.fields))
        for item in value.fields:
            encode_value(w, item, side, depth + 1)
    elif isinstance(value, (list, tuple, Array)):
        w.u8(Tag.LIST)
        w.u32(len(value))
        for item in value:
            encode_value(w, item, side, depth + 1)
    elif isinstance(value, (dict, Map, Mapping)):
        w.u8(Tag.MAP)
        w.u32(len(value))
        for key, item in value.items():
            encode_value(w, key, side, depth + 1)
            encode_value(w, item, side, depth + 1)
    else:
        t = type(value)
        raise TypeError(f"a value of type {t.__module__}.{t.__qualname__} cannot cross an RPC "
                        "session (expected None, bool, int, float, str, bytes, DataType, Device, "
                        "NDArray, a remote array/module/function, or a list/tuple/dict of those)")


def decode_value(r: Reader, side: Side, depth: int = 0) -> Any:
    """The next value of ``r``."""
    if depth > MAX_DEPTH:
        raise ProtocolError(f"{r.what}: value nested deeper than {MAX_DEPTH} levels")
    tag = r.u8("value tag")
    if tag == Tag.NONE:
        return None
    if tag == Tag.INT:
        return r.i64("int")
    if tag == Tag.FLOAT:
        return r.f64("float")
    if tag == Tag.BOOL:
        return r.u8("bool") != 0
    if tag == Tag.STR:
        return r.string("str")
    if tag == Tag.BYTES:
        return bytes(r.blob("bytes"))
    if tag == Tag.DEVICE:
        return side.decode_device(*r.device("device"))
    if tag == Tag.DTYPE:
        return _dtype(r)
    if tag == Tag.NDARRAY:
        return read_ndarray(r)
    return _decode_handle_or_container(r, tag, side, depth)


def _dtype(r: Reader) -> DataType:
    text = r.string("dtype")
    try:
        return DataType(text)
    except (ValueError, TypeError) as err:
        raise ProtocolError(f"{r.what}: bad dtype {text!r}: {err}") from None


def _count(r: Reader, what: str) -> int:
    n = r.u32(f"{what} count")
    if n > r.left():  # every item takes at least one byte
        raise ProtocolError(f"{r.what}: {what} of {n} items in {r.left()} bytes")
    return n


def _decode_handle_or_container(r: Reader, tag: int, side: Side, depth: int) -> Any:
    if tag == Tag.ARRAY_HANDLE:
        handle = r.u64("array handle")
        dtype = _dtype(r)
        return side.decode_array_handle(handle, str(dtype), r.shape("array shape"),
                                        r.device("array device"))
    if tag == Tag.MODULE_HANDLE:
        handle = r.u64("module handle")
        return side.decode_module_handle(handle, r.string("module type key"), r.u32("module flags"))
    if tag == Tag.FUNC_HANDLE:
        return side.decode_func_handle(r.u64("function handle"))
    if tag == Tag.LIST:
        return [decode_value(r, side, depth + 1) for _ in range(_count(r, "list"))]
    if tag == Tag.MAP:
        out = {}
        for _ in range(_count(r, "map")):
            key = decode_value(r, side, depth + 1)
            if isinstance(key, (list, dict)):
                raise ProtocolError(f"{r.what}: a map key must not be a {type(key).__name__}")
            out[key] = decode_value(r, side, depth + 1)
        return out
    if tag == Tag.ADT:
        adt_tag = r.i32("ADT tag")
        if adt_tag < 0:
            raise ProtocolError(f"{r.what}: negative ADT tag {adt_tag}")
        return ADT(adt_tag, [decode_value(r, side, depth + 1) for _ in range(_count(r, "ADT"))])
    raise ProtocolError(f"{r.what}: unknown value tag {tag}")


def encode_values(values: Any, side: Side) -> Writer:
    """A Writer holding ``u32 count`` and the values (call arguments)."""
    w = Writer()
    w.u32(len(values))
    for i, v in enumerate(values):
        try:
            encode_value(w, v, side)
        except (TypeError, ValueError, OverflowError) as err:
            raise type(err)(f"argument {i}: {err}") from None
    return w


def decode_values(r: Reader, side: Side) -> list[Any]:
    return [decode_value(r, side) for _ in range(_count(r, "argument"))]


# ---- ERROR payload --------------------------------------------------------------------------
def error_payload(type_name: str, message: str, remote_traceback: str = "") -> bytes:
    """The payload of an ERROR frame: str type (qualified name), str message, str traceback."""
    w = Writer()
    w.string(type_name)
    w.string(message)
    w.string(remote_traceback)
    return w.getvalue()


def read_error(payload: memoryview) -> tuple[str, str, str]:
    """``(type name, message, remote traceback)`` of an ERROR payload."""
    r = Reader(payload, "ERROR")
    return r.string("error type"), r.string("error message"), r.string("remote traceback")
