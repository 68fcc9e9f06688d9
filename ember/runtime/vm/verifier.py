"""The bytecode verifier: checks a whole Program before any of it runs.

Every operand is checked against what it indexes (registers against the frame, functions,
constants, kernels and devices against the program, jump targets against the function,
constructor tags against int32), every register read must have been written on every path
to it and hold the kind of value its operand needs (``regflow.py``), and tensors carved from
a storage block of constant size must fit in it, so the interpreter can index without checks
of its own. A failure names the place::

    vm executable: functions['main'].instructions[17] (AllocTensor): register $9 out of range
    (frame has 8)
"""
from __future__ import annotations

from ..errors import ArtifactError
from ..ndarray import NDArray, _parse_dtype
from . import regflow
from .instructions import (
    TERMINATORS,
    AllocADT,
    AllocClosure,
    AllocStorage,
    Instruction,
    Invoke,
    InvokePacked,
    Kind,
)
from .program import ListInfo, Program, TensorInfo, VMFunction

MAX_REGISTERS = 1 << 20  # a frame is a Python list of this many slots; more means corruption
MAX_TAG = 1 << 31
_INT64 = (-(1 << 63), (1 << 63) - 1)


class VerificationError(ArtifactError):
    """A program failed verification; the message names the function, instruction and why."""


def _where(func: VMFunction, pc: int | None = None, ins: Instruction | None = None) -> str:
    at = f"vm executable: functions[{func.name!r}]"
    if pc is not None:
        at += f".instructions[{pc}]"
        if ins is not None:
            at += f" ({type(ins).__name__})"
    return at


def check_dtype(dtype: str) -> str | None:
    """Why ``dtype`` cannot be a tensor's dtype, or None if it can."""
    try:
        dt, _ = _parse_dtype(dtype)
    except (ValueError, TypeError) as err:
        return f"invalid dtype {dtype!r} ({err})"
    if dt.lanes != 1:
        return f"vector dtype {dtype!r} is not supported by the VM"
    return None


def verify(prog: Program) -> None:
    """Raise VerificationError describing the first problem found in ``prog``."""
    _verify_tables(prog)
    names: set[str] = set()
    for func in prog.functions:
        if not func.name or func.name in names:
            raise VerificationError(f"{_where(func)}: function name is empty or duplicated")
        names.add(func.name)
        _verify_signature(prog, func)
        for pc, ins in enumerate(func.instructions):
            problem = _check_instruction(prog, func, pc, ins)
            if problem:
                raise VerificationError(f"{_where(func, pc, ins)}: {problem}")
        _check_flow(func)


def _verify_tables(prog: Program) -> None:
    if not prog.virtual_devices:
        raise VerificationError("vm executable: no virtual devices")
    if not 0 <= prog.host_device_index < len(prog.virtual_devices):
        raise VerificationError(f"vm executable: host device index {prog.host_device_index} "
                                f"out of range ({len(prog.virtual_devices)} virtual devices)")
    if len(prog.const_device_indexes) != len(prog.constants):
        raise VerificationError(f"vm executable: {len(prog.constants)} constants but "
                                f"{len(prog.const_device_indexes)} constant device indexes")
    for i, (const, dev) in enumerate(zip(prog.constants, prog.const_device_indexes)):
        if const is not None and not isinstance(const, NDArray):
            raise VerificationError(f"vm executable: constants[{i}] is a "
                                    f"{type(const).__name__}, expected an NDArray")
        if not 0 <= dev < len(prog.virtual_devices):
            raise VerificationError(f"vm executable: constants[{i}]: device index {dev} out "
                                    f"of range ({len(prog.virtual_devices)} virtual devices)")
    for i, name in enumerate(prog.primitive_ops):
        if not name:
            raise VerificationError(f"vm executable: primitive_ops[{i}] has an empty name")
    if not prog.functions:
        raise VerificationError("vm executable: no functions")


def _verify_signature(prog: Program, func: VMFunction) -> None:
    if len(set(func.params)) != len(func.params):
        raise VerificationError(f"{_where(func)}: duplicate parameter names {func.params}")
    if not len(func.params) <= func.register_file_size <= MAX_REGISTERS:
        raise VerificationError(f"{_where(func)}: register file size {func.register_file_size} "
                                f"must be between the parameter count {len(func.params)} and "
                                f"{MAX_REGISTERS}")
    if len(func.param_device_indexes) != len(func.params):
        raise VerificationError(f"{_where(func)}: {len(func.params)} parameters but "
                                f"{len(func.param_device_indexes)} parameter device indexes")
    for i, dev in enumerate(func.param_device_indexes):
        if not 0 <= dev < len(prog.virtual_devices):
            raise VerificationError(f"{_where(func)}: parameter {i} ({func.params[i]}): device "
                                    f"index {dev} out of range")
    if func.param_types and len(func.param_types) != len(func.params):
        raise VerificationError(f"{_where(func)}: {len(func.params)} parameters but "
                                f"{len(func.param_types)} parameter types")
    for i, ty in enumerate(func.param_types):
        if isinstance(ty, ListInfo):
            problem = (None if ty.cons_tag != ty.nil_tag else
                       f"list type with equal Cons and Nil tags ({ty.cons_tag})")
        else:
            problem = None if ty is None else (check_dtype(ty.dtype)
                                               if isinstance(ty, TensorInfo)
                                               else f"type is a {type(ty).__name__}")
        if problem:
            raise VerificationError(f"{_where(func)}: parameter {i} ({func.params[i]}): "
                                    f"{problem}")
    if not func.instructions:
        raise VerificationError(f"{_where(func)}: no instructions")
    last = func.instructions[-1]
    if not isinstance(last, TERMINATORS):
        raise VerificationError(f"{_where(func, len(func.instructions) - 1, last)}: control "
                                "falls off the end of the function (expected ret, goto, if "
                                "or fatal last)")


def _check_flow(func: VMFunction) -> None:
    """Register reads, operand kinds and static storage bounds, on every path (regflow.py)."""
    for pc, (ins, state) in enumerate(zip(func.instructions, regflow.analyse(func))):
        problem = None if state is None else regflow.problem(state, ins)
        if problem:
            raise VerificationError(f"{_where(func, pc, ins)}: {problem}")


def _check_instruction(prog: Program, func: VMFunction, pc: int, ins: Instruction) -> str | None:
    """Why ``ins`` is invalid at ``pc`` in ``func``, or None."""
    size = func.register_file_size
    for name, kind, value in ins.operands():
        values = value if kind in (Kind.REGS, Kind.SHAPE) else (value,)
        if kind is Kind.DTYPE:
            problem = check_dtype(value)
            if problem:
                return f"{name}: {problem}"
            continue
        for v in values:
            if not isinstance(v, int):
                return f"{name}: expected an integer, got {type(v).__name__} {v!r}"
            problem = _check_operand(prog, func, pc, kind, v, size)
            if problem:
                return problem if kind in (Kind.REG, Kind.DST) else f"{name}: {problem}"
    return _check_specific(prog, ins)


def _check_operand(prog: Program, func: VMFunction, pc: int, kind: Kind, v: int,
                   size: int) -> str | None:
    if kind in (Kind.REG, Kind.DST, Kind.REGS):
        return None if 0 <= v < size else f"register ${v} out of range (frame has {size})"
    tables = {Kind.FUNC: (len(prog.functions), "function index", "functions"),
              Kind.CONST: (len(prog.constants), "constant index", "constants"),
              Kind.PACKED: (len(prog.primitive_ops), "kernel index", "primitive ops"),
              Kind.DEVICE: (len(prog.virtual_devices), "device index", "virtual devices")}
    if kind in tables:
        count, what, of = tables[kind]
        return None if 0 <= v < count else f"{what} {v} out of range ({count} {of})"
    if kind is Kind.JUMP:
        n = len(func.instructions)
        if v == 0:
            return "jump offset 0 would loop forever"
        return None if 0 <= pc + v < n else (f"jump target {pc + v} (offset {v:+d}) out of "
                                              f"range (function has {n} instructions)")
    if kind is Kind.SHAPE:
        return None if 0 <= v < (1 << 62) else f"invalid dimension {v}"
    return None if _INT64[0] <= v <= _INT64[1] else f"immediate {v} does not fit in int64"


def _check_specific(prog: Program, ins: Instruction) -> str | None:
    """Checks that relate operands to each other or to the called function."""
    if isinstance(ins, InvokePacked):
        if ins.arity != len(ins.args):
            return f"arity {ins.arity} but {len(ins.args)} argument registers"
        if not 0 <= ins.output_size <= ins.arity:
            return f"output size {ins.output_size} not between 0 and the arity {ins.arity}"
    elif isinstance(ins, AllocADT):
        if ins.num_fields != len(ins.fields):
            return f"tag {ins.tag} with {ins.num_fields} fields but {len(ins.fields)} registers"
        if not 0 <= ins.tag < MAX_TAG:  # get_tag hands tags out as int32
            return f"constructor tag {ins.tag} out of range (0 to {MAX_TAG - 1})"
    elif isinstance(ins, AllocClosure):
        callee = prog.functions[ins.func_index]
        if ins.num_free_vars != len(ins.free_vars) or ins.num_free_vars > callee.arity:
            return (f"{ins.num_free_vars} free variables ({len(ins.free_vars)} registers) for "
                    f"function {callee.name!r} of arity {callee.arity}")
    elif isinstance(ins, Invoke):
        callee = prog.functions[ins.func_index]
        if len(ins.args) != callee.arity:
            return (f"passes {len(ins.args)} arguments to function {callee.name!r}, which takes "
                    f"{callee.arity}")
    elif isinstance(ins, AllocStorage):
        if ins.alignment <= 0 or ins.alignment & (ins.alignment - 1) or ins.alignment > 4096:
            return f"alignment {ins.alignment} is not a power of two up to 4096"
    elif getattr(ins, "field_index", 0) < 0:
        return f"negative field index {ins.field_index}"  # type: ignore[attr-defined]
    return None
