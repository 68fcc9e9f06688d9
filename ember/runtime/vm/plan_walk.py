"""The walk behind a VM plan: a straight-line function run once over what is known before it
runs, its shapes static or symbolic.

``Walk(func, ctx, args, max_block_bytes)`` follows the instructions with the interpreter's
semantics over abstract values: constants and immediates (NDArrays, known), arguments (their
dtype and rank known; their shape static where the parameter type says so, else read at run
time), storage blocks (of a static size, or of a size a kernel computes at run time), tensors
carved from them (of a static shape, or of a shape held in an int64 tensor at run time) and
tuples. It records the kernel calls and the run-time facts a plan must check before a kernel
uses them (``Check``: a block's size, a tensor that must fit in its block, a reshape that must
keep the element count), each at the point of the walk where the interpreter would check it.

Whatever the walk cannot follow (control flow, calls, closures, a result that is an argument
or a constant, two views of one result block, a vector dtype, a block on another device)
raises ``NotStatic`` with the reason; the function is then interpreted.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..container import ADT
from ..device import cpu
from ..dtype import DataType
from ..errors import TVMError
from ..ndarray import NDArray
from ..packed_func import CPackedFunc
from . import instructions as I
from .program import TensorInfo, VMFunction
from .steps import DecodeContext, frozen_scalar, scalar, shape_value

INT64 = DataType("int64")


class NotStatic(Exception):
    """The function (on these arguments) cannot be planned; the message says why."""


class Arg:
    """Argument ``index`` as the base of tensors (its data pointer is known per run)."""

    __slots__ = ("device", "index")

    def __init__(self, index: int, device: Any) -> None:
        self.index, self.device = index, device


class Block:
    """A storage block the function allocates (one per ``alloc_storage``: no loops).
    ``size`` is the run-time int64 scalar tensor holding its byte size, None when
    ``nbytes`` (static) is it; ``min_bytes`` what its static-shaped tensors need."""

    __slots__ = ("alignment", "device", "dtype_hint", "index", "min_bytes", "nbytes", "size")

    def __init__(self, index: int, nbytes: int, alignment: int, device: Any, dtype_hint: str,
                 size: Tensor | None = None) -> None:
        self.index, self.nbytes, self.alignment = index, nbytes, alignment
        self.device, self.dtype_hint, self.size = device, dtype_hint, size
        self.min_bytes = 0


class ArgShapes:
    """The run-time shapes of the arguments whose parameter type leaves a dimension open:
    one int64 slot per dimension, written by each run (``slots[i]``: the first slot of
    argument i's shape)."""

    __slots__ = ("count", "device", "slots")

    def __init__(self) -> None:
        self.slots: dict[int, int] = {}
        self.count = 0
        self.device = cpu(0)


class Tensor(NamedTuple):
    """A tensor of the walk: ``dtype`` at byte ``offset`` of ``base`` (an Arg, a Block, the
    ArgShapes, or a constant NDArray), of ``shape``: a tuple (static) or the int64 Tensor
    that holds it at run time."""

    base: Any
    offset: int
    shape: Any
    dtype: DataType

    @property
    def ndim(self) -> int:
        return len(self.shape) if type(self.shape) is tuple else self.shape.shape[0]

    @property
    def static(self) -> bool:
        return type(self.shape) is tuple

    def key(self) -> tuple[Any, ...]:
        shape = self.shape if type(self.shape) is tuple else ("run time", self.shape.key())
        return id(self.base), self.offset, shape, self.dtype


class Tuple_(NamedTuple):
    """An ADT built by ``alloc_data``."""

    tag: int
    fields: tuple[Any, ...]


class Call(NamedTuple):
    """A kernel call: the kernel's index, its flattened tensor arguments, how many of the
    last ones it writes."""

    kernel: int
    args: list[Tensor]
    outputs: int


class Check(NamedTuple):
    """A run-time fact to check before call number ``before`` (the calls walked so far):
    ``kind`` "size" (``item`` a dynamic Block: its size in [min_bytes, max]), "fit" (a
    Tensor with a run-time shape: non-negative extents inside its block) or "count" (``item``
    (source, reshaped): the same number of elements)."""

    before: int
    kind: str
    item: Any


class Walk:
    """The function run once over known values: blocks, calls, checks and the result."""

    def __init__(self, func: VMFunction, ctx: DecodeContext, args: Sequence[Any],
                 max_block_bytes: int) -> None:
        self.ctx, self.max_block_bytes = ctx, max_block_bytes
        self.blocks: list[Block] = []
        self.calls: list[Call] = []
        self.checks: list[Check] = []
        self.arg_shapes = ArgShapes()
        regs: list[Any] = [None] * func.register_file_size
        for i, arg in enumerate(args):
            regs[i] = self._arg(func, i, arg)
        self.result: Any = None
        for pc, ins in enumerate(func.instructions):
            if type(ins) is I.Ret:
                self.result = self._result(regs[ins.result], pc)
                return
            handler = _HANDLERS.get(type(ins))
            if handler is None:
                raise NotStatic(f"instructions[{pc}] ({ins}) is not straight-line")
            try:
                handler(self, ins, regs)
            except (NotStatic, TVMError) as err:
                raise NotStatic(f"instructions[{pc}] ({ins}): {err}") from None
        raise NotStatic("the function has no ret")  # the verifier rejects this

    def _arg(self, func: VMFunction, i: int, arg: Any) -> Tensor:
        if type(arg) is not NDArray:
            raise NotStatic(f"argument {i} ({func.params[i]}) is "
                            f"{'an ADT' if isinstance(arg, ADT) else type(arg).__name__}")
        ty = func.param_types[i] if func.param_types else None
        if isinstance(ty, TensorInfo) and min(ty.shape, default=0) >= 0:
            return Tensor(Arg(i, arg._device), 0, tuple(arg.shape), arg._dtype)
        shapes = self.arg_shapes  # an open dimension, or no declared type: read per run
        shapes.slots[i] = shapes.count
        shapes.count += len(arg.shape)
        holder = Tensor(shapes, 8 * shapes.slots[i], (len(arg.shape),), INT64)
        return Tensor(Arg(i, arg._device), 0, holder, arg._dtype)

    def _result(self, value: Any, pc: int) -> Any:
        fields = value.fields if type(value) is Tuple_ else (value,)
        seen: dict[int, Tensor] = {}
        for f in fields:
            if type(f) is not Tensor or type(f.base) is not Block:
                raise NotStatic(f"instructions[{pc}] returns a value that is not a tensor the "
                                "function allocated (an argument, a constant, a nested tuple)")
            if seen.setdefault(id(f.base), f) != f or f.dtype.lanes != 1:
                raise NotStatic(f"instructions[{pc}] returns two views of one block, or a "
                                "vector-typed tensor")
        return value

    def _check(self, kind: str, item: Any) -> None:
        self.checks.append(Check(len(self.calls), kind, item))

    # -- the instructions ---------------------------------------------------------------
    def move(self, ins: Any, regs: list[Any]) -> None:
        regs[ins.dst] = regs[ins.src]

    def load_const(self, ins: I.LoadConst, regs: list[Any]) -> None:
        regs[ins.dst] = self.ctx.constants[ins.const_index]

    def load_consti(self, ins: I.LoadConsti, regs: list[Any]) -> None:
        regs[ins.dst] = frozen_scalar(ins.val)  # a plan keeps those its kernels read

    def alloc_storage(self, ins: I.AllocStorage, regs: list[Any]) -> None:
        device = self.ctx.devices[ins.device_index]
        if device.device_type != 1:
            raise NotStatic(f"a block on {device} is left to the allocator")
        size = regs[ins.size]
        block = Block(len(self.blocks), 0, ins.alignment, device, ins.dtype_hint)
        if type(size) is NDArray:
            block.nbytes = int(scalar(size, "alloc_storage size"))
            if not 0 <= block.nbytes <= self.max_block_bytes:
                raise NotStatic(f"a block of {block.nbytes} bytes is left to the allocator")
        else:
            block.size = _int64_scalar(size, "the size")
            self._check("size", block)
        self.blocks.append(block)
        regs[ins.dst] = block

    def alloc_tensor(self, ins: I.AllocTensor, regs: list[Any]) -> None:
        self._carve(regs[ins.storage], regs[ins.offset], tuple(ins.shape), ins.dtype,
                    ins.dst, regs)

    def alloc_tensor_reg(self, ins: I.AllocTensorReg, regs: list[Any]) -> None:
        shape = regs[ins.shape_register]
        if type(shape) is NDArray:
            shape = shape_value(shape, "alloc_tensor_reg shape")
        self._carve(regs[ins.storage], regs[ins.offset], shape, ins.dtype, ins.dst, regs)

    def _carve(self, block: Any, offset_reg: Any, shape: Any, dtype: str, dst: int,
               regs: list[Any]) -> None:
        if type(block) is not Block:
            raise NotStatic("not a tensor inside a storage block")
        offset = int(scalar(_known(offset_reg, "the offset"), "alloc_tensor offset"))
        dt = DataType(dtype)
        if offset < 0 or dt.lanes != 1 and type(shape) is not tuple:
            raise NotStatic("not a tensor inside a storage block")
        if type(shape) is tuple:
            end = offset + int(np.prod(shape, dtype=np.int64)) * dt.numpy_dtype.itemsize
            if block.size is None and end > block.nbytes:
                raise NotStatic("not a tensor inside a storage block")
            block.min_bytes = max(block.min_bytes, end)
            regs[dst] = Tensor(block, offset, shape, dt)
            return
        regs[dst] = t = Tensor(block, offset, _shape_holder(shape), dt)
        self._check("fit", t)

    def reshape_tensor(self, ins: I.ReshapeTensor, regs: list[Any]) -> None:
        t = _tensor(regs[ins.tensor])
        new = regs[ins.newshape]
        shape = shape_value(new, "reshape_tensor") if type(new) is NDArray else \
            _shape_holder(new)
        if t.dtype.lanes != 1:
            raise NotStatic(f"cannot plan a reshape of {t.dtype}")
        out = t._replace(shape=shape)
        if t.static and type(shape) is tuple:
            if np.prod(shape, dtype=np.int64) != np.prod(t.shape, dtype=np.int64):
                raise NotStatic(f"cannot reshape {t.dtype}{list(t.shape)} to {list(shape)}")
        else:
            self._check("count", (t, out))
        regs[ins.dst] = out

    def shape_of(self, ins: I.ShapeOf, regs: list[Any]) -> None:
        t = _tensor(regs[ins.tensor])
        regs[ins.dst] = frozen_shape(t.shape) if t.static else t.shape

    def invoke_packed(self, ins: I.InvokePacked, regs: list[Any]) -> None:
        kernel = self.ctx.kernels[ins.packed_index]
        if not isinstance(kernel, CPackedFunc) or not kernel.address:
            raise NotStatic("the kernel is not compiled code")
        args: list[Tensor] = []
        outputs = 0
        for k, r in enumerate(ins.args):  # ADT arguments pass their fields, as interpreted
            v = regs[r]
            flat = [_tensor(f) for f in (v.fields if type(v) is Tuple_ else (v,))]
            args.extend(flat)
            if k >= len(ins.args) - ins.output_size:
                outputs += len(flat)
        self.calls.append(Call(ins.packed_index, args, outputs))

    def alloc_adt(self, ins: I.AllocADT, regs: list[Any]) -> None:
        regs[ins.dst] = Tuple_(ins.tag, tuple(regs[r] for r in ins.fields))

    def get_field(self, ins: I.GetField, regs: list[Any]) -> None:
        adt = regs[ins.object]
        if type(adt) is not Tuple_ or ins.field_index >= len(adt.fields):
            raise NotStatic("not a field of a tuple the function built")
        regs[ins.dst] = adt.fields[ins.field_index]

    def kill_register(self, ins: I.KillRegister, regs: list[Any]) -> None:
        regs[ins.dst] = None


_HANDLERS: dict[type, Callable[[Walk, Any, list[Any]], None]] = {
    I.Move: Walk.move, I.DeviceCopy: Walk.move, I.LoadConst: Walk.load_const,
    I.LoadConsti: Walk.load_consti, I.AllocStorage: Walk.alloc_storage,
    I.AllocTensor: Walk.alloc_tensor, I.AllocTensorReg: Walk.alloc_tensor_reg,
    I.ReshapeTensor: Walk.reshape_tensor, I.ShapeOf: Walk.shape_of,
    I.InvokePacked: Walk.invoke_packed, I.AllocADT: Walk.alloc_adt,
    I.GetField: Walk.get_field, I.KillRegister: Walk.kill_register,
}


def frozen_shape(shape: tuple[int, ...]) -> NDArray:
    """A static shape as the read-only int64 vector ``shape_of`` gives."""
    arr = NDArray(np.array(shape, dtype=np.int64), cpu(0), INT64)
    arr._np.flags.writeable = False
    return arr


def _known(value: Any, what: str) -> NDArray:
    """A value known before running (a constant or immediate), else NotStatic."""
    if type(value) is not NDArray:
        raise NotStatic(f"{what} is computed at run time")
    return value


def _tensor(value: Any) -> Tensor:
    if type(value) is Tensor:
        return value
    if type(value) is NDArray:  # a constant (load_const / load_consti)
        return Tensor(value, 0, tuple(value.shape), value._dtype)
    raise NotStatic("a kernel argument or reshape source is not a tensor")


def _int64_scalar(value: Any, what: str) -> Tensor:
    t = _tensor(value)
    if t.dtype != INT64 or not t.static or int(np.prod(t.shape, dtype=np.int64)) != 1:
        raise NotStatic(f"{what} is not an int64 scalar")
    return t


def _shape_holder(value: Any) -> Tensor:
    """The int64 vector tensor that holds a shape at run time."""
    t = _tensor(value)
    if t.dtype != INT64 or not t.static or len(t.shape) != 1:
        raise NotStatic("a run-time shape is not an int64 vector")
    return t


__all__ = ["Arg", "ArgShapes", "Block", "Call", "Check", "NotStatic", "Tensor", "Tuple_", "Walk",
           "frozen_shape"]
