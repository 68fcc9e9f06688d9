"""Forged executables: programs written by ``serialize`` (so with a valid checksum) but with an
operand that points outside what it indexes, or a register of the wrong kind. Loading must
fail in the verifier with the place named (``functions['main'].instructions[3]
(AllocTensor): ...``), before a VM could run any of it."""
from __future__ import annotations

import numpy as np
import pytest

from ember.runtime.device import cpu
from ember.runtime.vm import VerificationError, VMFunction
from ember.runtime.vm import instructions as I
from ember.runtime.vm.program import Program
from ember.runtime.vm.serialize import deserialize, serialize

# main(x, y) = x + y on float32[4], the way the compiler writes it; $6 and $7 are spare.
GOOD = (I.LoadConsti(16, 2), I.AllocStorage(2, 64, "float32", 0, 3), I.LoadConsti(0, 4),
        I.AllocTensor(3, 4, (4,), "float32", 5), I.InvokePacked(0, 3, 1, (0, 1, 5)), I.Ret(5))


def forge(*patches: tuple[int, I.Instruction], regs: int = 8) -> bytes:
    """The bytes of the good program with instructions replaced: checksummed, unverified."""
    code = list(GOOD)
    for pc, ins in patches:
        code[pc] = ins
    funcs = [VMFunction("main", ("x", "y"), tuple(code), regs),
             VMFunction("pair", ("a", "b"), (I.AllocADT(0, 2, (0, 1), 2), I.Ret(2)), 3)]
    prog = Program(funcs, [np.zeros(2, "float32")], ["vm_add_f32"], [cpu(0)], 0, [0])
    return bytes(serialize(prog))


def test_the_unforged_program_loads():
    assert len(deserialize(forge()).functions) == 2


@pytest.mark.parametrize("pc, ins, message", [
    (3, I.AllocTensor(3, 4, (4,), "float32", 9),
     r"functions\['main'\]\.instructions\[3\] \(AllocTensor\): register \$9 out of range "
     r"\(frame has 8\)"),
    (2, I.LoadConst(1, 4), r"instructions\[2\] \(LoadConst\): const_index: constant index 1 "
                           r"out of range \(1 constants\)"),
    (4, I.InvokePacked(1, 3, 1, (0, 1, 5)), r"\(InvokePacked\): packed_index: kernel index 1 "
                                            r"out of range \(1 primitive ops\)"),
    (4, I.Invoke(2, (0, 1), 5), r"\(Invoke\): func_index: function index 2 out of range "
                                r"\(2 functions\)"),
    (4, I.Invoke(1, (0,), 5), r"passes 1 arguments to function 'pair', which takes 2"),
    (5, I.Goto(-6), r"instructions\[5\] \(Goto\): pc_offset: jump target -1"),
    (4, I.AllocADT(-1, 0, (), 6), r"\(AllocADT\): constructor tag -1 out of range"),
    (4, I.AllocADT(1 << 31, 0, (), 6), r"constructor tag 2147483648 out of range"),
    (1, I.AllocStorage(2, 64, "float32", 3, 3), r"\(AllocStorage\): device_index: device "
                                                r"index 3 out of range \(1 virtual devices\)"),
    (4, I.DeviceCopy(0, 0, 5, 6), r"\(DeviceCopy\): dst_device_index: device index 5"),
    # Registers of the wrong kind: a tensor used as storage, storage as a shape, and so on.
    (3, I.AllocTensor(2, 4, (4,), "float32", 5), r"\(AllocTensor\): storage: register \$2 holds "
                                                 r"a tensor, expected a storage block"),
    (4, I.If(3, 4, 1, 1), r"\(If\): test: register \$3 holds a storage block, expected a tensor"),
    (4, I.GetField(2, 0, 6), r"\(GetField\): object: register \$2 holds a tensor, expected an "
                             r"ADT"),
    (4, I.InvokeClosure(5, (), 6), r"closure: register \$5 holds a tensor, expected a closure"),
    (4, I.InvokePacked(0, 3, 1, (0, 3, 5)), r"args: register \$3 holds a storage block, "
                                            r"expected a tensor or an ADT"),
    # Shapes and offsets past the end of a block of known size.
    (3, I.AllocTensor(3, 4, (1 << 40,), "float32", 5),
     r"\(AllocTensor\): a float32\[1099511627776\] tensor \(4398046511104 bytes\) at offset 0 "
     r"does not fit in the 16-byte storage block in \$3"),
    (2, I.LoadConsti(8, 4), r"instructions\[3\] \(AllocTensor\): a float32\[4\] tensor "
                            r"\(16 bytes\) at offset 8 does not fit"),
    (0, I.LoadConsti(-16, 2), r"instructions\[1\] \(AllocStorage\): size register \$2 holds "
                              r"the negative size -16"),
    (2, I.KillRegister(3), r"instructions\[3\] \(AllocTensor\): register \$3 is read before it "
                           r"is written"),
])
def test_forged_operands_fail_in_the_verifier(pc, ins, message):
    data = forge((pc, ins))
    with pytest.raises(VerificationError, match=r"^vm executable: .*" + message):
        deserialize(data)


def test_a_storage_register_moved_around_keeps_its_kind_and_size():
    # move the storage to $6, then carve from $6: still checked against the 16-byte block.
    data = forge((2, I.Move(3, 6)), (3, I.AllocTensor(6, 2, (5,), "float32", 5)))
    with pytest.raises(VerificationError, match=r"float32\[5\] tensor \(20 bytes\) at offset 16"):
        deserialize(data)


def test_register_file_too_small_for_the_parameters():
    with pytest.raises(VerificationError, match="register file size 1 must be between the "
                                                "parameter count 2"):
        deserialize(forge(regs=1))
