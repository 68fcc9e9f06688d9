"""Static plans: a VM function without control flow, run as one native call.

A compiled model's ``main`` is usually straight-line code over static shapes: load constants,
allocate storage and tensors of immediate shapes, call kernels, return. The interpreter redoes
the same work on every run (a Python step per instruction, a storage block and an NDArray per
tensor, a ctypes call per kernel). A :class:`StaticPlan` does it once, on the function's first
call: it walks the instructions with the interpreter's semantics over what is known before
running (constants, immediates, storage blocks and the tensors carved from them, the
arguments' types) and keeps

- the blocks of intermediates, allocated once from the VM's allocator and reused by every run;
- one DLTensor per tensor a kernel reads or writes, and the kernel calls over them, made by
  one C call (``EmberRunCalls``, as the graph executor does);
- the blocks that hold the result, which every run takes afresh from the allocator (as the
  interpreter does), so a result never shares memory with a later run. Rather than a copy out
  of a buffer of the plan's: no copy, and the allocator counts what it counts for the
  interpreter (a naive allocator, one shared by several VMs, ``fresh_allocations``).

A run points the argument DLTensors at the arguments' data, takes the result blocks, makes
the calls and returns the result tensor (or ADT of tensors) carved from them. Whatever the walk
cannot know leaves the function to the interpreter, with the reason kept
(``VirtualMachine._plans``): control flow, calls and closures, shapes or sizes computed at run
time, a result that is an argument or a constant (or two views of one block, or of a vector
dtype). So do, run by run: arguments of other types
than the first call's, a plan already running (a call back into the VM from one of its
kernels; calls from other threads wait for the VM's lock), and a kernel failure (the
interpreter then runs the call again and raises its usual VMError).
"""
from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .._abi import DLTensor
from .._bridge import raise_error
from ..container import ADT
from ..device import Device
from ..dtype import DataType
from ..errors import TVMError
from ..executor_common import c_call_at, c_plan
from ..ndarray import NDArray
from ..packed_func import CPackedFunc
from . import instructions as I
from .memory import Allocator, Storage, dltensor_template, fast_ndarray
from .program import TensorInfo, VMFunction
from .steps import DecodeContext, frozen_scalar, scalar, shape_value

NOT_RUN: Any = object()  # what StaticPlan.run returns when the interpreter must run the call


class NotStatic(Exception):
    """The function (on these arguments) is not a static plan; the message says why."""


class _Arg:
    """Argument ``index`` as the base of tensors (its data pointer is known per run)."""

    __slots__ = ("index", "device")

    def __init__(self, index: int, device: Device) -> None:
        self.index, self.device = index, device


class _Block:
    """A storage block the function allocates (one per ``alloc_storage``: no loops)."""

    __slots__ = ("index", "nbytes", "alignment", "device", "dtype_hint")

    def __init__(self, index: int, nbytes: int, alignment: int, device: Device,
                 dtype_hint: str) -> None:
        self.index, self.nbytes, self.alignment = index, nbytes, alignment
        self.device, self.dtype_hint = device, dtype_hint


class _Tensor(NamedTuple):
    """A tensor of the walk: ``shape``/``dtype`` at byte ``offset`` of ``base`` (an _Arg, a
    _Block, or a constant NDArray)."""

    base: Any
    offset: int
    shape: tuple[int, ...]
    dtype: DataType

    def key(self) -> tuple[int, int, tuple[int, ...], DataType]:
        return id(self.base), self.offset, self.shape, self.dtype


class _Tuple(NamedTuple):
    """An ADT built by ``alloc_data``."""

    tag: int
    fields: tuple[Any, ...]


class Walk:
    """The function run once over known values: the kernel calls and the result."""

    def __init__(self, func: VMFunction, ctx: DecodeContext, args: Sequence[Any],
                 max_block_bytes: int) -> None:
        self.ctx, self.max_block_bytes = ctx, max_block_bytes
        self.blocks: list[_Block] = []
        self.calls: list[tuple[int, list[_Tensor]]] = []  # (kernel index, flattened args)
        regs: list[Any] = [None] * func.register_file_size
        for i, arg in enumerate(args):
            if type(arg) is not NDArray:
                raise NotStatic(f"argument {i} ({func.params[i]}) is "
                                f"{'an ADT' if isinstance(arg, ADT) else type(arg).__name__}")
            regs[i] = _Tensor(_Arg(i, arg._device), 0, arg.shape, arg._dtype)
        self.result: Any = None
        for pc, ins in enumerate(func.instructions):
            if type(ins) is I.Ret:
                self.result = self._result(regs[ins.result], pc)
                return
            handler = _HANDLERS.get(type(ins))
            if handler is None:
                raise NotStatic(f"instructions[{pc}] ({ins}) is not straight-line and static")
            try:
                handler(self, ins, regs)
            except (NotStatic, TVMError) as err:
                raise NotStatic(f"instructions[{pc}] ({ins}): {err}") from None
        raise NotStatic("the function has no ret")  # the verifier rejects this

    def _result(self, value: Any, pc: int) -> Any:
        fields = value.fields if type(value) is _Tuple else (value,)
        seen: dict[int, _Tensor] = {}
        for f in fields:
            if type(f) is not _Tensor or type(f.base) is not _Block:
                raise NotStatic(f"instructions[{pc}] returns a value that is not a tensor the "
                                "function allocated (an argument, a constant, a nested tuple)")
            if seen.setdefault(id(f.base), f) != f or f.dtype.lanes != 1:
                raise NotStatic(f"instructions[{pc}] returns two views of one block, or a "
                                "vector-typed tensor")
        return value

    # -- the instructions ---------------------------------------------------------------
    def move(self, ins: Any, regs: list[Any]) -> None:
        regs[ins.dst] = regs[ins.src]

    def load_const(self, ins: I.LoadConst, regs: list[Any]) -> None:
        regs[ins.dst] = self.ctx.constants[ins.const_index]

    def load_consti(self, ins: I.LoadConsti, regs: list[Any]) -> None:
        regs[ins.dst] = frozen_scalar(ins.val)  # a plan keeps those its kernels read

    def alloc_storage(self, ins: I.AllocStorage, regs: list[Any]) -> None:
        nbytes = int(scalar(_known(regs[ins.size], "the size"), "alloc_storage size"))
        device = self.ctx.devices[ins.device_index]
        if not 0 <= nbytes <= self.max_block_bytes or device.device_type != 1:
            raise NotStatic(f"a block of {nbytes} bytes on {device} is left to the allocator")
        block = _Block(len(self.blocks), nbytes, ins.alignment, device, ins.dtype_hint)
        self.blocks.append(block)
        regs[ins.dst] = block

    def alloc_tensor(self, ins: I.AllocTensor, regs: list[Any]) -> None:
        block = regs[ins.storage]
        offset = int(scalar(_known(regs[ins.offset], "the offset"), "alloc_tensor offset"))
        dt = DataType(ins.dtype)
        nbytes = int(np.prod(ins.shape, dtype=np.int64)) * dt.numpy_dtype.itemsize
        if type(block) is not _Block or offset < 0 or offset + nbytes > block.nbytes:
            raise NotStatic("not a tensor inside a storage block")
        regs[ins.dst] = _Tensor(block, offset, tuple(ins.shape), dt)

    def reshape_tensor(self, ins: I.ReshapeTensor, regs: list[Any]) -> None:
        t = _tensor(regs[ins.tensor])
        shape = shape_value(_known(regs[ins.newshape], "the new shape"), "reshape_tensor")
        if t.dtype.lanes != 1 or np.prod(shape, dtype=np.int64) != np.prod(t.shape,
                                                                          dtype=np.int64):
            raise NotStatic(f"cannot reshape {t.dtype}{list(t.shape)} to {list(shape)}")
        regs[ins.dst] = t._replace(shape=shape)

    def invoke_packed(self, ins: I.InvokePacked, regs: list[Any]) -> None:
        kernel = self.ctx.kernels[ins.packed_index]
        if not isinstance(kernel, CPackedFunc) or not kernel.address:
            raise NotStatic("the kernel is not compiled code")
        args: list[_Tensor] = []
        for r in ins.args:  # ADT arguments pass their fields, as in the interpreter
            v = regs[r]
            args.extend(_tensor(f) for f in (v.fields if type(v) is _Tuple else (v,)))
        self.calls.append((ins.packed_index, args))

    def alloc_adt(self, ins: I.AllocADT, regs: list[Any]) -> None:
        regs[ins.dst] = _Tuple(ins.tag, tuple(regs[r] for r in ins.fields))

    def get_field(self, ins: I.GetField, regs: list[Any]) -> None:
        adt = regs[ins.object]
        if type(adt) is not _Tuple or ins.field_index >= len(adt.fields):
            raise NotStatic("not a field of a tuple the function built")
        regs[ins.dst] = adt.fields[ins.field_index]

    def kill_register(self, ins: I.KillRegister, regs: list[Any]) -> None:
        regs[ins.dst] = None


_HANDLERS: dict[type, Callable[[Walk, Any, list[Any]], None]] = {
    I.Move: Walk.move, I.DeviceCopy: Walk.move, I.LoadConst: Walk.load_const,
    I.LoadConsti: Walk.load_consti, I.AllocStorage: Walk.alloc_storage,
    I.AllocTensor: Walk.alloc_tensor, I.ReshapeTensor: Walk.reshape_tensor,
    I.InvokePacked: Walk.invoke_packed, I.AllocADT: Walk.alloc_adt,
    I.GetField: Walk.get_field, I.KillRegister: Walk.kill_register,
}


def _known(value: Any, what: str) -> NDArray:
    """A value known before running (a constant or immediate), else NotStatic."""
    if type(value) is not NDArray:
        raise NotStatic(f"{what} is computed at run time")
    return value


def _tensor(value: Any) -> _Tensor:
    if type(value) is _Tensor:
        return value
    if type(value) is NDArray:  # a constant (load_const / load_consti)
        return _Tensor(value, 0, value.shape, value._dtype)
    raise NotStatic("a kernel argument or reshape source is not a tensor")


class _Result(NamedTuple):
    """A block that holds a result tensor: allocated by every run, seen as that tensor."""

    key: tuple[Any, ...]  # Allocator.block_key
    nbytes: int
    device: Device
    offset: int
    shape: tuple[int, ...]
    typestr: str
    template: bytes  # the tensor's DLTensor (shape_arr, device, dtype; data NULL)
    shape_arr: Any
    dtype: DataType


class StaticPlan:
    """A function's runs as one native call (see the module docstring)."""

    def __init__(self, walk: Walk, func: VMFunction, args: Sequence[NDArray],
                 allocator: Allocator, kernels: Sequence[CPackedFunc]) -> None:
        # Arguments of fully declared types were checked on entry; others are compared.
        declared = [isinstance(t, TensorInfo) and min(t.shape, default=0) >= 0
                    for t in func.param_types]
        self._signature = None if len(declared) == len(args) and all(declared) else \
            [(a._np.shape, a._dtype) for a in args]
        result = walk.result
        fields = result.fields if type(result) is _Tuple else (result,)
        results = list({id(f.base): f for f in fields}.values())  # one per block
        run_index = {id(t.base): k for k, t in enumerate(results)}
        self._results = [_result(t) for t in results]
        self._fields = [run_index[id(f.base)] for f in fields]
        self._tag = result.tag if type(result) is _Tuple else None
        self._allocator = allocator
        # Blocks of intermediates: allocated now, for the life of the plan.
        fixed = {id(b): allocator.alloc(b.nbytes, b.alignment, b.device, b.dtype_hint)
                 for b in walk.blocks if id(b) not in run_index}
        self._keep: list[Any] = [fixed]
        self._arg_patches: list[tuple[DLTensor, int, int]] = []
        self._block_patches: list[tuple[DLTensor, int, int]] = []
        dltensors: dict[Any, DLTensor] = {}
        calls = []
        for index, call_args in walk.calls:
            addresses = []
            for t in call_args:
                dl = dltensors.get(t.key())
                if dl is None:
                    dl = dltensors[t.key()] = self._dltensor(t, fixed, run_index)
                addresses.append(ctypes.addressof(dl))
            calls.append(c_call_at(kernels[index], addresses))
        self._keep.append(dltensors)
        self._funcs = [kernels[index] for index, _ in walk.calls]
        self._run_calls: Callable[[], int] = c_plan(self._funcs, calls) or _in_turn(calls)
        self._lock = threading.Lock()

    def _dltensor(self, t: _Tensor, fixed: dict[int, Storage], run_index: dict[int, int]
                  ) -> DLTensor:
        shape_arr = (ctypes.c_int64 * max(len(t.shape), 1))(*t.shape)
        device = t.base._device if type(t.base) is NDArray else t.base.device
        dl = DLTensor.from_buffer_copy(dltensor_template(shape_arr, len(t.shape), device,
                                                         t.dtype))
        self._keep.append(shape_arr)  # the DLTensor points at it
        if type(t.base) is _Arg:
            self._arg_patches.append((dl, t.base.index, t.offset))
        elif id(t.base) in run_index:
            self._block_patches.append((dl, run_index[id(t.base)], t.offset))
        elif type(t.base) is _Block:
            dl.data = fixed[id(t.base)].ptr + t.offset
        else:
            self._keep.append(t.base)
            dl.data = (t.base._dl.data or 0) + t.offset
        return dl

    def run(self, args: Sequence[Any]) -> Any:
        """The function's result on ``args``, or NOT_RUN (then the interpreter runs it)."""
        blocks = self._run(args)
        if blocks is NOT_RUN:
            return NOT_RUN
        outs = [fast_ndarray(arr, ptr + offset, template, shape_arr, device, dtype)
                for (arr, ptr), (_, _, device, offset, _, _, template, shape_arr, dtype)
                in zip(blocks, self._results)]
        if self._tag is None:
            return outs[0]
        return ADT(self._tag, [outs[k] for k in self._fields])

    def run_arrays(self, args: Sequence[Any]) -> list[np.ndarray] | Any:
        """The result's tensors as numpy arrays (a tuple's fields in order), or NOT_RUN: what
        a compiled model's call returns, without an NDArray per result."""
        blocks = self._run(args)
        if blocks is NOT_RUN:
            return NOT_RUN
        return [blocks[k][0] for k in self._fields]

    def _run(self, args: Sequence[Any]) -> list[tuple[np.ndarray, int]] | Any:
        """Run on ``args``: [(array, block address)] per result block, or NOT_RUN."""
        if not self._lock.acquire(blocking=False):  # a re-entrant call: buffers in use
            return NOT_RUN
        try:
            if self._signature is not None and not _matches(args, self._signature):
                return NOT_RUN
            for dl, i, offset in self._arg_patches:
                dl.data = (args[i]._dl.data or 0) + offset
            alloc = self._allocator.alloc_array
            blocks = [alloc(key, nbytes, device, offset, shape, typestr)
                      for key, nbytes, device, offset, shape, typestr, *_ in self._results]
            for dl, k, offset in self._block_patches:
                dl.data = blocks[k][1] + offset
            failed = self._run_calls()
            if failed:
                _clear_error(self._funcs[-1 - failed])
                return NOT_RUN
        finally:
            self._lock.release()
        return blocks


def build(func: VMFunction, ctx: DecodeContext, args: Sequence[Any], allocator: Allocator
          ) -> StaticPlan | str:
    """The plan of ``func`` for arguments like ``args``, or why there is none."""
    try:
        walk = Walk(func, ctx, args, allocator.max_block_bytes)
    except NotStatic as err:
        return str(err)
    return StaticPlan(walk, func, args, allocator, ctx.kernels)  # type: ignore[arg-type]


def _result(t: _Tensor) -> _Result:
    shape_arr = (ctypes.c_int64 * max(len(t.shape), 1))(*t.shape)
    block = t.base
    return _Result(Allocator.block_key(block.nbytes, block.alignment, block.device),
                   block.nbytes, block.device, t.offset, t.shape,
                   t.dtype.numpy_dtype.str,
                   dltensor_template(shape_arr, len(t.shape), block.device, t.dtype), shape_arr,
                   t.dtype)


def _matches(args: Sequence[Any], signature: list[tuple[tuple[int, ...], DataType]]) -> bool:
    return all(type(a) is NDArray and a._np.shape == shape and a._dtype == dt
               for a, (shape, dt) in zip(args, signature))


def _in_turn(calls: Sequence[functools.partial[int]]) -> Callable[[], int]:
    """The calls one by one (a library without EmberRunCalls); CPlan's return convention."""
    def run() -> int:
        for i, call in enumerate(calls):
            if call():
                return -1 - i
        return 0
    return run


def _clear_error(kernel: CPackedFunc) -> None:
    """Take the failed kernel's error, so the interpreter's run reports its own."""
    try:
        raise_error(kernel._take_error, kernel.name)
    except Exception:  # noqa: BLE001  (the interpreter raises it again, with context)
        pass


__all__ = ["NOT_RUN", "StaticPlan", "build"]
