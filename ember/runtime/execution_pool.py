"""Execution contexts: one model, any number of concurrent callers, each with its own result.

An executor (graph, AOT, VM) owns the buffers a run writes: inputs, intermediates, outputs,
workspace. Two threads in one executor would write each other's buffers. A
:class:`ContextPool` holds *contexts*, executors of one model that share what a run only reads
(kernels, weights, constants, the VM's executable) and own what it writes. A call takes a
free context, copies its inputs in, runs, copies its outputs out and gives the context back.
A context is made only when every existing one is busy, so the pool grows to the number of
calls that really overlap, up to ``limit`` (callers beyond it wait for a free context).

The kernels' thread pool is the process's (``ember.runtime.threads``): while one call's
parallel loop holds it, another call's loops run on its own thread, so concurrent calls do
not multiply the worker threads. Only an AOT model built with ``interface-api=c`` has one
static workspace per library: its runs take turns under one lock.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .aot_executor import AotExecutor
from .container import ADT
from .cpus import usable_cpus
from .graph_executor import GraphExecutor
from .model_call import ModelCall, model_call
from .module import Module
from .ndarray import NDArray, empty
from .vm.executor import VMModule
from .vm.interpreter import VirtualMachine
from .vm.plan_arrays import ArrayCall, ArrayCalls, key
from .vm.plan_native import DynamicCall, dynamic_call
from .vm.static_plan import NOT_RUN, StaticPlan


def default_limit() -> int:
    """Contexts a pool may make: 4 per CPU this process may run on, at least 8, at most 64.
    A Python thread holds its context while it waits for the GIL between the steps of a call,
    so calls overlap more than CPUs run: with fewer contexts than calling threads, callers
    queue on the pool and each release wakes one (on 2 CPUs, 8 threads calling a 1x2 add got
    0.4x the calls per second of one thread with 2 contexts, 1.0x with 8). Contexts are made
    only as calls overlap, so the bound costs memory only where that many calls run at once."""
    return min(64, max(8, 4 * usable_cpus()))


class ContextPool:
    """Contexts made by ``make()`` on demand, at most ``limit``; ``acquire``/``release``.

    The free list is a Python list, whose ``pop``/``append`` are atomic: the common call
    takes no lock. The first context is made here, so a model that cannot run fails now."""

    def __init__(self, make: Callable[[], Any], limit: int | None = None) -> None:
        self._make = make
        self.limit = default_limit() if limit is None else limit
        self.free: list[Any] = [make()]  # contexts not in use (pop/append: see acquire)
        self._count = 1  # contexts made (free or in use)
        self.waiting = 0  # callers waiting for a context (release wakes one)
        self._cond = threading.Condition()

    @property
    def size(self) -> int:
        """How many contexts exist (the most calls that have overlapped, up to ``limit``)."""
        return self._count

    def acquire(self) -> Any:
        try:
            return self.free.pop()
        except IndexError:
            return self.grow_or_wait()

    def grow_or_wait(self) -> Any:
        """A context when none was free: a new one, or (at the limit) the next released."""
        with self._cond:
            # Counted before looking at ``free``: release appends, then reads ``waiting``
            # without the lock, so one of the two sees the other.
            self.waiting += 1
            try:
                while not self.free and self._count >= self.limit:
                    self._cond.wait()
            finally:
                self.waiting -= 1
            if self.free:
                return self.free.pop()
            self._count += 1
        try:
            return self._make()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def release(self, ctx: Any) -> None:
        self.free.append(ctx)
        if self.waiting:
            self.wake()

    def wake(self) -> None:
        """Wake a caller waiting in grow_or_wait (after a context went back to ``free``)."""
        with self._cond:
            self._cond.notify()


class BufferContext:
    """A graph or AOT executor as a context: ``call(values)`` copies the (checked) input
    arrays into its buffers, runs, and returns copies of its outputs. ``native``: the same
    call as one C call (``ember.runtime.model_call``), or None where it cannot be made."""

    __slots__ = ("executor", "inputs", "native", "outputs", "run")

    def __init__(self, executor: GraphExecutor | AotExecutor, names: Sequence[str],
                 lock: threading.Lock | None = None, threads: int = 0) -> None:
        self.executor = executor
        if isinstance(executor, GraphExecutor):
            entries, eids = executor._entries, executor._input_eids
            self.inputs = [entries[eids[executor._inputs.index[n]]]._np for n in names]
            self.outputs = [entries[eid]._np for eid in executor._output_eids]
        else:
            self.inputs = [executor._inputs[executor._specs.index[n]]._np for n in names]
            self.outputs = [out._np for out in executor._outputs]
        self.run = executor._execute if lock is None else _locked(executor._execute, lock)
        self.native = None if lock is not None else _native_call(executor, self.inputs,
                                                                 self.outputs, threads)

    def call(self, values: Sequence[Any]) -> list[np.ndarray]:
        self._copy_in(values)
        self.run()
        return [out.copy() for out in self.outputs]

    def prepare(self, values: Sequence[Any]) -> Callable[[], None]:
        """The run alone on ``values``, to time (``CompiledModel.benchmark``)."""
        self._copy_in(values)
        return self.run

    def _copy_in(self, values: Sequence[Any]) -> None:
        copyto = np.copyto
        for buf, value in zip(self.inputs, values):
            copyto(buf, value._np if type(value) is NDArray else value)


def _native_call(executor: GraphExecutor | AotExecutor, inputs: Sequence[np.ndarray],
                 outputs: Sequence[np.ndarray], threads: int) -> ModelCall | None:
    """The executor's run as one ModelCall, where it has one as a CPlan."""
    plan = executor.c_plan()
    if plan is None:
        return None
    return model_call(plan.lib, plan._table, plan._count, inputs, outputs, threads,
                      plan.written)


def _locked(run: Callable[[], None], lock: threading.Lock) -> Callable[[], None]:
    def locked() -> None:
        with lock:
            run()

    return locked


class VMContext:
    """A VirtualMachine of the model's executable as a context. Once ``main`` has a plan that
    ``plan_arrays`` can serve, a call is a lookup of the inputs' shapes and that signature's
    ArrayCall (inputs copied in, one native call, results copied out); otherwise each input
    is copied into a buffer of the context's (made again only when a dynamic input's shape
    changes) and ``main`` runs through its plan (results are fresh blocks, returned without a
    copy) or interpreted (results copied: they may be constants or views of the inputs).

    ``native`` is the one-C-call form a model's call tries first: for a plan with symbolic
    inputs, its DynamicCall (``vm.plan_native``: any input shape whose buffers are large
    enough, the shape phase in C); else the ModelCall of the signature that ran last."""

    __slots__ = ("arrays", "checked", "dtypes", "dynamic", "index", "inputs", "made", "native",
                 "patterns", "threads", "vm")

    def __init__(self, vm: VirtualMachine, shapes: Sequence[Sequence[Any] | None],
                 dtypes: Sequence[str], threads: int = 0) -> None:
        self.vm, self.dtypes, self.threads = vm, list(dtypes), threads
        # The one-C-call form (see BufferContext) that is valid now: set after each run in
        # Python that leaves the plan's tensors at plan_arrays' buffers, cleared by any other.
        self.native: ModelCall | DynamicCall | None = None
        self.dynamic: DynamicCall | None = None  # made once, with self.arrays
        self.index = vm._function_index("main", "ember model")
        self.patterns = list(shapes)  # ints, None or a dimension's name (shared sizes)
        self.inputs = [empty(shape, dtype, vm.device)
                       if shape is not None and all(type(d) is int for d in shape) else None
                       for shape, dtype in zip(shapes, dtypes)]
        self.arrays: ArrayCalls | None = None
        self.checked = False  # whether self.arrays was decided (once main has its plan)
        self.made: dict[tuple[Any, ...], ArrayCall] = {}  # self.arrays.made once it exists

    def call(self, values: Sequence[Any]) -> list[np.ndarray]:
        self.native = None
        if self.dynamic is not None:
            self.dynamic.forget()
        made = self.made.get(values[0].shape if len(values) == 1 else key(values))
        if made is not None:
            outs = made(values)
            if outs is not NOT_RUN:
                self._set_native(made)
                return outs  # type: ignore[no-any-return]
        elif self.arrays is not None or self._arrays():
            arrays = [v._np if type(v) is NDArray else v for v in values]
            made = self.arrays.make(arrays)
            outs = made(arrays) if made is not None else NOT_RUN
            if outs is not NOT_RUN:
                self._set_native(made)  # type: ignore[arg-type]
                return outs  # type: ignore[no-any-return]
        return self._call(values)

    def _set_native(self, made: ArrayCall) -> None:
        """After ``made`` ran: the one-C-call form valid now (the plan's tensors point at
        plan_arrays' buffers)."""
        if self.dynamic is not None:
            self.dynamic.refresh()
            self.native = self.dynamic
        else:
            self.native = made.native_call(self.threads)

    def _arrays(self) -> bool:
        """Whether ``main`` has (now) a plan that ``plan_arrays`` serves; if so, serve it.
        (Asked until the plan is made: on the first call.)"""
        vm = self.vm
        plan = vm._plans.get(self.index) if vm.static_plans else None
        if plan is None or self.checked:
            return False
        self.checked = True
        self.arrays = ArrayCalls.of(plan) if type(plan) is StaticPlan else None
        if self.arrays is None:
            return False
        self.made = self.arrays.made  # type: ignore[assignment]
        self.dynamic = dynamic_call(self.arrays, self.patterns, self.threads)
        return True

    def _call(self, values: Sequence[Any]) -> list[np.ndarray]:
        """The call through the VM: its plan's NDArray run, else the interpreter."""
        inputs = self.inputs
        for k, value in enumerate(values):
            src = value._np if type(value) is NDArray else value
            buf = inputs[k]
            if buf is None or buf._np.shape != src.shape:
                buf = inputs[k] = empty(src.shape, self.dtypes[k], self.vm.device)
            np.copyto(buf._np, src)
        vm = self.vm
        plan = vm._plans.get(self.index) if vm.static_plans else None
        if type(plan) is StaticPlan:
            arrays = plan.run_arrays(inputs)
            if arrays is not NOT_RUN:
                return arrays  # type: ignore[no-any-return]
        return [np.array(t._np) if type(t) is NDArray else t
                for t in _flatten(vm._execute(self.index, list(inputs)))]

    def prepare(self, values: Sequence[Any]) -> Callable[[], Any]:
        """A whole call on ``values``, to time (``CompiledModel.benchmark``)."""
        return lambda: self.call(values)


def _flatten(value: Any) -> list[Any]:
    """A result's tensors in order: nested tuples flattened, as the model's outputs are."""
    if type(value) is not ADT:
        return [value]
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if type(v) is ADT:
            stack.extend(reversed(v.fields))
        else:
            out.append(v)
    return out


def context_maker(factory: Module, dev: Any, names: Sequence[str],
                  shapes: Sequence[Sequence[Any] | None],
                  dtypes: Sequence[str], threads: int = 0) -> Callable[[], Any]:
    """``make()`` for a pool of ``factory``'s model: each context shares the first one's
    weights. ``names``/``shapes``/``dtypes`` are the model's inputs (a shape of ints, None
    or a dimension's name per axis; ``None``: unknown); ``threads`` > 0: the kernels' thread count that a context's ``native`` call sets
    (0: it leaves the calling thread's)."""
    first = factory["default"](dev)
    if isinstance(first, VMModule):
        vms = iter([first.vm])
        return lambda: VMContext(next(vms, None) or VirtualMachine(first.vm.exe, dev), shapes,
                                 dtypes, threads)
    if not isinstance(first, (GraphExecutor, AotExecutor)):
        raise TypeError(f"ember model: cannot run executor {first!r} in this process")
    lock = threading.Lock() if getattr(first, "static_arena", False) else None
    made = iter([first])
    return lambda: BufferContext(next(made, None) or first.clone(), names, lock, threads)


__all__ = ["BufferContext", "ContextPool", "VMContext", "context_maker", "default_limit"]
