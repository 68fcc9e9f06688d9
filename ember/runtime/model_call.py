"""A model's whole call, numpy in and numpy out, as one C call that runs without the GIL.

``CompiledModel.__call__`` on a graph or AOT model spends most of a small model's call in
Python: checking each array, copying it into the executor's buffer, running, copying the
outputs out, each step a separate trip through the interpreter (and the GIL, which threads
sharing a model then queue on). ``EmberModelCall`` (``csrc/backend.c``) does it all in C: it
checks that each argument is exactly what the model takes (a C-contiguous, aligned
``numpy.ndarray`` of the input's dtype and shape), copies the inputs in, makes the kernel calls
of the executor's plan on the model's thread count, and copies the outputs into arrays the
caller made. An argument in any other form (a list, another dtype, a view, an NDArray) makes
it return before writing anything, and the caller takes the checked Python path.

Where the library has ``EmberModelCallDirect``, the caller's arrays are the buffers themselves
for the inputs and outputs :func:`direct_sites` proves safe (no copy in or out: a language
model's 8 MiB of logits are written once, not twice): C points the data field of every tensor
the kernels use in such a buffer into the caller's array for the call, and back after.

C reads the argument tuple and the arrays through their object layouts. The offsets are
CPython's and numpy's public struct layouts; :func:`object_layout` does not assume them but
checks each one on probe objects, and the fast path is off (``None``) where one does not hold
(another Python implementation, a 32-bit build, a numpy whose layout moved).
"""
from __future__ import annotations

import ctypes
import functools
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._abi import DLTensor
from .executor_common import DLTENSOR_CODE, PlannedCall

__all__ = ["ModelCall", "direct_sites", "model_call", "object_layout", "planned_tensors"]

_C_CONTIGUOUS, _ALIGNED = 0x0001, 0x0100  # NPY_ARRAY_* flags


class _Layout(ctypes.Structure):
    _fields_ = [("ob_type", ctypes.c_int64), ("var_size", ctypes.c_int64),
                ("tuple_items", ctypes.c_int64), ("list_items", ctypes.c_int64),
                ("array_data", ctypes.c_int64), ("array_ndim", ctypes.c_int64),
                ("array_dims", ctypes.c_int64), ("array_descr", ctypes.c_int64),
                ("array_flags", ctypes.c_int64), ("ndarray_type", ctypes.c_void_p)]


class _Tensor(ctypes.Structure):
    _fields_ = [("shape", ctypes.c_void_p), ("descr", ctypes.c_void_p),
                ("buffer", ctypes.c_void_p), ("nbytes", ctypes.c_int64),
                ("ndim", ctypes.c_int32)]


class _Plan(ctypes.Structure):
    _fields_ = [("layout", ctypes.c_void_p), ("inputs", ctypes.c_void_p),
                ("outputs", ctypes.c_void_p), ("calls", ctypes.c_void_p),
                ("num_inputs", ctypes.c_int32), ("num_outputs", ctypes.c_int32),
                ("num_calls", ctypes.c_int32), ("num_threads", ctypes.c_int32),
                ("failed_at", ctypes.c_int32), ("args", ctypes.c_void_p), ("outs", ctypes.c_void_p)]


class _Site(ctypes.Structure):
    _fields_ = [("field", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("tensor", ctypes.c_int32)]


class _DirectPlan(ctypes.Structure):
    _fields_ = [("call", _Plan), ("sites", ctypes.c_void_p), ("direct", ctypes.c_void_p),
                ("num_sites", ctypes.c_int32)]


def _read(obj: Any, offset: int, ctype: Any) -> Any:
    return ctype.from_address(id(obj) + offset).value


@functools.lru_cache(maxsize=None)
def object_layout() -> _Layout | None:
    """The offsets ``EmberModelCall`` reads, each checked on probe objects; None if any fails."""
    if ctypes.sizeof(ctypes.c_void_p) != 8 or sys.implementation.name != "cpython":
        return None
    head = object.__basicsize__  # PyObject_HEAD: refcount (and more in some builds), type
    layout = _Layout(ob_type=head - 8, var_size=head, tuple_items=tuple.__basicsize__,
                     list_items=head + 8, array_data=head, array_ndim=head + 8,
                     array_dims=head + 16, array_descr=head + 40, array_flags=head + 48,
                     ndarray_type=id(np.ndarray))
    probe = np.zeros((3, 5, 7), np.float32)
    view = probe[:, 1]
    items = (probe, view)
    listed = [view, probe, None]
    try:
        ok = (_read(probe, layout.ob_type, ctypes.c_void_p) == id(np.ndarray)
              and _read(items, layout.var_size, ctypes.c_int64) == 2
              and _read(listed, layout.var_size, ctypes.c_int64) == 3
              and _read(items, layout.tuple_items + 8, ctypes.c_void_p) == id(view)
              and ctypes.c_void_p.from_address(
                  _read(listed, layout.list_items, ctypes.c_void_p) + 8).value == id(probe)
              and all(_read(a, layout.array_data, ctypes.c_void_p) == a.ctypes.data
                      and _read(a, layout.array_ndim, ctypes.c_int) == a.ndim
                      and _read(a, layout.array_descr, ctypes.c_void_p) == id(a.dtype)
                      and tuple((ctypes.c_int64 * a.ndim).from_address(
                          _read(a, layout.array_dims, ctypes.c_void_p))) == a.shape
                      and bool(_read(a, layout.array_flags, ctypes.c_int) & _C_CONTIGUOUS)
                      == a.flags.c_contiguous
                      and bool(_read(a, layout.array_flags, ctypes.c_int) & _ALIGNED)
                      == a.flags.aligned
                      for a in (probe, view)))
    except (ValueError, OverflowError):  # a null pointer read as a layout that does not hold
        ok = False
    return layout if ok else None


class ModelCall:
    """One executor's buffers and plan as ``call(args, outs) -> 0 | 1 | -1`` (0: done; 1: an
    argument is not in the form the plan takes, nothing written; -1: a kernel failed, and
    the caller runs the call again on its checked path, which raises the kernel's error);
    ``new_outputs()`` makes the ``outs`` a call fills (the array of
    a model's one output, or a list of them). ``run(args)``: both, the outputs or None
    (what a model's call uses; ``plan_native.DynamicCall`` answers the same)."""

    __slots__ = ("_keep", "_plan", "call", "new_outputs", "run")

    def __init__(self, entry: Any, calls: Any, num_calls: int, inputs: Sequence[np.ndarray],
                 outputs: Sequence[np.ndarray], threads: int, layout: _Layout,
                 direct: tuple[list[tuple[int, int, int]], list[bool]] | None = None) -> None:
        def tensors(arrays: Sequence[np.ndarray]) -> tuple[Any, list[Any]]:
            shapes = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
            table = (_Tensor * max(len(arrays), 1))(*(
                _Tensor(ctypes.addressof(s), id(a.dtype), a.ctypes.data, a.nbytes, a.ndim)
                for s, a in zip(shapes, arrays)))
            return table, shapes

        in_table, in_shapes = tensors(inputs)
        out_table, out_shapes = tensors(outputs)
        plan = _Plan(ctypes.addressof(layout), ctypes.addressof(in_table),
                     ctypes.addressof(out_table), ctypes.addressof(calls), len(inputs),
                     len(outputs), num_calls, threads, -1, None, None)
        extra: tuple[Any, ...] = ()
        if direct is not None:  # EmberModelCallDirect's plan: the same, and the sites
            sites = (_Site * max(len(direct[0]), 1))(*(_Site(*site) for site in direct[0]))
            flags = (ctypes.c_int8 * len(direct[1]))(*direct[1])
            plan = _DirectPlan(plan, ctypes.addressof(sites), ctypes.addressof(flags),
                               len(direct[0]))
            extra = (sites, flags)
        self._plan = plan
        # What the plan points at, and the dtype objects it compares arguments' with.
        self._keep = (layout, in_table, in_shapes, out_table, out_shapes, calls, list(inputs),
                      list(outputs), [a.dtype for a in (*inputs, *outputs)], extra)
        entry.argtypes, entry.restype = None, ctypes.c_int
        run = functools.partial(entry, ctypes.byref(self._plan))
        # The call's two objects go into the plan's args/outs fields (by address: the caller
        # holds them for the call), so the C call converts one argument, not three.
        slots = (ctypes.c_int64 * 2).from_address(ctypes.addressof(self._plan)
                                                  + _Plan.args.offset)  # call is first

        def call(args: tuple[Any, ...], outs: Any) -> int:
            slots[0] = id(args)
            slots[1] = id(outs)
            return run()  # type: ignore[no-any-return]

        self.call = call
        specs = [(tuple(a.shape), a.dtype) for a in outputs]
        if len(specs) == 1:
            self.new_outputs: Any = functools.partial(np.empty, *specs[0])
        else:
            self.new_outputs = lambda: [np.empty(s, d) for s, d in specs]
        new_outputs = self.new_outputs

        def run_call(args: tuple[Any, ...]) -> Any:
            outs = new_outputs()
            slots[0] = id(args)
            slots[1] = id(outs)
            return outs if run() == 0 else None

        self.run = run_call


def model_call(lib: Any, calls: Any, num_calls: int, inputs: Sequence[np.ndarray],
               outputs: Sequence[np.ndarray], threads: int,
               written: frozenset[int] | None = None) -> ModelCall | None:
    """A ModelCall of library ``lib`` (its ctypes handle) making ``calls`` (an array of
    ``EmberPlannedCall``) on buffers ``inputs``/``outputs``; ``threads`` > 0 sets the kernels'
    thread count for each call (0: the calling thread's). ``written``: the DLTensors (by
    address) the calls write; given, the caller's arrays serve as the buffers where
    :func:`direct_sites` allows. None where the fast path cannot be used: the library
    predates ``EmberModelCall`` or the object layout does not hold."""
    layout = object_layout()
    entry = getattr(lib, "EmberModelCall", None) if lib is not None else None
    if layout is None or entry is None:
        return None
    if any(not a.flags.c_contiguous for a in (*inputs, *outputs)):
        return None
    direct = None
    direct_entry = getattr(lib, "EmberModelCallDirect", None)
    if (written is not None and direct_entry is not None
            and _direct_plan_size(lib) == ctypes.sizeof(_DirectPlan)):
        sites, flags = direct_sites(calls, num_calls, [*inputs, *outputs], len(inputs),
                                    written)
        if any(flags):
            entry, direct = direct_entry, (sites, flags)
    return ModelCall(entry, calls, num_calls, inputs, outputs, threads, layout, direct)


def _direct_plan_size(lib: Any) -> int:
    size = getattr(lib, "EmberDirectCallPlanSize", None)
    if size is None:
        return -1
    size.argtypes, size.restype = [], ctypes.c_int64
    return int(size())


def planned_tensors(calls: Any, num_calls: int) -> dict[int, tuple[int, int, int]]:
    """The DLTensors the planned calls pass, by address: (data, start, nbytes), start being
    data + byte_offset (nbytes -1 where it cannot be told: strided, or not a plain type)."""
    table = (PlannedCall * max(num_calls, 1)).from_address(ctypes.addressof(calls))
    found: dict[int, tuple[int, int, int]] = {}
    for call in table[:num_calls]:
        n = call.num_args
        values = (ctypes.c_int64 * max(n, 1)).from_address(call.args)
        codes = (ctypes.c_int * max(n, 1)).from_address(call.codes)
        for k in range(n):
            if codes[k] != DLTENSOR_CODE or not values[k]:
                continue
            address = values[k]
            if address in found:
                continue
            t = DLTensor.from_address(address)
            data = t.data or 0
            nbytes = -1
            if not t.strides and t.dtype.bits % 8 == 0:
                nbytes = math.prod(t.shape[:t.ndim]) * t.dtype.bits // 8 * t.dtype.lanes
            found[address] = (data, data + t.byte_offset, nbytes)
    return found


def direct_sites(calls: Any, num_calls: int, buffers: Sequence[np.ndarray], num_inputs: int,
                 written: frozenset[int]) -> tuple[list[tuple[int, int, int]], list[bool]]:
    """Which of ``buffers`` (the inputs, then the outputs) a call may replace by the caller's
    arrays, and the data fields to point there: (field address, offset from the buffer's
    start, buffer index) per tensor in such a buffer; a flag per buffer. ``written``: the
    tensors (by address) that the calls write.

    An input qualifies when every tensor in its memory is a view of all of it and none is a
    kernel's output (the kernels only read the caller's array); an output when every tensor
    in its memory lies within it and the kernels' outputs among them cover all of it (the
    caller's uninitialised array is written whole before anything reads it). A buffer that
    overlaps another buffer, or that no call uses, keeps its copy."""
    found = planned_tensors(calls, num_calls)
    spans = [(b.ctypes.data, b.ctypes.data + b.nbytes) for b in buffers]
    ok = [b.nbytes > 0 for b in buffers]
    for i, (lo, hi) in enumerate(spans):
        for j, (lo2, hi2) in enumerate(spans):
            if i != j and lo < hi2 and lo2 < hi:
                ok[i] = False
    sites: list[tuple[int, int, int]] = []
    cover: list[list[tuple[int, int]]] = [[] for _ in buffers]
    for address, (data, start, nbytes) in found.items():
        for i, (lo, hi) in enumerate(spans):
            end = start + max(nbytes, 0)
            if not (start < hi and end > lo) and not (nbytes <= 0 and lo <= start < hi):
                continue
            if nbytes < 0 or start < lo or end > hi:
                ok[i] = False
            elif i < num_inputs and (start != lo or end != hi or address in written):
                ok[i] = False
            sites.append((address + DLTensor.data.offset, data - lo, i))
            if address in written:
                cover[i].append((start, end))
    for i, (lo, hi) in enumerate(spans):
        if i >= num_inputs and not _covers(cover[i], lo, hi):
            ok[i] = False
    used = {i for _, _, i in sites}
    ok = [flag and i in used for i, flag in enumerate(ok)]
    return [site for site in sites if ok[site[2]]], ok


def _covers(spans: list[tuple[int, int]], lo: int, hi: int) -> bool:
    """Whether the union of ``spans`` holds all of [lo, hi)."""
    reach = lo
    for start, end in sorted(spans):
        if start > reach:
            return False
        reach = max(reach, end)
    return reach >= hi
