"""Register dataflow for the verifier: what each register may hold at each instruction.

A forward analysis over a function's control flow (a work list, no recursion) computes, for
every reachable instruction, the registers written on *every* path to it, the kinds of value
each may hold (tensor, storage block, ADT, closure, or anything), the integer a register holds
when ``load_consti`` put it there on every path, and the byte size of a storage block whose
``alloc_storage`` size was such a constant. With that the verifier rejects, before anything
runs: reads of empty registers, operands of the wrong kind (``alloc_tensor`` from a register
that holds a tensor), and tensors carved past the end of a storage block of known size (the
common case: the compiler sizes blocks with constants), so a forged shape or offset can never
make the VM read or write outside a block.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtype import DataType
from . import instructions as I
from .program import VMFunction

TENSOR, STORAGE, ADT, CLOSURE = 1, 2, 4, 8
ANY = TENSOR | STORAGE | ADT | CLOSURE
KIND_NAMES = {TENSOR: "a tensor", STORAGE: "a storage block", ADT: "an ADT",
              CLOSURE: "a closure"}
# Operands that must hold one kind of value: (instruction class, field) -> allowed kinds.
EXPECTED: dict[tuple[type, str], int] = {
    (I.AllocTensor, "storage"): STORAGE, (I.AllocTensorReg, "storage"): STORAGE,
    (I.AllocTensor, "offset"): TENSOR, (I.AllocTensorReg, "offset"): TENSOR,
    (I.AllocTensorReg, "shape_register"): TENSOR, (I.AllocStorage, "size"): TENSOR,
    (I.ReshapeTensor, "tensor"): TENSOR, (I.ReshapeTensor, "newshape"): TENSOR,
    (I.ShapeOf, "tensor"): TENSOR, (I.If, "test"): TENSOR, (I.If, "target"): TENSOR,
    (I.GetField, "object"): ADT, (I.GetTag, "object"): ADT,
    (I.InvokeClosure, "closure"): CLOSURE, (I.InvokePacked, "args"): TENSOR | ADT,
}
_WRITES = {I.LoadConst: TENSOR, I.LoadConsti: TENSOR, I.ShapeOf: TENSOR, I.GetTag: TENSOR,
           I.AllocTensor: TENSOR, I.AllocTensorReg: TENSOR, I.ReshapeTensor: TENSOR,
           I.AllocStorage: STORAGE, I.AllocADT: ADT, I.AllocClosure: CLOSURE}


@dataclass
class State:
    """What is known before an instruction runs."""

    written: int  # bit set of registers written on every path
    kinds: dict[int, int] = field(default_factory=dict)  # register -> kinds (absent: ANY)
    consts: dict[int, int] = field(default_factory=dict)  # register -> load_consti value
    sizes: dict[int, int] = field(default_factory=dict)  # storage register -> bytes

    def kind(self, reg: int) -> int:
        return self.kinds.get(reg, ANY)

    def join(self, other: State) -> State:
        return State(self.written & other.written,
                     {r: k | other.kind(r) for r, k in self.kinds.items() if r in other.kinds},
                     _agree(self.consts, other.consts), _agree(self.sizes, other.sizes))


def _agree(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    return {r: v for r, v in a.items() if b.get(r) == v}


def successors(pc: int, ins: I.Instruction) -> tuple[int, ...]:
    if isinstance(ins, (I.Ret, I.Fatal)):
        return ()
    if isinstance(ins, I.Goto):
        return (pc + ins.pc_offset,)
    if isinstance(ins, I.If):
        return (pc + ins.true_offset, pc + ins.false_offset)
    return (pc + 1,)


def transfer(state: State, ins: I.Instruction) -> State:
    """The state after ``ins``."""
    out = State(state.written, dict(state.kinds), dict(state.consts), dict(state.sizes))
    for dst in ins.writes():
        for table in (out.kinds, out.consts, out.sizes):
            table.pop(dst, None)
        if isinstance(ins, I.KillRegister):
            out.written &= ~(1 << dst)
            continue
        out.written |= 1 << dst
        if isinstance(ins, (I.Move, I.DeviceCopy)):  # dst gets what src had
            for mine, theirs in ((out.kinds, state.kinds), (out.consts, state.consts),
                                 (out.sizes, state.sizes)):
                if ins.src in theirs:
                    mine[dst] = theirs[ins.src]
        elif type(ins) in _WRITES:
            out.kinds[dst] = _WRITES[type(ins)]
        if isinstance(ins, I.LoadConsti):
            out.consts[dst] = ins.val
        if isinstance(ins, I.AllocStorage) and ins.size in state.consts:
            out.sizes[dst] = state.consts[ins.size]
    return out


def analyse(func: VMFunction) -> list[State | None]:
    """The state before each instruction (None where unreachable)."""
    code = func.instructions
    states: list[State | None] = [None] * len(code)
    states[0] = State((1 << func.arity) - 1)
    work = [0]
    while work:
        pc = work.pop()
        before = states[pc]
        assert before is not None, "only reached instructions are on the work list"
        after = transfer(before, code[pc])
        for nxt in successors(pc, code[pc]):
            old = states[nxt]
            new = after if old is None else old.join(after)
            if old is None or new != old:
                states[nxt] = new
                work.append(nxt)
    return states


def problem(state: State, ins: I.Instruction) -> str | None:
    """Why ``ins`` cannot run in ``state``, or None."""
    for r in ins.reads():
        if not state.written >> r & 1:
            return f"register ${r} is read before it is written (on some path to here)"
    for name, _kind, value in ins.operands():
        want = EXPECTED.get((type(ins), name))
        if want is None:
            continue
        for r in value if isinstance(value, tuple) else (value,):
            if not state.kind(r) & want:
                return (f"{name}: register ${r} holds {_kinds(state.kind(r))}, expected "
                        f"{_kinds(want)}")
    if isinstance(ins, I.AllocStorage) and state.consts.get(ins.size, 0) < 0:
        return f"size register ${ins.size} holds the negative size {state.consts[ins.size]}"
    if isinstance(ins, I.AllocTensor):
        return _fits(state, ins)
    return None


def _fits(state: State, ins: I.AllocTensor) -> str | None:
    size, offset = state.sizes.get(ins.storage), state.consts.get(ins.offset)
    if size is None or offset is None:
        return None  # sized at run time: the step checks the block's bounds
    nbytes = int(np.prod(ins.shape, dtype=object)) * DataType(ins.dtype).numpy_dtype.itemsize
    if offset < 0 or offset + nbytes > size:
        shape = ", ".join(map(str, ins.shape))
        return (f"a {ins.dtype}[{shape}] tensor ({nbytes} bytes) at offset {offset} does not fit "
                f"in the {size}-byte storage block in ${ins.storage}")
    return None


def _kinds(mask: int) -> str:
    if mask == ANY:
        return "any value"
    return " or ".join(name for bit, name in KIND_NAMES.items() if mask & bit) or "nothing"
