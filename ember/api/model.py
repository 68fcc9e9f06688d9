"""``CompiledModel``: what ``ember.compile`` returns and ``ember.load`` gives back.

A compiled model is an executor factory (graph, AOT or VM, see ``ember.runtime``) plus a small
record: which executor, the input and output specs, the thread count. It runs as a function::

    out = model(x)                  # positional, in model.inputs order
    outs = model(data=x, mask=m)    # or by name; several outputs come back as a list
    model.save("model.so")          # one shared library (export_library): kernels, executor
    model = ember.load("model.so")  # description, params, and this record; no compiler needed

This module belongs to the runtime side of the one-line API: it imports ``ember.runtime``
only, so ``ember.load`` runs a saved model with none of the compiler's modules loaded.

The saved record (``ModelRecord``, with ``TensorSpec``) is defined in the runtime layer,
``ember.runtime.model_record``, so that any process that loads libraries can rebuild it.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..runtime.device import Device, cpu
from ..runtime.errors import ArtifactError, TVMError
from ..runtime.execution_pool import ContextPool, context_maker
from ..runtime.executor_common import check_timing
from ..runtime.model_record import EXECUTORS, FORMAT, FORMAT_VERSION, ModelRecord, TensorSpec
from ..runtime.module import Module
from ..runtime.ndarray import _NP_NAME, NDArray
from ..runtime.threads import ThreadControl, check_num_threads
from ..runtime.time_eval import BenchmarkResult, time_evaluator
from ..runtime.vm.interpreter import VMError
from .model_values import has_values, to_vm_value, value_kind, values_context_maker

__all__ = ["EXECUTORS", "FORMAT", "FORMAT_VERSION", "CompiledModel", "ModelInputError",
           "ModelRecord", "TensorSpec", "bind_inputs", "check_input", "check_named_dims", "load"]


class ModelInputError(TVMError, ValueError):
    """A wrong input to a compiled model: 'input 'data': expected float32[1, 3], got ...'."""


def _exact(spec: TensorSpec) -> tuple[np.dtype, tuple[int, ...], tuple[int, ...]] | None:
    """What a call's fast check compares for an input of a plain numpy dtype: (numpy dtype,
    its shape with -1 for each dynamic axis, the axes of known size), else None."""
    dtype = next((d for d, name in _NP_NAME.items() if name == spec.dtype), None)
    if spec.shape is None or dtype is None:
        return None
    pattern = tuple(d if type(d) is int else -1 for d in spec.shape)
    return dtype, pattern, tuple(k for k, d in enumerate(pattern) if d >= 0)


def _fits(shape: tuple[int, ...], pattern: tuple[int, ...], known: tuple[int, ...]) -> bool:
    """Whether ``shape`` has ``pattern``'s rank and known sizes."""
    return len(shape) == len(pattern) and all(shape[k] == pattern[k] for k in known)


def _fmt(dtype: Any, shape: Sequence[Any]) -> str:
    return f"{dtype}[{', '.join('?' if d is None else str(d) for d in shape)}]"


def check_input(spec: TensorSpec, value: Any) -> Any:
    """``value`` as what the executor takes for input ``spec``: arrays and NDArrays must have
    its dtype and shape (any size in a dynamic dimension), lists and scalars are converted to
    its dtype; a sequence or optional input takes a list or None/its value
    (``model_values``). Raises ModelInputError naming the input."""
    if spec.shape is None and (kind := value_kind(spec)) is not None:
        return to_vm_value(spec, kind, value)
    if isinstance(value, NDArray):
        dtype, shape = str(value.dtype), tuple(value.shape)
    else:
        if not isinstance(value, np.ndarray):
            try:
                value = np.asarray(value, dtype=spec.dtype)
            except (TypeError, ValueError) as err:
                raise ModelInputError(f"input {spec.name!r}: cannot convert "
                                      f"{type(value).__name__} to {spec.dtype}: {err}") from None
        dtype, shape = _NP_NAME.get(value.dtype) or str(value.dtype), value.shape
    want = spec.shape
    if want is not None and (dtype != spec.dtype or len(shape) != len(want) or any(
            type(w) is int and w != s for w, s in zip(want, shape))):
        raise ModelInputError(f"input {spec.name!r}: expected {_fmt(spec.dtype, want)}, got "
                              f"{_fmt(dtype, shape)}")
    return value


def bind_inputs(specs: Sequence[TensorSpec], args: Sequence[Any],
                kwargs: dict[str, Any]) -> dict[str, Any]:
    """Positional and named arguments -> {input name: checked value}, every input once."""
    names = [s.name for s in specs]
    listed = ", ".join(map(repr, names)) or "(none)"
    if len(args) > len(specs):
        raise ModelInputError(f"this model takes {len(specs)} input(s) ({listed}), got "
                              f"{len(args)} positional arguments")
    given = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names:
            raise ModelInputError(f"no input named {name!r}; this model's inputs are {listed}")
        if name in given:
            raise ModelInputError(f"input {name!r} given both by position and by name")
        given[name] = value
    missing = [n for n in names if n not in given]
    if missing:
        raise ModelInputError(f"missing input(s) {', '.join(map(repr, missing))}; this "
                              f"model's inputs are {listed}")
    checked = {s.name: check_input(s, given[s.name]) for s in specs}
    check_named_dims(specs, checked)
    return checked


def check_named_dims(specs: Sequence[TensorSpec], values: dict[str, Any]) -> None:
    """ModelInputError when two axes of one dimension name (``batch``, ``seq``) have
    different sizes in ``values``, naming both inputs and axes."""
    seen: dict[str, tuple[str, int, int]] = {}
    for spec in specs:
        if spec.shape is None:
            continue
        shape = tuple(values[spec.name].shape)
        for axis, d in enumerate(spec.shape):
            if type(d) is not str:
                continue
            first = seen.setdefault(d, (spec.name, axis, shape[axis]))
            if first[2] != shape[axis]:
                raise ModelInputError(
                    f"inputs {first[0]!r} and {spec.name!r} share dimension {d!r}: "
                    f"{first[0]!r} has {first[2]} at axis {first[1]}, {spec.name!r} has "
                    f"{shape[axis]} at axis {axis}")


def shapes_rejected(specs: Sequence[TensorSpec], values: Sequence[Any], err: VMError) -> str:
    """The message for inputs whose sizes (or values that set sizes: a Tile's repeats, a
    Range's step) a shape function rejected (before any kernel ran): each input's shape
    against its declared one, then the shape function's own reason."""
    given = []
    for spec, value in zip(specs, values):
        if not hasattr(value, "shape"):  # a sequence or optional (model_values)
            given.append(f"{spec.name!r} ({spec.dtype})")
            continue
        declared = "?" if spec.shape is None else _fmt(spec.dtype, spec.shape)
        free = [] if spec.shape is None else [
            str(axis) for axis, d in enumerate(spec.shape) if not isinstance(d, int)]
        axes = f", dynamic axes {', '.join(free)}" if free else ""
        given.append(f"{spec.name!r} {_fmt(spec.dtype, tuple(value.shape))} (declared "
                     f"{declared}{axes})")
    reason = str(err).split("\n", 1)[0]
    return (f"the model cannot run on these inputs: {'; '.join(given)}: {reason} "
            f"(kernel {err.kernel!r})")


class CompiledModel:
    """A model ready to run: ``model(*arrays)`` or ``model(**named)`` -> numpy output(s).

    ``inputs``/``outputs``: TensorSpec records; ``executor``: "graph", "aot" or "vm";
    ``threads``: the worker threads of its kernels (see ``ember.runtime.threads``). Made by
    ``ember.compile`` or ``ember.load``.

    Threads may share a model: every call gets its own result. A call runs on an execution
    context of its own (inputs, intermediates, outputs; weights are shared), taken from a
    pool that grows to the number of calls that overlap, at most ``max_contexts``
    (``ember.runtime.execution_pool``).
    """

    def __init__(self, factory: Module, record: ModelRecord, dev: Device | None = None,
                 path: str | None = None) -> None:
        self._factory, self._record, self._path = factory, record, path
        self._dev = dev or cpu(0)
        specs = record.inputs
        shapes = [s.shape for s in specs]  # None or a str: a dynamic dimension
        self._threads = ThreadControl(factory)
        # With one compiled library, a context's one-C-call form sets the kernels' thread
        # count itself; otherwise each call sets it here first (ThreadControl.ensure).
        native_threads = record.threads if self._threads.library_count == 1 else 0
        self._ensure_threads = native_threads == 0
        make = values_context_maker(factory, self._dev, record) if has_values(record) else \
            context_maker(factory, self._dev, [s.name for s in specs], shapes,
                          [s.dtype for s in specs], native_threads)
        self._pool = ContextPool(make)
        # (numpy dtype, shape pattern, known axes) of each input: the call's fast check.
        self._exact = [_exact(s) for s in specs]
        self._named = any(type(d) is str for s in specs for d in (s.shape or ()))
        self._names = [s.name for s in specs]
        self._single = len(record.outputs) == 1
        self._last: list[Any] | None = None  # the last call's inputs (for benchmark())

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._record.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._record.outputs

    @property
    def executor(self) -> str:
        return self._record.executor

    @property
    def threads(self) -> int:
        return self._record.threads

    @property
    def max_contexts(self) -> int:
        """The most execution contexts (calls running at once) this model keeps; callers
        beyond it wait. Default: ``execution_pool.default_limit()`` (4 per CPU, 8 to 64)."""
        return self._pool.limit

    @max_contexts.setter
    def max_contexts(self, value: int) -> None:
        self._pool.limit = check_num_threads(value, "max_contexts")

    @property
    def info(self) -> dict[str, Any]:
        """What the build recorded about itself (``ember compile``: source, target, options,
        kernels, the memory plan; see ``ember inspect``); empty for ``ember.compile``."""
        return dict(self._record.info)

    @property
    def factory(self) -> Module:
        """The executor factory (``relay.build``'s result) behind this model."""
        return self._factory

    def _bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        return list(bind_inputs(self.inputs, args, kwargs).values())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run on the inputs (positional in ``inputs`` order, or by name); returns a numpy
        array, or a list of them when the model has several outputs (arrays of the caller's
        own: no later call changes them). Raises ModelInputError for a missing, extra,
        misnamed, misshapen or mistyped input. Safe to call from many threads at once."""
        if kwargs and not args and len(kwargs) == len(self._names):
            # every input by name (as onnxruntime's feeds): in order, they take the one-C-call
            # path too (through the checked path: 47 us against 11 for a small GPT-2 block)
            try:
                args, kwargs = tuple([kwargs[name] for name in self._names]), {}
            except KeyError:
                pass  # a misnamed input: the checked path names it
        # The pool's acquire/release written out (a method call each is ~5% of a small
        # model's call): pop a free context, else grow or wait; give it back.
        pool = self._pool
        free = pool.free
        try:
            ctx = free.pop()
        except IndexError:
            ctx = pool.grow_or_wait()
        try:
            native = ctx.native
            if native is not None and not kwargs:
                # Arrays exactly as the model takes them: checked, copied in, run and copied
                # out in one C call without the GIL (ember.runtime.model_call).
                if self._ensure_threads:
                    self._threads.ensure(self._record.threads)
                outs = native.run(args)
                if outs is not None:
                    self._last = args
                    return outs
            return self._call_checked(ctx, args, kwargs)
        finally:
            free.append(ctx)
            if pool.waiting:
                pool.wake()

    def _call_checked(self, ctx: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """A call on any form of input (lists, scalars, NDArrays, names): each one checked
        and converted, then run on ``ctx`` (a kernel failure raises its executor's error)."""
        exact = self._exact
        if kwargs or len(args) != len(exact):
            args = self._bind(args, kwargs)
        else:
            for value, want in zip(args, exact):
                if (type(value) is not np.ndarray or want is None or value.dtype != want[0]
                        or value.shape != want[1] and not _fits(value.shape, *want[1:])):
                    args = self._bind(args, kwargs)
                    break
            else:
                if self._named:
                    check_named_dims(self.inputs, dict(zip(self._names, args)))
        self._threads.ensure(self._record.threads)
        try:
            outs = ctx.call(args)
        except VMError as err:
            if err.kernel is not None and err.kernel.endswith("_shape_func"):
                raise ModelInputError(shapes_rejected(self.inputs, args, err)) from err
            raise
        self._last = args
        return outs[0] if self._single else outs

    def benchmark(self, *args: Any, number: int = 10, repeat: int = 3,
                  min_repeat_ms: int | None = None, **kwargs: Any) -> BenchmarkResult:
        """Time ``repeat`` measurements of ``number`` runs on this model's thread count.

        Inputs as for a call; with none, the last call's inputs, or zeros when the model was
        never called (static shapes only). Returns the runtime's BenchmarkResult (seconds)."""
        check_timing(number, repeat, min_repeat_ms, "benchmark")
        if args or kwargs:
            values = self._bind(args, kwargs)
        else:
            values = self._last or [self._zeros(s) for s in self.inputs]
        ctx = self._pool.acquire()
        try:
            run = ctx.prepare(values)
            with self._threads.use(self.threads):
                timer = time_evaluator(run, self._dev, number, repeat, min_repeat_ms or 0)
                result: BenchmarkResult = timer()
        finally:
            self._pool.release(ctx)
        return result

    @staticmethod
    def _zeros(spec: TensorSpec) -> np.ndarray:
        if spec.shape is None or None in spec.shape:
            raise ModelInputError(f"benchmark: input {spec.name!r} has a dynamic shape; pass "
                                  "the inputs to time")
        return np.zeros(spec.shape, spec.dtype)  # type: ignore[arg-type]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model as one shared library (kernels, executor description, params and
        this record); ``ember.load(path)`` returns it without a C compiler. A loaded model
        is copied from its file (its kernels are compiled already)."""
        if self._path is not None:
            shutil.copyfile(self._path, path)
            return
        record = ModelRecord(self.executor, self.threads, self.inputs, self.outputs,
                             self._record.info)
        record.import_module(self._factory)
        record.export_library(os.fspath(path))

    def __repr__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return f"CompiledModel({self.executor}, threads={self.threads}; ({ins}) -> ({outs}))"


def load(path: str | os.PathLike[str], dev: Device | None = None) -> CompiledModel:
    """The CompiledModel saved at ``path`` by ``CompiledModel.save``; needs no C compiler.
    Raises ArtifactError for a missing file or one that is not a saved model."""
    from ..runtime.loaders import load_module

    root = load_module(os.fspath(path))
    if not isinstance(root, ModelRecord) or len(root.imported_modules) != 1:
        raise ArtifactError(f"{os.fspath(path)}: not a model saved by CompiledModel.save (its "
                            f"root module is {root!r}); use ember.runtime.load_module")
    return CompiledModel(root.imported_modules[0], root, dev, os.fspath(path))
