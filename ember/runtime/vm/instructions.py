"""The VM instruction set: opcodes, one record class per instruction, and their text form.

Every instruction is an immutable record whose fields are listed in ``KINDS`` with the
kind of operand each one is (a register read, a register written, an immediate, a function,
constant or kernel index, a jump offset...). The verifier, the serialiser, the printer and the
assembler are all generic over these kinds, so adding an instruction means adding one class.

Text form (what ``Executable.bytecode`` prints, and ``assembler.parse_instruction`` reads)::

    alloc_storage $3 $2 64 float32 0        # dst, size register, alignment, dtype hint, device
    alloc_tensor $4 $3 $1 [2, 3] float32     # dst, storage, offset register, shape, dtype
    invoke_packed PackedFunc[0] (in: $0, $1, out: $4)

Opcode numbers follow the Relay VM's, so listings read the same as TVM's.
"""
from __future__ import annotations

import enum
from typing import Any, ClassVar, Iterator, dataclass_transform

from ..dtype import DataType


class Opcode(enum.IntEnum):
    """Instruction opcodes (the Relay VM's numbering)."""

    Move = 0
    Ret = 1
    Invoke = 2
    InvokeClosure = 3
    InvokePacked = 4
    AllocTensor = 5
    AllocTensorReg = 6
    AllocADT = 7
    AllocClosure = 8
    GetField = 9
    If = 10
    LoadConst = 11
    Goto = 12
    GetTag = 13
    LoadConsti = 14
    Fatal = 15
    AllocStorage = 16
    ShapeOf = 17
    ReshapeTensor = 18
    DeviceCopy = 19
    KillRegister = 20


class Kind(enum.Enum):
    """What an operand is; drives verification, serialisation and printing."""

    REG = "reg"        # a register that is read
    DST = "dst"        # the register written
    REGS = "regs"      # a list of registers read
    INT = "int"        # an immediate integer
    SHAPE = "shape"    # an immediate list of non-negative integers
    DTYPE = "dtype"    # a data type (serialised as the DLPack code, bits, lanes)
    FUNC = "func"      # an index into the executable's functions
    CONST = "const"    # an index into the constant pool
    PACKED = "packed"  # an index into the primitive ops (kernels)
    JUMP = "jump"      # a pc offset, relative to this instruction
    DEVICE = "device"  # an index into the virtual devices


@dataclass_transform(frozen_default=True)
class Instruction:
    """Base of all instructions: an immutable record of operands.

    A subclass declares its operands as annotated fields (their order is the constructor's),
    ``KINDS`` with each field's operand kind, and ``TEXT``, the text template (``{field}``
    placeholders, rendered by kind). Records are built without ``dataclasses``: twenty-one
    dataclasses would add tens of milliseconds to ``import ember.runtime``.
    """

    opcode: ClassVar[Opcode]
    mnemonic: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]] = ()
    KINDS: ClassVar[tuple[Kind, ...]] = ()
    TEXT: ClassVar[str] = ""

    def __init_subclass__(cls) -> None:
        cls.FIELDS = tuple(n for n, t in cls.__dict__.get("__annotations__", {}).items()
                           if "ClassVar" not in str(t))
        assert len(cls.FIELDS) == len(cls.KINDS), f"{cls.__name__}: one kind per field"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.FIELDS
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} operands "
                            f"({', '.join(names)}), got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated operand {key!r}")
            values[key] = value
        if len(values) != len(names):
            missing = [n for n in names if n not in values]
            raise TypeError(f"{type(self).__name__}: missing operands {', '.join(missing)}")
        for kind, name in zip(self.KINDS, names):  # lists are stored as tuples
            if kind in (Kind.REGS, Kind.SHAPE):
                values[name] = tuple(values[name])
        self.__dict__.update(values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (cannot set {name!r})")

    def _values(self) -> tuple[Any, ...]:
        return tuple(self.__dict__[n] for n in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()  # type: ignore

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in self.operand_items())})"

    def operand_items(self) -> Iterator[tuple[str, Any]]:
        return ((n, self.__dict__[n]) for n in self.FIELDS)

    def replace(self, **changes: Any) -> "Instruction":
        """A copy with some operands changed."""
        return type(self)(**{**dict(self.operand_items()), **changes})

    def operands(self) -> Iterator[tuple[str, Kind, Any]]:
        """(field name, kind, value) for every operand, in field order."""
        for name, kind in zip(self.FIELDS, self.KINDS):
            yield name, kind, self.__dict__[name]

    def reads(self) -> tuple[int, ...]:
        """The registers this instruction reads."""
        out: list[int] = []
        for _, kind, value in self.operands():
            if kind is Kind.REG:
                out.append(value)
            elif kind is Kind.REGS:
                out.extend(value)
        return tuple(out)

    def writes(self) -> tuple[int, ...]:
        """The registers this instruction writes (or, for kill_register, clears)."""
        return tuple(v for _, kind, v in self.operands() if kind is Kind.DST)

    def __str__(self) -> str:
        return self.TEXT.format(**{name: render(kind, value)
                                   for name, kind, value in self.operands()})


def render(kind: Kind, value: Any) -> str:
    """One operand in the text form."""
    if kind in (Kind.REG, Kind.DST):
        return f"${value}"
    if kind is Kind.REGS:
        return ", ".join(f"${r}" for r in value)
    if kind is Kind.SHAPE:
        return "[" + ", ".join(str(d) for d in value) + "]"
    if kind is Kind.FUNC:
        return f"VMFunc[{value}]"
    if kind is Kind.CONST:
        return f"Const[{value}]"
    if kind is Kind.PACKED:
        return f"PackedFunc[{value}]"
    return str(value)


_R, _D, _RS, _I = Kind.REG, Kind.DST, Kind.REGS, Kind.INT


class Move(Instruction):
    """``dst = src`` (the object is shared, not copied)."""

    src: int
    dst: int
    opcode = Opcode.Move
    mnemonic = "move"
    KINDS = (_R, _D)
    TEXT = "move {dst} {src}"


class Ret(Instruction):
    """Return the object in ``result`` to the caller (into its call's ``dst``)."""

    result: int
    opcode = Opcode.Ret
    mnemonic = "ret"
    KINDS = (_R,)
    TEXT = "ret {result}"


class Fatal(Instruction):
    """Stop with an error (e.g. a ``match`` without a matching clause)."""

    opcode = Opcode.Fatal
    mnemonic = "fatal"
    TEXT = "fatal"


class InvokePacked(Instruction):
    """Call kernel ``packed_index`` with ``args``: ``arity`` registers, the last
    ``output_size`` of which are the (pre-allocated) outputs it writes. ADT arguments are
    passed as their fields, flattened."""

    packed_index: int
    arity: int
    output_size: int
    args: tuple[int, ...]
    opcode = Opcode.InvokePacked
    mnemonic = "invoke_packed"
    KINDS = (Kind.PACKED, _I, _I, _RS)
    TEXT = "invoke_packed {packed_index} (in: {inputs}, out: {outputs})"

    def __str__(self) -> str:
        split = len(self.args) - self.output_size
        return self.TEXT.format(packed_index=render(Kind.PACKED, self.packed_index),
                                inputs=render(_RS, self.args[:split]),
                                outputs=render(_RS, self.args[split:]))


class AllocTensor(Instruction):
    """Carve a tensor of the immediate ``shape`` and ``dtype`` from ``storage`` at the byte
    offset held (as a scalar tensor) in register ``offset``."""

    storage: int
    offset: int
    shape: tuple[int, ...]
    dtype: str
    dst: int
    opcode = Opcode.AllocTensor
    mnemonic = "alloc_tensor"
    KINDS = (_R, _R, Kind.SHAPE, Kind.DTYPE, _D)
    TEXT = "alloc_tensor {dst} {storage} {offset} {shape} {dtype}"


class AllocTensorReg(Instruction):
    """As AllocTensor, with the shape read from register ``shape_register`` (an int64 1-D
    tensor, e.g. made by ShapeOf or a shape function)."""

    storage: int
    offset: int
    shape_register: int
    dtype: str
    dst: int
    opcode = Opcode.AllocTensorReg
    mnemonic = "alloc_tensor_reg"
    KINDS = (_R, _R, _R, Kind.DTYPE, _D)
    TEXT = "alloc_tensor_reg {dst} {storage} {offset} {shape_register} {dtype}"


class AllocStorage(Instruction):
    """Allocate a storage block of the byte size held in register ``size``, aligned to
    ``alignment`` bytes, on virtual device ``device_index``."""

    size: int
    alignment: int
    dtype_hint: str
    device_index: int
    dst: int
    opcode = Opcode.AllocStorage
    mnemonic = "alloc_storage"
    KINDS = (_R, _I, Kind.DTYPE, Kind.DEVICE, _D)
    TEXT = "alloc_storage {dst} {size} {alignment} {dtype_hint} {device_index}"


class AllocADT(Instruction):
    """Build ``ADT(tag, fields)`` from ``num_fields`` registers (tuples have tag 0)."""

    tag: int
    num_fields: int
    fields: tuple[int, ...]
    dst: int
    opcode = Opcode.AllocADT
    mnemonic = "alloc_data"
    KINDS = (_I, _I, _RS, _D)
    TEXT = "alloc_data {dst} tag({tag}) [{fields}]"


class AllocClosure(Instruction):
    """Build a closure of function ``func_index`` capturing ``num_free_vars`` registers."""

    func_index: int
    num_free_vars: int
    free_vars: tuple[int, ...]
    dst: int
    opcode = Opcode.AllocClosure
    mnemonic = "alloc_closure"
    KINDS = (Kind.FUNC, _I, _RS, _D)
    TEXT = "alloc_closure {dst} {func_index}({free_vars})"


class GetField(Instruction):
    """``dst = object.fields[field_index]`` for the ADT in register ``object``."""

    object: int
    field_index: int
    dst: int
    opcode = Opcode.GetField
    mnemonic = "get_field"
    KINDS = (_R, _I, _D)
    TEXT = "get_field {dst} {object}[{field_index}]"


class GetTag(Instruction):
    """``dst`` = the tag of the ADT in register ``object``, as an int32 scalar tensor."""

    object: int
    dst: int
    opcode = Opcode.GetTag
    mnemonic = "get_tag"
    KINDS = (_R, _D)
    TEXT = "get_tag {dst} {object}"


class If(Instruction):
    """Jump by ``true_offset`` if the scalar values in ``test`` and ``target`` are equal,
    else by ``false_offset``."""

    test: int
    target: int
    true_offset: int
    false_offset: int
    opcode = Opcode.If
    mnemonic = "if"
    KINDS = (_R, _R, Kind.JUMP, Kind.JUMP)
    TEXT = "if {test} {target} {true_offset} {false_offset}"


class Goto(Instruction):
    """Jump by ``pc_offset``."""

    pc_offset: int
    opcode = Opcode.Goto
    mnemonic = "goto"
    KINDS = (Kind.JUMP,)
    TEXT = "goto {pc_offset}"


class Invoke(Instruction):
    """Call function ``func_index`` with ``args``; its result goes to ``dst``."""

    func_index: int
    args: tuple[int, ...]
    dst: int
    opcode = Opcode.Invoke
    mnemonic = "invoke"
    KINDS = (Kind.FUNC, _RS, _D)
    TEXT = "invoke {dst} {func_index}({args})"


class InvokeClosure(Instruction):
    """Call the closure in register ``closure`` with its captured values, then ``args``."""

    closure: int
    args: tuple[int, ...]
    dst: int
    opcode = Opcode.InvokeClosure
    mnemonic = "invoke_closure"
    KINDS = (_R, _RS, _D)
    TEXT = "invoke_closure {dst} {closure}({args})"


class LoadConst(Instruction):
    """``dst`` = constant ``const_index`` of the constant pool."""

    const_index: int
    dst: int
    opcode = Opcode.LoadConst
    mnemonic = "load_const"
    KINDS = (Kind.CONST, _D)
    TEXT = "load_const {dst} {const_index}"


class LoadConsti(Instruction):
    """``dst`` = the integer ``val`` as an int64 scalar (0-d) tensor."""

    val: int
    dst: int
    opcode = Opcode.LoadConsti
    mnemonic = "load_consti"
    KINDS = (_I, _D)
    TEXT = "load_consti {dst} {val}"


class ShapeOf(Instruction):
    """``dst`` = the shape of the tensor in ``tensor``, as an int64 1-D tensor."""

    tensor: int
    dst: int
    opcode = Opcode.ShapeOf
    mnemonic = "shape_of"
    KINDS = (_R, _D)
    TEXT = "shape_of {dst} {tensor}"


class ReshapeTensor(Instruction):
    """``dst`` = a view of ``tensor`` with the shape held in register ``newshape``."""

    tensor: int
    newshape: int
    dst: int
    opcode = Opcode.ReshapeTensor
    mnemonic = "reshape_tensor"
    KINDS = (_R, _R, _D)
    TEXT = "reshape_tensor {dst} {tensor} {newshape}"


class DeviceCopy(Instruction):
    """Copy ``src`` between virtual devices (the same object when both are the CPU)."""

    src: int
    src_device_index: int
    dst_device_index: int
    dst: int
    opcode = Opcode.DeviceCopy
    mnemonic = "device_copy"
    KINDS = (_R, Kind.DEVICE, Kind.DEVICE, _D)
    TEXT = "device_copy {dst} {src} {dst_device_index} {src_device_index}"


class KillRegister(Instruction):
    """Clear register ``dst`` so its object (and storage) can be freed before the frame ends."""

    dst: int
    opcode = Opcode.KillRegister
    mnemonic = "kill_register"
    KINDS = (_D,)
    TEXT = "kill_register {dst}"


INSTRUCTION_TYPES: dict[Opcode, type[Instruction]] = {
    cls.opcode: cls for cls in (Move, Ret, Fatal, InvokePacked, AllocTensor, AllocTensorReg,
                                AllocStorage, AllocADT, AllocClosure, GetField, GetTag, If, Goto,
                                Invoke, InvokeClosure, LoadConst, LoadConsti, ShapeOf,
                                ReshapeTensor, DeviceCopy, KillRegister)}
BY_MNEMONIC: dict[str, type[Instruction]] = {c.mnemonic: c for c in INSTRUCTION_TYPES.values()}
# Instructions after which control does not fall through to the next one.
TERMINATORS = (Ret, Fatal, Goto, If)
assert len(INSTRUCTION_TYPES) == len(Opcode), "every opcode needs an instruction class"


# ---- the integer encoding (serialisation and the numeric column of listings) ---------------
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
