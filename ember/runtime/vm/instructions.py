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
from collections.abc import Iterator
from typing import Any, ClassVar

from .._compat import dataclass_transform


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

    A subclass declares its operands as annotated fields (their order is the constructor's)
    and passes ``opcode``, ``kinds`` (each field's operand kind) and ``text`` (the text
    template: ``{field}`` placeholders, rendered by kind) as class arguments. Records are
    built without ``dataclasses``: twenty-one dataclasses would add tens of milliseconds to
    ``import ember.runtime``.
    """

    opcode: ClassVar[Opcode]
    mnemonic: ClassVar[str]  # the first word of TEXT
    FIELDS: ClassVar[tuple[str, ...]] = ()
    KINDS: ClassVar[tuple[Kind, ...]] = ()
    TEXT: ClassVar[str] = ""

    def __init_subclass__(cls, opcode: Opcode, kinds: tuple[Kind, ...], text: str) -> None:
        cls.opcode, cls.KINDS, cls.TEXT, cls.mnemonic = opcode, kinds, text, text.split()[0]
        cls.FIELDS = tuple(cls.__dict__.get("__annotations__", {}))
        assert len(cls.FIELDS) == len(kinds), f"{cls.__name__}: one kind per field"

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
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in self.operand_items())})"

    def operand_items(self) -> Iterator[tuple[str, Any]]:
        return ((n, self.__dict__[n]) for n in self.FIELDS)

    def replace(self, **changes: Any) -> Instruction:
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


_R, _D, _RS, _I, _J = Kind.REG, Kind.DST, Kind.REGS, Kind.INT, Kind.JUMP
_SH, _DT, _F, _DV = Kind.SHAPE, Kind.DTYPE, Kind.FUNC, Kind.DEVICE


class Move(Instruction, opcode=Opcode.Move, kinds=(_R, _D), text="move {dst} {src}"):
    """``dst = src`` (the object is shared, not copied)."""

    src: int
    dst: int


class Ret(Instruction, opcode=Opcode.Ret, kinds=(_R,), text="ret {result}"):
    """Return the object in ``result`` to the caller (into its call's ``dst``)."""

    result: int


class Fatal(Instruction, opcode=Opcode.Fatal, kinds=(), text="fatal"):
    """Stop with an error (e.g. a ``match`` without a matching clause)."""


class InvokePacked(Instruction, opcode=Opcode.InvokePacked, kinds=(Kind.PACKED, _I, _I, _RS),
                   text="invoke_packed {packed_index} (in: {inputs}, out: {outputs})"):
    """Call kernel ``packed_index`` with ``args``: ``arity`` registers, the last
    ``output_size`` of which are the (pre-allocated) outputs it writes. ADT arguments are
    passed as their fields, flattened."""

    packed_index: int
    arity: int
    output_size: int
    args: tuple[int, ...]

    def __str__(self) -> str:
        split = len(self.args) - self.output_size
        return self.TEXT.format(packed_index=render(Kind.PACKED, self.packed_index),
                                inputs=render(_RS, self.args[:split]),
                                outputs=render(_RS, self.args[split:]))


class AllocTensor(Instruction, opcode=Opcode.AllocTensor, kinds=(_R, _R, _SH, _DT, _D),
                  text="alloc_tensor {dst} {storage} {offset} {shape} {dtype}"):
    """Carve a tensor of the immediate ``shape`` and ``dtype`` from ``storage`` at the byte
    offset held (as a scalar tensor) in register ``offset``."""

    storage: int
    offset: int
    shape: tuple[int, ...]
    dtype: str
    dst: int


class AllocTensorReg(Instruction, opcode=Opcode.AllocTensorReg, kinds=(_R, _R, _R, _DT, _D),
                     text="alloc_tensor_reg {dst} {storage} {offset} {shape_register} {dtype}"):
    """As AllocTensor, with the shape read from register ``shape_register`` (an int64 1-D
    tensor, e.g. made by ShapeOf or a shape function)."""

    storage: int
    offset: int
    shape_register: int
    dtype: str
    dst: int


class AllocStorage(Instruction, opcode=Opcode.AllocStorage, kinds=(_R, _I, _DT, _DV, _D),
                   text="alloc_storage {dst} {size} {alignment} {dtype_hint} {device_index}"):
    """Allocate a storage block of the byte size held in register ``size``, aligned to
    ``alignment`` bytes, on virtual device ``device_index``."""

    size: int
    alignment: int
    dtype_hint: str
    device_index: int
    dst: int


class AllocADT(Instruction, opcode=Opcode.AllocADT, kinds=(_I, _I, _RS, _D),
               text="alloc_data {dst} tag({tag}) [{fields}]"):
    """Build ``ADT(tag, fields)`` from ``num_fields`` registers (tuples have tag 0)."""

    tag: int
    num_fields: int
    fields: tuple[int, ...]
    dst: int


class AllocClosure(Instruction, opcode=Opcode.AllocClosure, kinds=(_F, _I, _RS, _D),
                   text="alloc_closure {dst} {func_index}({free_vars})"):
    """Build a closure of function ``func_index`` capturing ``num_free_vars`` registers."""

    func_index: int
    num_free_vars: int
    free_vars: tuple[int, ...]
    dst: int


class GetField(Instruction, opcode=Opcode.GetField, kinds=(_R, _I, _D),
               text="get_field {dst} {object}[{field_index}]"):
    """``dst = object.fields[field_index]`` for the ADT in register ``object``."""

    object: int
    field_index: int
    dst: int


class GetTag(Instruction, opcode=Opcode.GetTag, kinds=(_R, _D), text="get_tag {dst} {object}"):
    """``dst`` = the tag of the ADT in register ``object``, as an int32 scalar tensor."""

    object: int
    dst: int


class If(Instruction, opcode=Opcode.If, kinds=(_R, _R, _J, _J),
         text="if {test} {target} {true_offset} {false_offset}"):
    """Jump by ``true_offset`` if the scalar values in ``test`` and ``target`` are equal,
    else by ``false_offset``."""

    test: int
    target: int
    true_offset: int
    false_offset: int


class Goto(Instruction, opcode=Opcode.Goto, kinds=(_J,), text="goto {pc_offset}"):
    """Jump by ``pc_offset``."""

    pc_offset: int


class Invoke(Instruction, opcode=Opcode.Invoke, kinds=(_F, _RS, _D),
             text="invoke {dst} {func_index}({args})"):
    """Call function ``func_index`` with ``args``; its result goes to ``dst``."""

    func_index: int
    args: tuple[int, ...]
    dst: int


class InvokeClosure(Instruction, opcode=Opcode.InvokeClosure, kinds=(_R, _RS, _D),
                    text="invoke_closure {dst} {closure}({args})"):
    """Call the closure in register ``closure`` with its captured values, then ``args``."""

    closure: int
    args: tuple[int, ...]
    dst: int


class LoadConst(Instruction, opcode=Opcode.LoadConst, kinds=(Kind.CONST, _D),
                text="load_const {dst} {const_index}"):
    """``dst`` = constant ``const_index`` of the constant pool."""

    const_index: int
    dst: int


class LoadConsti(Instruction, opcode=Opcode.LoadConsti, kinds=(_I, _D),
                 text="load_consti {dst} {val}"):
    """``dst`` = the integer ``val`` as an int64 scalar (0-d) tensor."""

    val: int
    dst: int


class ShapeOf(Instruction, opcode=Opcode.ShapeOf, kinds=(_R, _D), text="shape_of {dst} {tensor}"):
    """``dst`` = the shape of the tensor in ``tensor``, as an int64 1-D tensor."""

    tensor: int
    dst: int


class ReshapeTensor(Instruction, opcode=Opcode.ReshapeTensor, kinds=(_R, _R, _D),
                    text="reshape_tensor {dst} {tensor} {newshape}"):
    """``dst`` = a view of ``tensor`` with the shape held in register ``newshape``."""

    tensor: int
    newshape: int
    dst: int


class DeviceCopy(Instruction, opcode=Opcode.DeviceCopy, kinds=(_R, _DV, _DV, _D),
                 text="device_copy {dst} {src} {dst_device_index} {src_device_index}"):
    """Copy ``src`` between virtual devices (the same object when both are the CPU)."""

    src: int
    src_device_index: int
    dst_device_index: int
    dst: int


class KillRegister(Instruction, opcode=Opcode.KillRegister, kinds=(_D,),
                   text="kill_register {dst}"):
    """Clear register ``dst`` so its object (and storage) can be freed before the frame ends."""

    dst: int


INSTRUCTION_TYPES: dict[Opcode, type[Instruction]] = {
    cls.opcode: cls for cls in (Move, Ret, Fatal, InvokePacked, AllocTensor, AllocTensorReg,
                                AllocStorage, AllocADT, AllocClosure, GetField, GetTag, If, Goto,
                                Invoke, InvokeClosure, LoadConst, LoadConsti, ShapeOf,
                                ReshapeTensor, DeviceCopy, KillRegister)}
BY_MNEMONIC: dict[str, type[Instruction]] = {c.mnemonic: c for c in INSTRUCTION_TYPES.values()}
# Instructions after which control does not fall through to the next one.
TERMINATORS = (Ret, Fatal, Goto, If)
assert len(INSTRUCTION_TYPES) == len(Opcode), "every opcode needs an instruction class"
