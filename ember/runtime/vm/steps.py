"""What each instruction does: decoding an instruction into a *step*, a small closure.

The VM decodes every instruction once, when it is created, into ``step(regs) -> int`` that
performs the instruction on the frame's register list and returns the pc increment. All
operands are bound as closure cells at decode time (the verifier has already checked them),
so running a step costs one call and no attribute lookups on the instruction. Instructions
that switch frames (invoke, invoke_closure, ret) or stop the machine (fatal) decode to None
and are handled by the interpreter loop itself.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from .._bridge import raise_error
from ..container import ADT
from ..device import Device
from ..dtype import DataType
from ..errors import TVMError
from ..ndarray import NDArray, array
from ..object import Object, register_object
from ..packed_func import CPackedFunc, PackedFunc
from . import instructions as I
from .memory import Allocator, Storage, dltensor_template, fast_ndarray

Step = Callable[[list[Any]], int]
_DLTENSOR = 7  # kTVMDLTensorHandle


@register_object("vm.Closure")
class VMClosure(Object):
    """A closure value: function ``func_index`` of the executable and its captured values
    (passed before the call's own arguments)."""

    __slots__ = ("func_index", "free_vars")

    def __init__(self, func_index: int, free_vars: tuple[Any, ...]) -> None:
        self.func_index = func_index
        self.free_vars = free_vars

    def __repr__(self) -> str:
        return f"VMClosure(VMFunc[{self.func_index}], {len(self.free_vars)} captured)"


class DecodeContext:
    """What decoding needs from the VM: kernels, constants, devices and the allocator."""

    def __init__(self, kernels: list[PackedFunc], kernel_names: list[str],
                 constants: list[NDArray | None], devices: list[Device],
                 allocator: Allocator, value_kernels: dict[int, tuple[int, ...]] | None = None,
                 concat_kernels: dict[int, tuple[int, ...]] | None = None) -> None:
        self.kernels, self.kernel_names = kernels, kernel_names
        self.constants, self.devices, self.allocator = constants, devices, allocator
        # the kernels a plan may run once per signature (Program.value_kernels)
        self.value_kernels = value_kernels or {}
        # the concatenations a plan may make in place (Program.concat_kernels)
        self.concat_kernels = concat_kernels or {}
        self._tags: dict[int, NDArray] = {}

    def tag_tensor(self, tag: int) -> NDArray:
        """The int32 scalar tensor for ``tag`` (shared: tags are read, never written)."""
        t = self._tags.get(tag)
        if t is None:
            t = self._tags[tag] = _frozen(array(np.int32(tag)))
        return t


def _frozen(arr: NDArray) -> NDArray:
    """``arr``, made read-only for Python (a shared scalar must not be changed in place)."""
    arr._np.flags.writeable = False
    return arr


def frozen_scalar(value: int) -> NDArray:
    """``value`` as a read-only int64 scalar tensor (what ``load_consti`` loads)."""
    return _frozen(array(np.int64(value)))


def scalar(value: Any, what: str) -> Any:
    """The single element of a tensor register (a condition, size, offset or tag)."""
    if type(value) is not NDArray:
        raise TVMError(f"{what}: expected a scalar tensor, got {_describe(value)}")
    if value._np.size != 1:
        raise TVMError(f"{what}: expected a scalar tensor, got shape {value.shape}")
    return value._np.item()


def shape_value(value: Any, what: str) -> tuple[int, ...]:
    """A shape held in a register: an integer 1-D tensor of non-negative extents."""
    if type(value) is not NDArray or value._np.ndim != 1 or value._np.dtype.kind not in "iu":
        raise TVMError(f"{what}: expected an integer 1-D shape tensor, got {_describe(value)}")
    shape = tuple(int(d) for d in value._np.tolist())
    if any(d < 0 for d in shape):
        raise TVMError(f"{what}: negative extent in shape {shape}")
    return shape


def _describe(value: Any) -> str:
    if isinstance(value, NDArray):
        return f"tensor {value.dtype}{list(value.shape)}"
    return "an empty register" if value is None else type(value).__name__


def decode(ins: I.Instruction, ctx: DecodeContext) -> Step | None:
    """The step for ``ins``; None for instructions the interpreter loop handles."""
    maker = _DECODERS.get(type(ins))
    return None if maker is None else maker(ins, ctx)


def _move(ins: I.Move, ctx: DecodeContext) -> Step:
    src, dst = ins.src, ins.dst

    def step(regs: list[Any]) -> int:
        regs[dst] = regs[src]
        return 1
    return step


def _load_const(ins: I.LoadConst, ctx: DecodeContext) -> Step:
    const, dst = ctx.constants[ins.const_index], ins.dst
    if const is None:
        raise TVMError(f"constant {ins.const_index} is late-bound and not loaded; call "
                       "exe.load_late_bound_consts(path) before creating the VM")

    def step(regs: list[Any]) -> int:
        regs[dst] = const
        return 1
    return step


def _load_consti(ins: I.LoadConsti, ctx: DecodeContext) -> Step:
    # One tensor per instruction, made now (read-only: every run shares it).
    value, dst = frozen_scalar(ins.val), ins.dst

    def step(regs: list[Any]) -> int:
        regs[dst] = value
        return 1
    return step


def _alloc_storage(ins: I.AllocStorage, ctx: DecodeContext) -> Step:
    alloc, size, dst = ctx.allocator.alloc, ins.size, ins.dst
    align, hint, dev = ins.alignment, ins.dtype_hint, ctx.devices[ins.device_index]

    def step(regs: list[Any]) -> int:
        regs[dst] = alloc(int(scalar(regs[size], "alloc_storage size")), align, dev, hint)
        return 1
    return step


def _alloc_tensor(ins: I.AllocTensor, ctx: DecodeContext) -> Step:
    dt = DataType(ins.dtype)
    np_dtype, shape = dt.numpy_dtype, ins.shape
    nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)  # shared by every tensor made here
    templates: dict[Device, bytes] = {}
    storage_reg, offset_reg, dst = ins.storage, ins.offset, ins.dst
    ndarray = np.ndarray

    def step(regs: list[Any]) -> int:
        st, off = regs[storage_reg], regs[offset_reg]
        off = off._np.item() if type(off) is NDArray else scalar(off, "alloc_tensor offset")
        if type(st) is not Storage or off < 0 or off + nbytes > st.nbytes:
            _bad_alloc(st, off, nbytes)
        dev = st.device
        template = templates.get(dev) or templates.setdefault(
            dev, dltensor_template(shape_arr, len(shape), dev, dt))
        view = ndarray(shape, np_dtype, st.arr, off)
        regs[dst] = fast_ndarray(view, st.ptr + off, template, shape_arr, dev, dt)
        return 1
    return step


def _bad_alloc(st: Any, off: int, nbytes: int) -> None:
    if type(st) is not Storage:
        raise TVMError(f"alloc_tensor: expected a storage block, got {_describe(st)}")
    st.check(off, nbytes, "alloc_tensor")


def _alloc_tensor_reg(ins: I.AllocTensorReg, ctx: DecodeContext) -> Step:
    storage_reg, offset_reg, shape_reg, dtype, dst = (ins.storage, ins.offset,
                                                      ins.shape_register, ins.dtype, ins.dst)

    def step(regs: list[Any]) -> int:
        st = regs[storage_reg]
        if type(st) is not Storage:
            raise TVMError(f"alloc_tensor_reg: expected a storage block, got {_describe(st)}")
        shape = shape_value(regs[shape_reg], "alloc_tensor_reg shape")
        regs[dst] = st.tensor(int(scalar(regs[offset_reg], "alloc_tensor_reg offset")), shape,
                              dtype)
        return 1
    return step


def _reshape_tensor(ins: I.ReshapeTensor, ctx: DecodeContext) -> Step:
    src, shape_reg, dst = ins.tensor, ins.newshape, ins.dst
    # The new shape is almost always a constant: its parsed form and DLTensor templates (per
    # device and dtype; they point at its shape array) are kept, keyed by the shape tensor's
    # bytes, so a run pays a numpy reshape and a DLTensor copy.
    known: dict[tuple[bytes, str, int], tuple[tuple[int, ...], int, Any, dict[Any, bytes]]] = {}

    def slow(regs: list[Any]) -> int:
        t = regs[src]
        shape = shape_value(regs[shape_reg], "reshape_tensor new shape")
        if type(t) is not NDArray or t._np.size != int(np.prod(shape, dtype=np.int64)):
            raise TVMError(f"reshape_tensor: cannot reshape {_describe(t)} to {list(shape)}")
        regs[dst] = NDArray(t._np.reshape(shape), t.device, t._dtype)
        return 1

    def step(regs: list[Any]) -> int:
        t, s = regs[src], regs[shape_reg]
        if type(t) is not NDArray or type(s) is not NDArray or t._dtype.lanes != 1:
            return slow(regs)
        key = (s._np.tobytes(), s._np.dtype.str, s._np.ndim)
        hit = known.get(key)
        if hit is None:
            shape = shape_value(s, "reshape_tensor new shape")
            if len(known) > 64:  # shapes computed at run time: keep the table small
                known.clear()
            hit = known[key] = (shape, int(np.prod(shape, dtype=np.int64)),
                                (ctypes.c_int64 * max(len(shape), 1))(*shape), {})
        shape, size, shape_arr, templates = hit
        if t._np.size != size:
            return slow(regs)
        dev, dt = t._device, t._dtype
        template = templates.get((dev, dt))
        if template is None:
            template = templates[dev, dt] = dltensor_template(shape_arr, len(shape), dev, dt)
        out = fast_ndarray(t._np.reshape(shape), t._dl.data or 0, template, shape_arr, dev, dt)
        out._owner = t._owner
        regs[dst] = out
        return 1
    return step


def _shape_of(ins: I.ShapeOf, ctx: DecodeContext) -> Step:
    src, dst = ins.tensor, ins.dst

    def step(regs: list[Any]) -> int:
        t = regs[src]
        if type(t) is not NDArray:
            raise TVMError(f"shape_of: expected a tensor, got {_describe(t)}")
        regs[dst] = array(np.array(t.shape, dtype=np.int64))
        return 1
    return step


def _alloc_adt(ins: I.AllocADT, ctx: DecodeContext) -> Step:
    tag, fields, dst = ins.tag, ins.fields, ins.dst

    def step(regs: list[Any]) -> int:
        regs[dst] = ADT(tag, [regs[r] for r in fields])
        return 1
    return step


def _alloc_closure(ins: I.AllocClosure, ctx: DecodeContext) -> Step:
    func_index, free_vars, dst = ins.func_index, ins.free_vars, ins.dst

    def step(regs: list[Any]) -> int:
        regs[dst] = VMClosure(func_index, tuple(regs[r] for r in free_vars))
        return 1
    return step


def _get_field(ins: I.GetField, ctx: DecodeContext) -> Step:
    obj, index, dst = ins.object, ins.field_index, ins.dst

    def step(regs: list[Any]) -> int:
        adt = regs[obj]
        if type(adt) is not ADT or index >= len(adt.fields):
            raise TVMError(f"get_field: cannot take field {index} of {_describe(adt)}"
                           + (f" with {len(adt.fields)} fields" if type(adt) is ADT else ""))
        regs[dst] = adt.fields[index]
        return 1
    return step


def _get_tag(ins: I.GetTag, ctx: DecodeContext) -> Step:
    obj, dst, tag_tensor = ins.object, ins.dst, ctx.tag_tensor

    def step(regs: list[Any]) -> int:
        adt = regs[obj]
        if type(adt) is not ADT:
            raise TVMError(f"get_tag: expected an ADT, got {_describe(adt)}")
        regs[dst] = tag_tensor(adt.tag)
        return 1
    return step


def _if(ins: I.If, ctx: DecodeContext) -> Step:
    test, target, on_true, on_false = ins.test, ins.target, ins.true_offset, ins.false_offset

    def step(regs: list[Any]) -> int:
        try:
            equal = regs[test]._np.item() == regs[target]._np.item()
        except (AttributeError, ValueError):
            equal = scalar(regs[test], "if test") == scalar(regs[target], "if target")
        return on_true if equal else on_false
    return step


def _goto(ins: I.Goto, ctx: DecodeContext) -> Step:
    offset = ins.pc_offset
    return lambda regs: offset


def _device_copy(ins: I.DeviceCopy, ctx: DecodeContext) -> Step:
    # Every virtual device is the CPU (the VM checks), so a copy is the same tensor.
    return _move(I.Move(ins.src, ins.dst), ctx)


def _kill_register(ins: I.KillRegister, ctx: DecodeContext) -> Step:
    dst = ins.dst

    def step(regs: list[Any]) -> int:
        regs[dst] = None
        return 1
    return step


def _invoke_packed(ins: I.InvokePacked, ctx: DecodeContext) -> Step:
    func, name = ctx.kernels[ins.packed_index], ctx.kernel_names[ins.packed_index]
    arg_regs = ins.args

    def general(regs: list[Any]) -> int:
        # ADT arguments (tuples) are passed as their fields, as the kernels expect.
        args: list[Any] = []
        for r in arg_regs:
            v = regs[r]
            args.extend(v.fields if type(v) is ADT else (v,))
        func(*args)
        return 1

    if not isinstance(func, CPackedFunc):
        return general
    # Compiled kernel: the argument buffers are made once; a call fills in the DLTensor
    # addresses and calls C directly (the per-call cost is one ctypes call).
    n, cfn, take_error = len(arg_regs), func._cfn, func._take_error
    vals = (ctypes.c_int64 * max(n, 1))()
    codes = (ctypes.c_int * max(n, 1))(*([_DLTENSOR] * n))
    ret, ret_code = (ctypes.c_int64 * 1)(), (ctypes.c_int * 1)()

    def step(regs: list[Any]) -> int:
        try:
            vals[:n] = [regs[r]._dl_addr for r in arg_regs]
        except AttributeError:  # an ADT or other non-tensor argument
            return general(regs)
        if cfn(vals, codes, n, ret, ret_code, None):
            raise_error(take_error, name)
        return 1
    return step


_DECODERS: dict[type, Callable[[Any, DecodeContext], Step]] = {
    I.Move: _move, I.LoadConst: _load_const, I.LoadConsti: _load_consti,
    I.AllocStorage: _alloc_storage, I.AllocTensor: _alloc_tensor,
    I.AllocTensorReg: _alloc_tensor_reg, I.ReshapeTensor: _reshape_tensor,
    I.ShapeOf: _shape_of, I.AllocADT: _alloc_adt, I.AllocClosure: _alloc_closure,
    I.GetField: _get_field, I.GetTag: _get_tag, I.If: _if, I.Goto: _goto,
    I.DeviceCopy: _device_copy, I.KillRegister: _kill_register, I.InvokePacked: _invoke_packed,
}
