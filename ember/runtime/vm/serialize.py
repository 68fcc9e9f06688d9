"""The executable's byte format: ``Executable.save()`` writes it, ``load_exec`` reads it.

All integers little-endian; ``str`` is a u32 byte length then UTF-8::

    magic     8 bytes  b"\\x89EMBVMX\\n"
    version   u32      FORMAT_VERSION (2)
    flags     u32      0 (reserved)
    length    u64      the number of bytes of sections after this 40-byte header
    checksum  16 bytes blake2b (16-byte digest) of the whole file with these 16 bytes zero
    sections, in this order, each: tag (4 ASCII bytes), u64 payload length, payload
      HEAD    UTF-8 JSON {"virtual_devices": [[device_type, device_id], ...],
                          "host_device_index": int,
                          "value_kernels": [[kernel index, [argument positions]], ...],
                          "concat_kernels": [[kernel index, [params in output order]], ...]}
              (the last two optional: an executable without value_kernels runs every
              kernel on every call, one without concat_kernels copies every concatenation)
      GLOB    u32 n, n x (str name, u32 function index)
      CNST    u32 n, n x (u32 device index, u8 late-bound flag), then the params byte format
              (ember.runtime.params) holding the constants that are not late-bound, named
              by their decimal index
      PRIM    u32 n, n x str kernel name (kernel k is what PackedFunc[k] calls)
      CODE    u32 n, n x function:
                str name, u32 register file size, u32 param count,
                per param: str name, u32 device index, u8 has type,
                           [if has type: str dtype, u32 ndim, ndim x i64 (-1 = any)],
                u32 instruction count,
                per instruction: u32 opcode, u32 field count, fields x i64
                (the fields of ``instructions.to_fields``)

Reading checks the magic, the version, then the checksum, so one changed byte anywhere
after the magic and version is reported as ``corrupt VM executable: checksum mismatch``, and a
cut file as truncated. Then every length is checked against the bytes left before reading, so
input that passes the checksum but is malformed (written by a buggy or hostile writer) raises
ArtifactError naming the field, section and byte offset; the result then goes through the
verifier before anything can run it. Version 1 had no checksum and is no longer read.
"""
from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

from .. import json_reader
from ..device import Device
from ..dtype import DataType
from ..errors import ArgumentTypeError, ArtifactError
from ..params import load_param_dict, save_param_dict
from .instructions import INSTRUCTION_TYPES, Instruction, Kind, Opcode
from .program import ListInfo, Program, TensorInfo, VMFunction
from .verifier import verify

MAGIC = b"\x89EMBVMX\n"
FORMAT_VERSION = 2
SECTIONS = (b"HEAD", b"GLOB", b"CNST", b"PRIM", b"CODE")
_HEADER = struct.Struct("<8sIIQ16s")
_DIGEST = slice(24, 40)  # where the checksum sits in the header
_SECTION = struct.Struct("<4sQ")


# ---- instructions as integers (the code section, and the numeric column of listings) --------
def dtype_fields(dtype: str) -> tuple[int, int, int]:
    """A dtype as its DLPack (code, bits, lanes)."""
    dl = DataType(dtype).to_dl()
    return (dl.code, dl.bits, dl.lanes)


def to_fields(ins: Instruction) -> list[int]:
    """The operands as integers: lists as a count then the items, dtypes as three ints."""
    out: list[int] = []
    for _, kind, value in ins.operands():
        if kind in (Kind.REGS, Kind.SHAPE):
            out.append(len(value))
            out.extend(value)
        elif kind is Kind.DTYPE:
            out.extend(dtype_fields(value))
        else:
            out.append(value)
    return out


def from_fields(opcode: int, fields: list[int]) -> Instruction:
    """Inverse of ``to_fields``. Raises ValueError saying which operand is missing or bad."""
    try:
        cls = INSTRUCTION_TYPES[Opcode(opcode)]
    except ValueError:
        raise ValueError(f"unknown opcode {opcode}") from None
    values: list[Any] = []
    pos = 0

    def take(n: int, what: str) -> list[int]:
        nonlocal pos
        if n < 0 or pos + n > len(fields):
            raise ValueError(f"{cls.__name__}: operand {what} runs past the {len(fields)} fields")
        pos += n
        return fields[pos - n:pos]

    for name, kind in zip(cls.FIELDS, cls.KINDS):
        if kind in (Kind.REGS, Kind.SHAPE):
            (count,) = take(1, f"{name} (count)")
            values.append(tuple(take(count, name)))
        elif kind is Kind.DTYPE:
            code, bits, lanes = take(3, name)
            try:
                values.append(str(DataType.from_dl(code, bits, lanes)))
            except ValueError:
                raise ValueError(f"{cls.__name__}: operand {name}: invalid dtype (code={code}, "
                                 f"bits={bits}, lanes={lanes})") from None
        else:
            values.append(take(1, name)[0])
    if pos != len(fields):
        raise ValueError(f"{cls.__name__}: {len(fields) - pos} unexpected extra fields")
    return cls(*values)


# ---- writing --------------------------------------------------------------------------------
class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def u8(self, v: int) -> None:
        self.out += struct.pack("<B", v)

    def u32(self, v: int) -> None:
        self.out += struct.pack("<I", v)

    def i64s(self, values: Any) -> None:
        self.out += struct.pack(f"<{len(values)}q", *values)

    def str(self, s: str) -> None:
        data = s.encode("utf-8")
        self.u32(len(data))
        self.out += data


def serialize(prog: Program) -> bytearray:
    """The bytes of ``prog`` (see the module docstring for the layout)."""
    sections: list[bytes] = []
    head = {"virtual_devices": [[d.device_type, d.device_id] for d in prog.virtual_devices],
            "host_device_index": prog.host_device_index}
    if prog.value_kernels:
        head["value_kernels"] = [[k, list(v)] for k, v in sorted(prog.value_kernels.items())]
    if prog.concat_kernels:
        head["concat_kernels"] = [[k, list(v)] for k, v in sorted(prog.concat_kernels.items())]
    sections.append(json.dumps(head).encode())
    w = _Writer()
    w.u32(len(prog.functions))
    for i, func in enumerate(prog.functions):
        w.str(func.name)
        w.u32(i)
    sections.append(bytes(w.out))
    w = _Writer()
    w.u32(len(prog.constants))
    for const, dev in zip(prog.constants, prog.const_device_indexes):
        w.u32(dev)
        w.u8(const is None)
    w.out += save_param_dict({str(i): c for i, c in enumerate(prog.constants) if c is not None})
    sections.append(bytes(w.out))
    w = _Writer()
    w.u32(len(prog.primitive_ops))
    for name in prog.primitive_ops:
        w.str(name)
    sections.append(bytes(w.out))
    w = _Writer()
    w.u32(len(prog.functions))
    for func in prog.functions:
        _write_function(w, func)
    sections.append(bytes(w.out))
    body = b"".join(_SECTION.pack(tag, len(payload)) + payload
                    for tag, payload in zip(SECTIONS, sections))
    return reseal(bytearray(_HEADER.pack(MAGIC, FORMAT_VERSION, 0, 0, bytes(16))) + body)


def checksum(data: bytes | bytearray | memoryview) -> bytes:
    """The 16-byte blake2b digest of an executable with its checksum field taken as zero."""
    h = hashlib.blake2b(digest_size=16)
    h.update(data[:_DIGEST.start])
    h.update(bytes(16))
    h.update(data[_DIGEST.stop:])
    return h.digest()


def reseal(data: bytes | bytearray) -> bytearray:
    """``data`` (a whole executable, maybe patched) with its length and checksum fields set
    to match its contents. ``serialize`` ends with this; tests and tools that forge or patch
    an executable on purpose use it to get past the checksum to the structural checks."""
    out = bytearray(data)
    struct.pack_into("<Q", out, 16, len(out) - _HEADER.size)
    out[_DIGEST] = checksum(out)
    return out


def _write_function(w: _Writer, func: VMFunction) -> None:
    w.str(func.name)
    w.u32(func.register_file_size)
    w.u32(len(func.params))
    types = func.param_types or (None,) * len(func.params)
    for name, dev, ty in zip(func.params, func.param_device_indexes, types):
        w.str(name)
        w.u32(dev)
        w.u8(0 if ty is None else 2 if isinstance(ty, ListInfo) else 1)
        if isinstance(ty, ListInfo):
            w.u32(ty.cons_tag)
            w.u32(ty.nil_tag)
        elif ty is not None:
            w.str(ty.dtype)
            w.u32(len(ty.shape))
            w.i64s(ty.shape)
    w.u32(len(func.instructions))
    for ins in func.instructions:
        fields = to_fields(ins)
        w.u32(int(ins.opcode))
        w.u32(len(fields))
        w.i64s(fields)


# ---- reading --------------------------------------------------------------------------------
class _Reader:
    """Reads one section; every failure is an ArtifactError with the absolute byte offset."""

    def __init__(self, data: memoryview, base: int, section: str) -> None:
        self.buf, self.pos, self.base, self.section = data, 0, base, section

    def fail(self, msg: str) -> ArtifactError:
        return ArtifactError(f"vm executable: {msg} (section {self.section}, byte offset "
                             f"{self.base + self.pos})")

    def take(self, n: int, what: str) -> memoryview:
        left = len(self.buf) - self.pos
        if n > left:
            raise self.fail(f"truncated data: {what} needs {n} bytes but only {left} remain")
        self.pos += n
        return self.buf[self.pos - n:self.pos]

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        st = struct.Struct(fmt)
        return st.unpack(self.take(st.size, what))

    def u32(self, what: str) -> int:
        return int(self.unpack("<I", what)[0])

    def count(self, what: str, min_item_bytes: int) -> int:
        n = self.u32(f"the number of {what}")
        if n * min_item_bytes > len(self.buf) - self.pos:
            raise self.fail(f"{n} {what} cannot fit in the {len(self.buf) - self.pos} bytes left")
        return n

    def str(self, what: str) -> str:
        data = self.take(self.u32(f"the length of {what}"), what)
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8") from None

    def rest(self) -> memoryview:
        return self.take(len(self.buf) - self.pos, "the rest")

    def finish(self) -> None:
        if self.pos != len(self.buf):
            raise self.fail(f"{len(self.buf) - self.pos} unexpected trailing bytes")


def deserialize(data: bytes | bytearray | memoryview) -> Program:
    """Parse and verify the bytes written by ``serialize``; ArtifactError on any problem."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArgumentTypeError(f"load_exec: expected the bytes from Executable.save(), got "
                                f"{type(data).__name__}")
    buf = memoryview(data).cast("B")
    top = _Reader(buf, 0, "header")
    _check_header(buf, top)
    readers: dict[bytes, _Reader] = {}
    for want in SECTIONS:
        tag, length = top.unpack("<4sQ", f"the {want.decode()} section header")
        if tag != want:
            raise top.fail(f"expected section {want.decode()}, found {bytes(tag)!r}")
        start = top.pos
        readers[want] = _Reader(top.take(length, f"the {want.decode()} section"), start,
                                want.decode())
    top.finish()
    prog = _parse(readers)
    verify(prog)
    return prog


def _check_header(buf: memoryview, top: _Reader) -> None:
    """Magic, version, checksum, flags and length, in that order (see the module docstring)."""
    magic = bytes(buf[:8])
    if magic != MAGIC[:len(magic)]:
        raise ArtifactError(f"vm executable: not an ember VM executable (bad magic {magic!r}, "
                            f"expected {MAGIC!r})")
    if len(buf) >= 12:
        (version,) = struct.unpack_from("<I", buf, 8)
        if version != FORMAT_VERSION:
            old = " (written before executables carried a checksum; save it again)" \
                if version == 1 else ""
            raise ArtifactError(f"vm executable: format version {version} is not supported{old}"
                                f"; this ember reads version {FORMAT_VERSION} (if this ember "
                                "wrote the file, it is corrupt)")
    _, _, flags, length, stored = top.unpack(_HEADER.format, "the header")
    computed = checksum(buf)
    if stored != computed:
        size = len(buf) - _HEADER.size
        cut = "" if size == length else (f"; the header records {length} bytes of sections "
                                         f"and {size} are present ("
                                         f"{'truncated' if size < length else 'bytes appended'}?)")
        raise ArtifactError(f"corrupt VM executable: checksum mismatch (stored {stored.hex()}, "
                            f"computed {computed.hex()}): the bytes changed after they were "
                            f"saved{cut}")
    if flags != 0:
        raise ArtifactError(f"vm executable: unknown flags {flags:#x}")
    if length != len(buf) - _HEADER.size:
        raise ArtifactError(f"vm executable: the header records {length} bytes of sections, "
                            f"{len(buf) - _HEADER.size} are present")


def _parse(readers: dict[bytes, _Reader]) -> Program:
    devices, host, value_kernels, concat_kernels = _read_head(readers[b"HEAD"])
    r = readers[b"GLOB"]
    globals_ = [(r.str(f"global {i}"), r.u32(f"the index of global {i}"))
                for i in range(r.count("globals", 8))]
    r.finish()
    constants, const_devs = _read_constants(readers[b"CNST"])
    r = readers[b"PRIM"]
    prims = [r.str(f"primitive op {i}") for i in range(r.count("primitive ops", 4))]
    r.finish()
    r = readers[b"CODE"]
    functions = [_read_function(r, i) for i in range(r.count("functions", 16))]
    r.finish()
    if globals_ != [(f.name, i) for i, f in enumerate(functions)]:
        raise ArtifactError(f"vm executable: the globals {globals_} do not match the functions "
                            f"{[f.name for f in functions]}")
    for name, table in (("value_kernels", value_kernels), ("concat_kernels", concat_kernels)):
        if any(not 0 <= k < len(prims) for k in table):
            raise ArtifactError(f"vm executable: bad HEAD section ({name} names a kernel "
                                f"outside 0..{len(prims) - 1})")
    if any(sorted(order) != list(range(len(order))) for order in concat_kernels.values()):
        raise ArtifactError("vm executable: bad HEAD section (concat_kernels holds an order "
                            "that is not a permutation)")
    return Program(functions, constants, prims, devices, host, const_devs, value_kernels,
                   concat_kernels)


def _read_head(r: _Reader) -> tuple[list[Device], int, dict[int, tuple[int, ...]],
                                    dict[int, tuple[int, ...]]]:
    try:
        head = json_reader.loads(bytes(r.rest()).decode("utf-8"))
        devices = [Device(int(t), int(i)) for t, i in head["virtual_devices"]]
        host = int(head["host_device_index"])
        value_kernels, concat_kernels = ({int(k): tuple(int(p) for p in positions)
                                          for k, positions in head.get(name, [])}
                                         for name in ("value_kernels", "concat_kernels"))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise ArtifactError(f"vm executable: bad HEAD section ({type(err).__name__}: {err})"
                            ) from None
    return devices, host, value_kernels, concat_kernels


def _read_constants(r: _Reader) -> tuple[list[Any], list[int]]:
    n = r.count("constants", 5)
    entries = [r.unpack("<IB", f"constant {i}'s device and flag") for i in range(n)]
    start = r.base + r.pos
    params = load_param_dict(r.rest())  # ArtifactError on bad data, with its own offsets
    constants: list[Any] = []
    for i, (_, late) in enumerate(entries):
        if late not in (0, 1):
            raise ArtifactError(f"vm executable: constant {i} has late-bound flag {late}")
        value = params.pop(str(i), None)
        if (value is None) != bool(late):
            state = "late-bound but stored" if late else "missing from the constant data"
            raise ArtifactError(f"vm executable: constant {i} is {state} (section CNST, byte "
                                f"offset {start})")
        constants.append(value)
    if params:
        raise ArtifactError(f"vm executable: unexpected constants {sorted(params)} in the "
                            f"constant data (section CNST, byte offset {start})")
    return constants, [dev for dev, _ in entries]


def _read_function(r: _Reader, index: int) -> VMFunction:
    name = r.str(f"the name of function {index}")
    where = f"function {name!r}"
    regs = r.u32(f"the register count of {where}")
    params, devices, types = [], [], []
    for i in range(r.count(f"parameters of {where}", 9)):
        params.append(r.str(f"parameter {i} of {where}"))
        devices.append(r.u32(f"the device of parameter {i} of {where}"))
        types.append(_read_type(r, f"parameter {i} of {where}"))
    instructions = []
    for pc in range(r.count(f"instructions of {where}", 8)):
        opcode, nfields = r.unpack("<II", f"instruction {pc} of {where}")
        if nfields * 8 > len(r.buf) - r.pos:
            raise r.fail(f"truncated data: instruction {pc} of {where} has {nfields} fields "
                         f"but only {len(r.buf) - r.pos} bytes remain")
        fields = list(r.unpack(f"<{nfields}q", f"the fields of instruction {pc} of {where}"))
        try:
            instructions.append(from_fields(opcode, fields))
        except ValueError as err:
            op = Opcode(opcode).name if opcode in Opcode._value2member_map_ else opcode
            raise r.fail(f"functions[{name!r}].instructions[{pc}] ({op}): {err}") from None
    has_types = any(t is not None for t in types)
    return VMFunction(name, tuple(params), tuple(instructions), regs, tuple(devices),
                      tuple(types) if has_types else ())


def _read_type(r: _Reader, what: str) -> TensorInfo | ListInfo | None:
    (has,) = r.unpack("<B", f"the type flag of {what}")
    if has == 0:
        return None
    if has == 2:
        return ListInfo(r.u32(f"the Cons tag of {what}"), r.u32(f"the Nil tag of {what}"))
    if has != 1:
        raise r.fail(f"the type flag of {what} is {has}, expected 0, 1 or 2")
    dtype = r.str(f"the dtype of {what}")
    ndim = r.u32(f"the rank of {what}")
    if ndim > 64:
        raise r.fail(f"{what} has implausible rank {ndim}")
    return TensorInfo(dtype, r.unpack(f"<{ndim}q", f"the shape of {what}"))
