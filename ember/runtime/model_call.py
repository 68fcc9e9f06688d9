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

C reads the argument tuple and the arrays through their object layouts. The offsets are
CPython's and numpy's public struct layouts; :func:`object_layout` does not assume them but
checks each one on probe objects, and the fast path is off (``None``) where one does not hold
(another Python implementation, a 32-bit build, a numpy whose layout moved).
"""
from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["ModelCall", "model_call", "object_layout"]

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
                 outputs: Sequence[np.ndarray], threads: int, layout: _Layout) -> None:
        def tensors(arrays: Sequence[np.ndarray]) -> tuple[Any, list[Any]]:
            shapes = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
            table = (_Tensor * max(len(arrays), 1))(*(
                _Tensor(ctypes.addressof(s), id(a.dtype), a.ctypes.data, a.nbytes, a.ndim)
                for s, a in zip(shapes, arrays)))
            return table, shapes

        in_table, in_shapes = tensors(inputs)
        out_table, out_shapes = tensors(outputs)
        self._plan = _Plan(ctypes.addressof(layout), ctypes.addressof(in_table),
                           ctypes.addressof(out_table), ctypes.addressof(calls), len(inputs),
                           len(outputs), num_calls, threads, -1, None, None)
        # What the plan points at, and the dtype objects it compares arguments' with.
        self._keep = (layout, in_table, in_shapes, out_table, out_shapes, calls, list(inputs),
                      list(outputs), [a.dtype for a in (*inputs, *outputs)])
        entry.argtypes, entry.restype = None, ctypes.c_int
        run = functools.partial(entry, ctypes.byref(self._plan))
        # The call's two objects go into the plan's args/outs fields (by address: the caller
        # holds them for the call), so the C call converts one argument, not three.
        slots = (ctypes.c_int64 * 2).from_address(ctypes.addressof(self._plan)
                                                  + _Plan.args.offset)

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
               outputs: Sequence[np.ndarray], threads: int) -> ModelCall | None:
    """A ModelCall of library ``lib`` (its ctypes handle) making ``calls`` (an array of
    ``EmberPlannedCall``) on buffers ``inputs``/``outputs``; ``threads`` > 0 sets the kernels'
    thread count for each call (0: the calling thread's). None where the fast path cannot be
    used: the library predates ``EmberModelCall`` or the object layout does not hold."""
    layout = object_layout()
    entry = getattr(lib, "EmberModelCall", None) if lib is not None else None
    if layout is None or entry is None:
        return None
    if any(not a.flags.c_contiguous for a in (*inputs, *outputs)):
        return None
    return ModelCall(entry, calls, num_calls, inputs, outputs, threads, layout)
