"""Instructions: the text form (as TVM prints it), the integer encoding, and the assembler;
laws: text and fields round-trip every instruction, a listing assembles back."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.runtime.vm import Executable, VMFunction
from ember.runtime.vm import instructions as I
from ember.runtime.vm.assembler import AssemblyError, parse_functions, parse_instruction
from ember.runtime.vm.instructions import INSTRUCTION_TYPES, Kind
from ember.runtime.vm.serialize import from_fields, to_fields

TEXTS = [
    (I.Move(1, 2), "move $2 $1"),
    (I.Ret(3), "ret $3"),
    (I.Fatal(), "fatal"),
    (I.InvokePacked(2, 3, 1, (0, 1, 4)), "invoke_packed PackedFunc[2] (in: $0, $1, out: $4)"),
    (I.AllocTensor(3, 1, (2, 3), "float32", 4), "alloc_tensor $4 $3 $1 [2, 3] float32"),
    (I.AllocTensorReg(3, 1, 5, "int8", 4), "alloc_tensor_reg $4 $3 $1 $5 int8"),
    (I.AllocStorage(2, 64, "float32", 0, 3), "alloc_storage $3 $2 64 float32 0"),
    (I.AllocADT(0, 2, (1, 2), 3), "alloc_data $3 tag(0) [$1, $2]"),
    (I.AllocClosure(1, 1, (0,), 2), "alloc_closure $2 VMFunc[1]($0)"),
    (I.GetField(1, 0, 2), "get_field $2 $1[0]"),
    (I.GetTag(1, 2), "get_tag $2 $1"),
    (I.If(1, 2, 1, 3), "if $1 $2 1 3"),
    (I.Goto(-4), "goto -4"),
    (I.Invoke(0, (1, 2), 3), "invoke $3 VMFunc[0]($1, $2)"),
    (I.InvokeClosure(1, (2,), 3), "invoke_closure $3 $1($2)"),
    (I.LoadConst(0, 1), "load_const $1 Const[0]"),
    (I.LoadConsti(-7, 1), "load_consti $1 -7"),
    (I.ShapeOf(0, 1), "shape_of $1 $0"),
    (I.ReshapeTensor(0, 1, 2), "reshape_tensor $2 $0 $1"),
    (I.DeviceCopy(0, 1, 0, 2), "device_copy $2 $0 0 1"),
    (I.KillRegister(4), "kill_register $4"),
]


@pytest.mark.parametrize("ins, text", TEXTS, ids=[t.split()[0] for _, t in TEXTS])
def test_text_form(ins: I.Instruction, text: str) -> None:
    assert str(ins) == text
    assert parse_instruction(text) == ins


def test_every_opcode_has_a_text_example() -> None:
    assert {type(ins) for ins, _ in TEXTS} == set(INSTRUCTION_TYPES.values())


def test_records_are_immutable_and_checked() -> None:
    ins = I.Move(1, 2)
    with pytest.raises(AttributeError, match="immutable"):
        ins.src = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing operands dst"):
        I.Move(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes 2 operands"):
        I.Move(1, 2, 3)  # type: ignore[call-arg]
    assert ins.replace(dst=5) == I.Move(1, 5) and hash(ins) == hash(I.Move(1, 2))
    assert repr(ins) == "Move(src=1, dst=2)"
    assert I.AllocADT(0, 2, [1, 2], 3).fields == (1, 2)  # lists are stored as tuples


def _operand(kind: Kind) -> st.SearchStrategy[Any]:
    small = st.integers(0, 1000)
    return {Kind.REGS: st.lists(small, max_size=5).map(tuple),
            Kind.SHAPE: st.lists(small, max_size=4).map(tuple),
            Kind.DTYPE: st.sampled_from(["float32", "int64", "bool", "uint8", "float16"]),
            Kind.INT: st.integers(-(1 << 40), 1 << 40),
            Kind.JUMP: st.integers(-100, 100).filter(bool)}.get(kind, small)


@st.composite
def instructions(draw: st.DrawFn) -> I.Instruction:
    cls = draw(st.sampled_from(sorted(INSTRUCTION_TYPES.values(), key=lambda c: c.opcode)))
    values = [draw(_operand(k)) for k in cls.KINDS]
    ins = cls(*values)
    # The text leaves out counts that are list lengths: make them consistent.
    fix = {"num_fields": "fields", "num_free_vars": "free_vars", "arity": "args"}
    changes = {n: len(getattr(ins, src)) for n, src in fix.items() if n in cls.FIELDS}
    if cls is I.InvokePacked:
        changes["output_size"] = draw(st.integers(0, len(ins.args)))  # type: ignore[attr-defined]
    return ins.replace(**changes) if changes else ins


@given(instructions())
def test_fields_round_trip(ins: I.Instruction) -> None:
    assert from_fields(int(ins.opcode), to_fields(ins)) == ins


@given(instructions())
def test_text_round_trip(ins: I.Instruction) -> None:
    assert parse_instruction(str(ins)) == ins


def test_bad_fields() -> None:
    with pytest.raises(ValueError, match="unknown opcode 99"):
        from_fields(99, [])
    with pytest.raises(ValueError, match="Move: operand dst runs past"):
        from_fields(int(I.Opcode.Move), [1])
    with pytest.raises(ValueError, match="Move: 1 unexpected extra fields"):
        from_fields(int(I.Opcode.Move), [1, 2, 3])
    with pytest.raises(ValueError, match="invalid dtype"):
        from_fields(int(I.Opcode.AllocTensor), [0, 0, 0, 77, 32, 1, 1])


PROGRAM = """
f(a, b):
    # param types = float32[2, ?], -
    load_consti $2 1          # a comment
loop:
    if $0 $2 @out 1
    goto @loop
out:
    ret $1
g():
    fatal
"""


def test_assembler_labels_types_and_register_count() -> None:
    f, g = parse_functions(PROGRAM)
    assert f.params == ("a", "b") and f.register_file_size == 3 and g.register_file_size == 0
    assert f.instructions[1] == I.If(0, 2, 2, 1) and f.instructions[2] == I.Goto(-1)
    assert str(f.param_types[0]) == "float32[2, ?]" and f.param_types[1] is None


def test_listing_assembles_back() -> None:
    exe = Executable.from_functions(PROGRAM)
    assert parse_functions(exe.bytecode) == exe.functions


@pytest.mark.parametrize("text, message", [
    ("move $1 $2", r"line 1: expected a function header"),
    ("f():\n    jump 3", r"line 2: not an instruction: 'jump 3'"),
    ("f():\n    move $1", r"line 2: not an instruction: 'move \$1' \(expected move \{dst\}"),
    ("f():\n    goto @nowhere", r"line 2: unknown label @nowhere"),
    ("f(x):\n    # param types = float32(3)\n    ret $0", r"line 2: bad parameter type"),
])
def test_assembler_errors(text: str, message: str) -> None:
    with pytest.raises(AssemblyError, match=message):
        parse_functions(text)


def test_from_functions_accepts_records() -> None:
    func = VMFunction("main", ("x",), (I.Ret(0),), 1)
    exe = Executable.from_functions([func])
    assert exe.globals == ["main"] and exe.get_function_arity("main") == 1
    assert exe.get_function_param_name("main", 0) == "x"
    assert "Globals (#1): [('main', 0)]" in exe.stats
    assert exe.virtual_devices == "VirtualDevice[0]: cpu(0) (host)"
