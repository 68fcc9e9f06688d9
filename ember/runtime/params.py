"""The params byte format: named tensors in one self-describing, little-endian blob.

Layout of ``save_param_dict`` (all integers little-endian)::

    offset 0   magic       8 bytes  b"\\x89EMBPRM\\n"
           8   version     u32      FORMAT_VERSION (1)
          12   flags       u32      bit 0: a checksum ends the blob (ember always sets it)
          16   count       u64      number of tensors
               names       count x (u32 byte length, UTF-8 bytes)
               tensors     count x record, in the order of the names
               checksum    u32      CRC-32 (zlib's) of every byte before it

    record:    dtype       u8 code, u8 bits, u16 lanes   (DLDataType; bool is code 6, 8 bits)
               ndim        u32
               shape       ndim x i64
               nbytes      u64      == prod(shape) * lanes * bits / 8
               data        nbytes   C order, little-endian

A single tensor (``serialize_ndarray``, used by JSON for NDArray fields) is the header with
magic b"\\x89EMBTNS\\n", one record and the checksum. Loaders verify the checksum first (a
blob without one, flags 0, is still read), then every field, and raise ArtifactError naming
what was wrong and the byte offset where it was found. The C runtime's reader
(``ember/crt/executor/params.c``) makes the same checks.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any, Mapping

import numpy as np

from .dtype import DataType
from .errors import ArtifactError
from .ndarray import NDArray, empty

PARAMS_MAGIC = b"\x89EMBPRM\n"
TENSOR_MAGIC = b"\x89EMBTNS\n"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sII")
_RECORD = struct.Struct("<BBHI")
_MAX_NDIM = 64  # sanity bound so a corrupt ndim cannot ask for gigabytes of shape
FLAG_CHECKSUM = 1  # a u32 CRC-32 of all the bytes before it ends the blob


def _as_numpy(value: Any, name: str) -> tuple[np.ndarray, DataType]:
    if isinstance(value, NDArray):
        return value._np, value._dtype
    arr = np.asarray(value)
    if arr.dtype.name not in DataType.NUMPY2STR.values():
        raise TypeError(f"save_param_dict: param {name!r} has unsupported dtype {arr.dtype}")
    return arr, DataType(arr.dtype.name)


def _write_record(out: bytearray, arr: np.ndarray, dt: DataType) -> None:
    shape = arr.shape if dt.lanes == 1 else arr.shape[:-1]
    code = dt.to_dl()
    out += _RECORD.pack(code.code, code.bits, code.lanes, len(shape))
    out += struct.pack(f"<{len(shape)}q", *shape)
    data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    out += struct.pack("<Q", len(data))
    out += data


def save_param_dict(params: Mapping[str, Any]) -> bytearray:
    """Serialize ``{name: NDArray or numpy array}`` into the params byte format.

    Returns a bytearray (what the graph executor's ``load_params`` takes). Raises TypeError for
    non-str names or unsupported dtypes.
    """
    out = bytearray(_HEADER.pack(PARAMS_MAGIC, FORMAT_VERSION, FLAG_CHECKSUM))
    out += struct.pack("<Q", len(params))
    tensors = []
    for name, value in params.items():
        if not isinstance(name, str):
            raise TypeError(f"save_param_dict: names must be str, got "
                            f"{type(name).__name__} {name!r}")
        encoded = name.encode("utf-8")
        out += struct.pack("<I", len(encoded)) + encoded
        tensors.append(_as_numpy(value, name))
    for arr, dt in tensors:
        _write_record(out, arr, dt)
    return _seal(out)


def _seal(out: bytearray) -> bytearray:
    out += struct.pack("<I", zlib.crc32(out))
    return out


class _Reader:
    """Reads fields from a byte buffer, raising ArtifactError with the offset on any problem."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"{what}: expected bytes, got {type(data).__name__}")
        self.buf = memoryview(data).cast("B")
        self.whole: memoryview | None = None  # the blob with its checksum, when it has one
        self.off = 0
        self.what = what

    def fail(self, msg: str, offset: int | None = None) -> ArtifactError:
        at = self.off if offset is None else offset
        return ArtifactError(f"{self.what}: {msg} at byte offset {at}")

    def take(self, n: int, field: str) -> memoryview:
        left = len(self.buf) - self.off
        if n > left:
            raise self.fail(f"truncated data: {field} needs {n} bytes but only {left} remain")
        chunk = self.buf[self.off : self.off + n]
        self.off += n
        return chunk

    def unpack(self, fmt: struct.Struct | str, field: str) -> tuple[Any, ...]:
        st = fmt if isinstance(fmt, struct.Struct) else struct.Struct(fmt)
        return st.unpack(self.take(st.size, field))

    def header(self, magic: bytes) -> None:
        head = bytes(self.buf[:8])
        if head != magic[: len(head)]:
            raise self.fail(f"not an ember {'params' if magic == PARAMS_MAGIC else 'tensor'} "
                            f"blob: bad magic {head!r} (expected {magic!r})", 0)
        _, version, flags = self.unpack(_HEADER, "the header")
        if version != FORMAT_VERSION:
            raise self.fail(f"format version {version} is not supported (this ember reads "
                            f"version {FORMAT_VERSION})", 8)
        if flags & ~FLAG_CHECKSUM:
            raise self.fail(f"unknown flags {flags:#x}", 12)
        if flags & FLAG_CHECKSUM:
            if len(self.buf) < _HEADER.size + 4:
                raise self.fail("truncated data: the checksum needs 4 bytes", len(self.buf))
            # The fields are parsed first (a truncated blob gets the precise message), then
            # ``finish`` compares the checksum (a flipped byte anywhere is caught).
            self.whole, self.buf = self.buf, self.buf[:-4]

    def finish(self) -> None:
        if self.off != len(self.buf):
            raise self.fail(f"{len(self.buf) - self.off} unexpected trailing bytes")
        if self.whole is not None:
            (want,) = struct.unpack("<I", self.whole[-4:])
            if zlib.crc32(self.buf) != want:
                raise self.fail("checksum mismatch: the data is corrupt", len(self.buf))

    def record(self, label: str) -> NDArray:
        start = self.off
        code, bits, lanes, ndim = self.unpack(_RECORD, f"the dtype and ndim of {label}")
        try:
            dt = DataType.from_dl(code, bits, lanes)
            scalar = DataType(dt.scalar).numpy_dtype
        except (ValueError, TypeError):
            raise self.fail(f"{label} has an unsupported dtype (code={code}, bits={bits}, "
                            f"lanes={lanes})", start) from None
        if ndim > _MAX_NDIM:
            raise self.fail(f"{label} has implausible ndim {ndim}", start + 4)
        shape_off = self.off
        shape = self.unpack(f"<{ndim}q", f"the shape of {label}")
        if any(s < 0 for s in shape):
            raise self.fail(f"{label} has a negative dimension in shape {shape}", shape_off)
        nbytes_off = self.off
        (nbytes,) = self.unpack("<Q", f"the byte size of {label}")
        expected = int(np.prod(shape, dtype=np.int64)) * lanes * scalar.itemsize
        if nbytes != expected:
            raise self.fail(f"{label} declares {nbytes} data bytes but shape {shape} of {dt} "
                            f"needs {expected}", nbytes_off)
        data = self.take(nbytes, f"the data of {label}")
        out = empty(shape, dt)
        src = np.frombuffer(data, dtype=scalar.newbyteorder("<")).reshape(out._np.shape)
        np.copyto(out._np, src)
        return out


def load_param_dict(data: bytes | bytearray | memoryview) -> dict[str, NDArray]:
    """Parse the params byte format back into ``{name: NDArray}`` (in saved order).

    Raises ArtifactError for foreign, truncated, corrupt or newer-version data.
    """
    rd = _Reader(data, "load_param_dict")
    rd.header(PARAMS_MAGIC)
    count_off = rd.off
    (count,) = rd.unpack("<Q", "the tensor count")
    if count * 4 > len(rd.buf) - rd.off:  # each name takes at least its u32 length
        raise rd.fail(f"tensor count {count} does not fit in the remaining data", count_off)
    names: list[str] = []
    for i in range(count):
        (length,) = rd.unpack("<I", f"the length of name {i}")
        name_off = rd.off
        try:
            name = bytes(rd.take(length, f"name {i}")).decode("utf-8")
        except UnicodeDecodeError:
            raise rd.fail(f"name {i} is not valid UTF-8", name_off) from None
        if name in names:
            raise rd.fail(f"duplicate name {name!r}", name_off)
        names.append(name)
    params = {name: rd.record(f"param {name!r}") for name in names}
    rd.finish()
    return params


def serialize_ndarray(arr: NDArray | np.ndarray) -> bytes:
    """One tensor in the params record format, with its own header (magic b"\\x89EMBTNS\\n")."""
    out = bytearray(_HEADER.pack(TENSOR_MAGIC, FORMAT_VERSION, FLAG_CHECKSUM))
    _write_record(out, *_as_numpy(arr, "<tensor>"))
    return bytes(_seal(out))


def deserialize_ndarray(data: bytes | bytearray | memoryview) -> NDArray:
    """Inverse of ``serialize_ndarray``; raises ArtifactError on bad data."""
    rd = _Reader(data, "deserialize_ndarray")
    rd.header(TENSOR_MAGIC)
    out = rd.record("the tensor")
    rd.finish()
    return out
