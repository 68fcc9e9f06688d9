"""A static plan's runs on numpy arrays: per argument signature, one dict lookup and one
native call.

A compiled model's call (``execution_pool.VMContext``) hands numpy arrays to ``main`` and
wants numpy arrays back, which it owns. :class:`ArrayCalls` serves those calls from a
:class:`~.static_plan.StaticPlan` with memory of its own: a buffer per argument and per result
block (each grown to the largest signature seen, never shrunk), and per signature an
:class:`ArrayCall` made once, holding what the plan computed for those shapes (the arena after
the shape phase, the result views). A call at a signature made before then

1. points the plan's tensors at this memory and this signature's shapes, when another
   signature (or an NDArray run of the plan) ran last: a copy of the arena and a few pointers;
2. copies the arguments in, makes the kernel calls as one C call, copies the results out,

as the graph executor's call does (and the plan's value phase first, when its blocks hold
another signature's values: ``StaticPlan.values``). A signature not made before runs the
shape phase and its checks first (``StaticPlan._shapes``); a failed check or kernel returns NOT_RUN, and the
caller interprets the call (which raises the interpreter's error).

A plan whose kernels compute a size from data (NonZero's count, NonMaxSuppression's: the
plan's *segments*, with checks between them) runs its segments in turn: before each, its
checks over the arena (``plan_checks.VectorChecks``) size the blocks that depend on data,
growing a result buffer or an intermediate block that is too small (to twice the size asked:
sizes that vary from run to run then come back here a logarithmic number of times), and the
results are copied out at the shapes the run computed (``ArrayCalls.segmented``).
"""
from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InternalError
from ..executor_common import CPlan
from ..model_call import ModelCall, model_call
from . import static_plan
from .memory import _raw_buffer, size_class
from .static_plan import NOT_RUN, StaticPlan, _clear_error, _set_pointer

_ALIGN = 64
_UNMADE: Any = object()  # ArrayCall._native before its first use


class _Grown:
    """A buffer that only grows: ``ensure(nbytes, ahead)`` returns True when it moved (to a
    size class of ``ahead``, at most 25% over it, or of ``nbytes`` where that is more than
    memory holds)."""

    __slots__ = ("buf", "capacity", "ptr")

    def __init__(self) -> None:
        self.buf: np.ndarray | None = None
        self.capacity, self.ptr = -1, 0

    def ensure(self, nbytes: int, ahead: int = 0) -> bool:
        if max(nbytes, ahead) <= self.capacity:
            return False
        capacity = size_class(max(nbytes, ahead))
        try:
            raw, iface = _raw_buffer(capacity, _ALIGN)
        except MemoryError:  # no room for the margin: exactly what is needed (or its error)
            if capacity == size_class(nbytes):
                raise
            capacity = size_class(nbytes)
            raw, iface = _raw_buffer(capacity, _ALIGN)
        self.buf, self.ptr, self.capacity = raw, iface["data"][0], capacity
        return True

    def view(self, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.ndarray(shape, dtype, self.buf, offset)


class ArrayCall:
    """One signature's call: ``call(values)`` -> [result arrays], or NOT_RUN."""

    __slots__ = ("_acquire", "_native", "_release", "_run", "_segmented", "arena", "calls",
                 "inputs", "outputs", "plan", "signature")

    def __init__(self, calls: ArrayCalls, signature: tuple[Any, ...], inputs: list[np.ndarray],
                 outputs: list[np.ndarray]) -> None:
        self.calls, self.plan, self.signature = calls, calls.plan, signature
        self.inputs, self.outputs = inputs, outputs
        self.arena = calls.plan._arena.copy()
        # bound once: each lookup saved is ~0.1 us of a call that costs ~1 us over its kernels
        self._acquire, self._release = calls.plan._lock.acquire, calls.plan._lock.release
        self._run, self._segmented = calls.run, calls.segmented
        self._native: Any = _UNMADE

    def native_call(self, threads: int) -> ModelCall | None:
        """This signature's call as one C call (``ember.runtime.model_call``: checks, copies
        in, the kernel calls, copies out), made on first use; None where it cannot be. Valid
        only while the plan's tensors are this signature's (``plan.applied is self``), so
        its holder drops it when anything else runs the plan."""
        if self._native is _UNMADE:
            cplan = None if self._segmented else self.calls.cplan
            self._native = None if cplan is None else model_call(
                cplan.lib, cplan._table, cplan._count, self.inputs, self.outputs, threads,
                self.plan._written)
        return self._native  # type: ignore[no-any-return]

    def __call__(self, values: Sequence[np.ndarray], copyto: Any = np.copyto
                 ) -> list[np.ndarray] | Any:
        if not self._acquire(False):  # a re-entrant call: buffers in use
            return NOT_RUN
        try:
            plan = self.plan
            if plan.applied is not self:
                self._apply()
            if plan._value_run is not None and plan._values_for != self.signature and \
                    not plan.values(self.signature):
                return NOT_RUN
            for buf, value in zip(self.inputs, values):
                copyto(buf, value)
            if self._segmented:
                return self.calls.run_segments()
            if self._run():
                _clear_error(self.plan._funcs[self.calls.failed_call()])
                return NOT_RUN
            return [out.copy() for out in self.outputs]
        finally:
            self._release()

    def _apply(self) -> None:
        """Point the plan's tensors at this signature's shapes and the calls' memory."""
        calls, plan = self.calls, self.calls.plan
        np.copyto(plan._arena, self.arena)
        plan._last = self.signature
        for dl, i, offset, shape in plan._arg_patches:
            _set_pointer(dl, calls.inputs[i].ptr + offset, shape)
        for index, grown in calls.results.items():
            plan._move(index, grown.ptr)
        if plan._aliases:  # the parts of concatenations made in place, at this one's offsets
            plan._realias()
        plan.applied = self


class ArrayCalls:
    """The ArrayCall of each signature made so far (the last ``static_plan.SIGNATURES``)."""

    def __init__(self, plan: StaticPlan) -> None:
        self.plan = plan
        self.run, self.failed_call, self.cplan = _native(plan)
        self.made: OrderedDict[tuple[Any, ...], ArrayCall] = OrderedDict()
        self.inputs = [_Grown() for _ in plan._arg_types]
        self.arg_types = [(dt.numpy_dtype, ndim, shape) for dt, ndim, shape in plan._arg_types]
        self.results = {t.base.index: _Grown() for t in plan._result_tensors}
        # whether a kernel computes a size from data: checks between the kernel calls
        self.segmented = len(plan._segments) != 1 or plan._segments[0][0] is not None

    @staticmethod
    def of(plan: StaticPlan) -> ArrayCalls | None:
        """ArrayCalls of ``plan``, or None when a check or a result shape reads a value
        outside the arena (the plan's own run handles those)."""
        if any(checks is not None and checks.vector is None for checks, _ in plan._segments):
            return None
        if any(shape is None and slot is None for _, _, _, shape, slot, _ in plan._typed_info):
            return None
        return ArrayCalls(plan)

    def run_segments(self) -> list[np.ndarray] | Any:
        """The kernel calls of a segmented plan (its inputs copied in), each segment's
        checks first (the blocks they size placed); the results copied out at this run's
        shapes, or NOT_RUN (a failed check or kernel: the interpreter raises)."""
        plan = self.plan
        for checks, run in plan._segments:
            if checks is not None:
                sizes = checks.sizes()
                if sizes is None:
                    return NOT_RUN
                self.place(checks.sized, sizes)
            failed = run() if run is not None else 0
            if failed:
                _clear_error(plan._funcs[-1 - failed])
                return NOT_RUN
        return [self._output(k).copy() for k in plan._fields]

    def place(self, sized: Sequence[Any], sizes: dict[int, int]) -> None:
        """The blocks a late check sized, each with room for its size: a result's buffer,
        or an intermediate block of the plan, grown (to twice the size asked) if too small."""
        plan = self.plan
        plan._size.update(sizes)
        for b in sized:
            need = sizes[b.index]
            grown = self.results.get(b.index)
            if grown is not None:
                if grown.ensure(need, 2 * need):
                    plan._move(b.index, grown.ptr)
            elif need > plan._capacity.get(b.index, -1):
                plan._grow(b, need, 2 * need)

    def make(self, values: Sequence[np.ndarray]) -> ArrayCall | None:
        """The ArrayCall for the shapes of ``values`` (kept), or None when the plan cannot
        run them (wrong dtype or rank, a failed shape check: the interpreter raises)."""
        plan = self.plan
        if len(values) != len(plan._arg_types) or not plan._lock.acquire(blocking=False):
            return None
        try:
            plan.applied = None
            for v, (dt, ndim, shape) in zip(values, self.arg_types):
                if v.dtype != dt or v.ndim != ndim or shape is not None and v.shape != shape:
                    return None
            signature = tuple(values[i].shape for i, _ in plan._arg_slots)
            if signature != plan._last:
                flat = [d for s in signature for d in s]
                plan._arena_i64[:len(flat)] = flat
            sizes = {} if plan._fixed else plan._shapes(signature, take_results=False)
            if sizes is None:
                return None
            return self._keep(signature, values, sizes)
        finally:
            plan._lock.release()

    def _keep(self, signature: tuple[Any, ...], values: Sequence[np.ndarray],
              sizes: dict[int, int]) -> ArrayCall:
        """The ArrayCall of the signature whose shape phase just ran; every call made
        before is dropped when a buffer had to grow (their views are of the old ones)."""
        plan = self.plan
        # (a block sized by a late check gets its room when a run sizes it: ``place``)
        nbytes = {t.base.index: sizes.get(t.base.index, 0) if t.base.size is not None
                  else t.base.nbytes for t in plan._result_tensors}
        needs = [(grown, v.nbytes) for grown, v in zip(self.inputs, values)] + \
            [(grown, nbytes[index]) for index, grown in self.results.items()]
        # The first sizes are the ones asked. Once a buffer (or a block of the plan's) must
        # grow again, every one takes room for twice this signature's size: shapes that keep
        # growing then come back here a logarithmic number of times, all buffers together
        # (grown one by one, each crossing its capacity at another size, a batch going from
        # 2 to 19 came back 9 times, ~200 us each), and the calls between stay in C.
        # Memory: at most 2.5 times the largest size asked (twice it, in a size class).
        again = plan.regrew or any(0 < grown.capacity < need for grown, need in needs)
        moved = False
        for grown, need in needs:
            moved |= grown.ensure(need, 2 * need if again else need)
        if again:
            plan.reserve(sizes)
        if moved:
            self.made.clear()
        inputs = [g.view(0, v.shape, v.dtype) for g, v in zip(self.inputs, values)]
        outputs = [] if self.segmented else [self._output(k) for k in plan._fields]
        made = self.made[key(values)] = ArrayCall(self, signature, inputs, outputs)
        while len(self.made) > static_plan.SIGNATURES:
            self.made.popitem(last=False)
        return made

    def _output(self, k: int) -> np.ndarray:
        """Result ``k`` as a view of its buffer, of its shape for the current signature."""
        plan = self.plan
        offset, np_dtype, _, shape, slot, ndim = plan._typed_info[k]
        if shape is None:
            shape = tuple(plan._arena_i64[slot:slot + ndim].tolist())
        grown = self.results[plan._result_tensors[k].base.index]
        if offset + math.prod(shape) * np_dtype.itemsize > grown.capacity:
            raise InternalError(f"plan_arrays: result {k} of shape {shape} does not fit its "
                                f"block of {grown.capacity} bytes")
        return grown.view(offset, shape, np_dtype)


def key(values: Sequence[Any]) -> Any:
    """What ``ArrayCalls.made`` is keyed by: the shape of the one value, else the tuple of
    their shapes (a call looks its ArrayCall up with no more work than that)."""
    return values[0].shape if len(values) == 1 else tuple([v.shape for v in values])


def _native(plan: StaticPlan) -> tuple[Callable[[], int], Callable[[], int], CPlan | None]:
    """(the plan's kernel calls, after its shape phase, as one call that returns 0 or not;
    the index of the call that failed; their CPlan or None): the C runner called directly,
    not through CPlan's and the plan's Python wrappers (two frames a call), when the library
    has it."""
    rest = plan._rest
    run = plan._segments[0][1]
    if len(plan._segments) > 1:  # (the segments' runners are the plan's; C runs this table)
        cplan = static_plan.c_plan([plan._funcs[k] for k in rest],
                                   [plan._calls[k] for k in rest])
        return (lambda: 0), (lambda: 0), cplan
    if run is None:  # no kernel calls at all
        return (lambda: 0), (lambda: 0), None
    cplan = static_plan.c_plan([plan._funcs[k] for k in rest], [plan._calls[k] for k in rest])
    if cplan is None:  # a library without EmberRunCalls
        status = [0]

        def run_in_turn() -> int:
            status[0] = run()
            return status[0]
        return run_in_turn, lambda: -1 - status[0], None
    failed = cplan._failed
    return (functools.partial(cplan._runner, cplan._table, cplan._count, failed),
            lambda: rest[failed[0]], cplan)


__all__ = ["ArrayCall", "ArrayCalls", "key"]
