"""The AOT executor's run side: a compiled ``tvmgen_<mod>_run`` behind the module-based interface.

``factory["my_mod"](dev)`` (or ``create(lib, dev, "my_mod")``) gives an :class:`AotExecutor`:
it reads the model's metadata from the library (``tvmgen_<mod>_get_metadata``, checked against
the factory's copy), allocates the inputs, outputs, the arena (workspace) and, when params
are not linked, the constant pool, and packs the call once. ``run()`` is then one ctypes call
of the entry with preallocated arguments: no allocation and no argument conversion per call.
The entry is the PackedFunc ``tvmgen_<mod>_run`` (``interface-api=packed``) or, for
``interface-api=c``, ``int32_t tvmgen_<mod>_run(struct inputs*, struct outputs*)`` called
with ctypes structures that point at this executor's arrays.

The interface is the graph executor's (``set_input`` by name, index or keywords, with the
same checks and messages; ``get_input``, ``get_output``, ``benchmark``...); in addition
``run`` refuses to start while an input has been neither set nor handed out by ``get_input``
(whose view the caller may write the input into). ``AotModule(module)`` is the
user-facing wrapper, as ``GraphModule`` is for graphs (``tvm.runtime.executor.AotModule``).
"""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import huge_pages
from ._bridge import raise_error
from .aot_format import ModelMetadata, ParameterInfo, c_prefix, parse_metadata
from .device import Device
from .dtype import DataType
from .errors import ArgumentError, ArgumentTypeError, ArtifactError, TVMError
from .executor_common import (
    CPlan,
    ExecutorWrapper,
    GraphInputError,
    Inputs,
    InputSpec,
    check_name,
    check_out,
    check_output_index,
    c_plan,
    check_timing,
    input_array,
    one_device,
    type_str,
)
from .executor_common import c_call as _c_call
from .executor_guard import UseGuard, guarded
from .module import Module
from .ndarray import NDArray, _aligned_buffer, _parse_dtype, empty
from .packed_func import CPackedFunc, PackedFunc, as_packed_func
from .time_eval import BenchmarkResult, time_evaluator

AotInputError = GraphInputError  # the same class: callers catch one kind of bad input


def _bytes(nbytes: int, alignment: int, dev: Device) -> NDArray:
    """A uint8 NDArray of ``nbytes`` whose data is ``alignment``-byte aligned."""
    raw = _aligned_buffer(nbytes + alignment)
    view = raw[(-raw.ctypes.data) % alignment:][:max(nbytes, 1)]
    return NDArray(view, dev, DataType("uint8"))


def constant_pool(meta: ModelMetadata, params: Mapping[str, Any]) -> np.ndarray:
    """The constant pool of a model built without link-params: ``meta.constant_pool_bytes``
    bytes holding each constant (by name from ``params``) at its offset. What
    ``tvmgen_<mod>_set_constants`` (C interface) or the entry's constants argument expects.
    Raises TVMError for a missing constant or one of the wrong shape or dtype."""
    pool = np.zeros(meta.constant_pool_bytes, np.uint8)
    for c in meta.constants:
        value = params.get(c.name)
        if value is None:
            raise ArgumentError(f"aot executor: constant {c.name!r} "
                                f"({type_str(c.dtype, c.shape)}) is missing from the params; "
                                "the model was built without link-params, so the factory "
                                "must keep its params")
        arr = input_array(value, c.dtype, c.shape, f"aot executor: constant {c.name!r}")
        native = np.ascontiguousarray(arr, dtype=_parse_dtype(c.dtype)[1])  # byte order too
        pool[c.offset:c.offset + c.nbytes] = np.frombuffer(native.tobytes(), np.uint8)
    return pool


def read_metadata(lib: Module, mod_name: str) -> ModelMetadata:
    """The metadata compiled into ``lib`` for module ``mod_name`` (via its PackedFunc)."""
    symbol = f"{c_prefix(mod_name)}_get_metadata"
    try:
        getter = lib.get_function(symbol, query_imports=True)
    except AttributeError:
        raise ArtifactError(f"aot executor: {lib!r} has no {symbol}; it was not built by "
                            f"relay.build with Executor('aot') for module {mod_name!r}") from None
    return parse_metadata(getter())


class AotExecutor(Module):
    """An AOT-compiled model with its inputs, outputs and memory, ready to run."""

    _EXPORTED: tuple[str, ...] = (
        "set_input", "run", "get_output", "get_input", "get_num_outputs", "get_num_inputs",
        "get_input_index", "get_input_name", "get_input_info", "get_output_info")

    def __init__(self, lib: Module, dev: Device | Sequence[Device] | None = None,
                 metadata: ModelMetadata | None = None, params: Mapping[str, Any] | None = None,
                 mod_name: str | None = None, *, _like: AotExecutor | None = None) -> None:
        super().__init__()
        if not isinstance(lib, Module):
            raise ArgumentTypeError(f"aot executor: lib must be a Module, got "
                                    f"{type(lib).__name__}")
        self.lib, self.device = lib, one_device(dev, "aot executor")
        self._guard = UseGuard("aot executor")
        if _like is not None:
            meta = _like.metadata
        else:
            name = check_name(mod_name or (metadata.module_name if metadata else "default"),
                              "aot executor")
            meta = read_metadata(lib, name)
            # Equal dataclasses first: the JSON of a large model's metadata takes a while.
            if (metadata is not None and metadata != meta
                    and metadata.to_json() != meta.to_json()):
                raise ArtifactError(f"aot executor: the metadata in {lib!r} differs from the "
                                    "factory's; the library was built for another model")
        self.metadata = meta
        main = meta.main
        self._inputs = [empty(p.shape, p.dtype, self.device) for p in main.inputs]
        self._outputs = [empty(p.shape, p.dtype, self.device) for p in main.outputs]
        self._specs = Inputs([InputSpec(p.relay_name_hint, p.dtype, p.shape)
                              for p in main.inputs])
        self._missing = dict.fromkeys(p.relay_name_hint for p in main.inputs)
        self._extra: list[NDArray] = []  # constant pool, then workspace
        if meta.needs_constant_pool:
            self._extra.append(_like._extra[0] if _like is not None else
                               self._constant_pool(params or {}))
        if main.workspace_size_bytes:
            self._extra.append(_bytes(main.workspace_size_bytes, meta.workspace_alignment,
                                      self.device))
        self._entry = lib.get_function(meta.symbol("run"), query_imports=True)
        self._call = self._bind()
        # interface-api=c runs on the library's static arena: one run at a time per library.
        self.static_arena = meta.interface_api == "c" and bool(main.workspace_size_bytes)

    def clone(self) -> AotExecutor:
        """An executor of the same model that shares this one's constants (not a copy) and
        owns its inputs, outputs and workspace, so it runs at the same time as this one from
        another thread; except with interface-api=c, whose workspace is a static array of
        the library (``static_arena``): its runs must take turns."""
        return AotExecutor(self.lib, self.device, _like=self)

    # -- setting up -------------------------------------------------------------------------
    def _constant_pool(self, params: Mapping[str, Any]) -> NDArray:
        """The constants laid out at their metadata offsets (the ConstLoaderModule role)."""
        meta = self.metadata
        # on huge pages (huge_pages.py): numpy advises a block of 4 MiB or more by itself,
        # but not the partial huge pages at its ends, nor a smaller block
        view = huge_pages.buffer(max(meta.constant_pool_bytes, 1), meta.constant_alignment)
        view[:meta.constant_pool_bytes] = constant_pool(meta, params)
        return NDArray(view, self.device, DataType("uint8"))

    def _bind(self) -> Callable[[], int]:
        """The run call with every argument packed now: one ctypes call per run."""
        if self.metadata.interface_api == "c":
            return self._bind_c()
        args = self._inputs + self._outputs + self._extra
        if isinstance(self._entry, CPackedFunc):
            return _c_call(self._entry, args)
        entry = self._entry

        def call() -> int:  # a remote or Python module: through its PackedFunc
            entry(*args)
            return 0

        return call

    def _bind_c(self) -> Callable[[], int]:
        entry = self._entry
        if not isinstance(entry, CPackedFunc):
            raise TVMError(f"aot executor: {entry.name} (interface-api=c) must be a compiled "
                           "function of a library loaded in this process")
        main = self.metadata.main

        def struct(params: tuple[ParameterInfo, ...], arrays: list[NDArray]) -> Any:
            cls = type("io", (ctypes.Structure,), {
                "_fields_": [(p.tir_name_hint, ctypes.c_void_p) for p in params]})
            return cls(*(a.data_ptr for a in arrays))

        self._structs = (struct(main.inputs, self._inputs), struct(main.outputs, self._outputs))
        if self.metadata.needs_constant_pool:
            pool = self._extra[0]
            setter = self.lib.get_function(self.metadata.symbol("set_constants"),
                                           query_imports=True)
            fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64)(
                setter.address)  # type: ignore[attr-defined]
            if fn(pool.data_ptr, pool.nbytes):
                raise_error(setter._take_error, setter.name)  # type: ignore[attr-defined]
            # The library keeps the pointer (a static), so the pool lives as long as the
            # library; a later executor's (equal) pool replaces it.
            vars(self.lib).setdefault("_aot_constant_pools", {})[self.metadata.prefix] = pool
        run = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(entry.address)
        return functools.partial(run, *(ctypes.addressof(s) for s in self._structs))

    # -- running ----------------------------------------------------------------------------
    def run(self, **inputs: Any) -> None:
        """Run the model (after ``set_input(**inputs)`` if inputs are given)."""
        # ``guarded("run")`` and ``_execute`` written out: in a benchmark's loop of runs,
        # each layer of Python calls costs more than its instructions (the kernels evict it).
        guard = self._guard
        guard.enter("run")
        try:
            guard.run()
            if inputs:
                self.set_input(**inputs)
            if self._missing:
                self._missing_input()
            if self._call():
                raise_error(self._entry._take_error,  # type: ignore[attr-defined]
                            self._entry.name)
        finally:
            guard.leave()

    def c_plan(self) -> CPlan | None:
        """The run (the packed entry on its bound arguments) as a one-call CPlan, for a
        one-C-call model run (``execution_pool``); None for the C interface (its static
        workspace takes turns under a lock) or an entry that is not compiled C."""
        if self.metadata.interface_api == "c" or not isinstance(self._entry, CPackedFunc):
            return None
        # main writes every output whole (the C interface's callers own those buffers)
        written = frozenset(out._dl_addr for out in self._outputs)
        return c_plan([self._entry], [self._call], written)  # type: ignore[list-item]

    def _execute(self) -> None:
        if self._call():
            raise_error(self._entry._take_error, self._entry.name)  # type: ignore[attr-defined]

    def _missing_input(self) -> None:
        name = next(iter(self._missing))
        raise TVMError(f"run: input {name!r} has not been set; call set_input({name!r}, value) "
                       f"first (inputs not set: {', '.join(map(repr, self._missing))})")

    @guarded("call")
    def run_from_inputs(self, *args: Any) -> list[NDArray]:
        """``(device_type, device_id, name0, value0, ...)``: set, run, return output copies."""
        from .graph_executor import pairs_to_dict

        self._set(pairs_to_dict(args, "run_from_inputs"), "run_from_inputs")
        self.run()
        return [out.copyto(self.device) for out in self._outputs]

    # -- inputs -----------------------------------------------------------------------------
    @guarded("write")
    def set_input(self, key: str | int | None = None, value: Any = None, **params: Any) -> None:
        """Copy ``value`` into input ``key`` (a name or index), and each ``name=value``.
        Conversion rules: ``executor_common`` (exact dtype for arrays, lossless for Python
        numbers and lists, exact shape). The whole call is checked before any input changes."""
        self._copy_checked(self._specs.check_call(key, value, params, "set_input"))

    def _set(self, params: Mapping[str, Any], where: str) -> None:
        self._copy_checked(self._specs.check_call(None, None, params, where))

    def _copy_checked(self, checked: list[tuple[int, Any]]) -> None:
        for k, src in checked:
            np.copyto(self._inputs[k]._np, src)
            self._missing.pop(self._specs.specs[k].name, None)
            self._guard.wrote(k)

    @guarded("call")
    def get_input(self, key: str | int, out: NDArray | None = None) -> NDArray:
        """Input ``key`` (a view of the executor's memory), or a copy into ``out``.

        Writing into the view sets the input (``get_input("x").copyfrom(value)``, as with the
        graph executor and the C AOT executor), so handing it out counts as setting it."""
        k = self._specs.slot(key, "get_input")
        arr = self._inputs[k]
        if out is not None:
            return check_out(out, arr, "get_input").copyfrom(arr)
        self._missing.pop(self._specs.specs[k].name, None)
        return arr

    def get_input_index(self, name: str) -> int:
        """The index of input ``name``, or -1 if there is none."""
        return self._specs.index.get(check_name(name, "get_input_index"), -1)

    def get_input_name(self, index: int) -> str:
        return self._specs.specs[self._specs.slot(index, "get_input_name")].name

    def get_num_inputs(self) -> int:
        return len(self._inputs)

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """``(shapes, dtypes)`` of the inputs, by name."""
        main = self.metadata.main
        return ({p.relay_name_hint: p.shape for p in main.inputs},
                {p.relay_name_hint: p.dtype for p in main.inputs})

    # -- outputs ----------------------------------------------------------------------------
    def get_num_outputs(self) -> int:
        return len(self._outputs)

    @guarded("read")
    def get_output(self, index: int, out: NDArray | None = None) -> NDArray:
        """Output ``index`` (a view of the executor's memory), or a copy into ``out``."""
        arr = self._outputs[check_output_index(index, len(self._outputs))]
        return arr if out is None else check_out(out, arr, "get_output").copyfrom(arr)

    def get_output_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """``(shapes, dtypes)`` of the outputs, by name (``output``, or ``output0``...)."""
        main = self.metadata.main
        return ({p.relay_name_hint: p.shape for p in main.outputs},
                {p.relay_name_hint: p.dtype for p in main.outputs})

    def get_model_metadata(self) -> ModelMetadata:
        """The unified metadata (``m["get_model_metadata"]()`` gives it as JSON)."""
        return self.metadata

    # -- timing -----------------------------------------------------------------------------
    @guarded("call")
    def benchmark(self, device: Device | None = None, func_name: str = "run", repeat: int = 5,
                  number: int = 5, min_repeat_ms: int | None = None, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1,
                  **inputs: Any) -> BenchmarkResult:
        """Time ``run`` (the compiled entry, in a C loop when it is a packed function):
        ``repeat`` measurements of ``number`` calls. With ``end_to_end`` each call also copies
        ``inputs`` in and the outputs out. A BenchmarkResult, in seconds."""
        if func_name != "run":
            raise ArgumentError(f"benchmark: the AOT executor times 'run', not {func_name!r}")
        check_timing(number, repeat, min_repeat_ms, "benchmark")
        if device is not None:
            one_device(device, "benchmark")
        args: list[Any] = []
        if end_to_end:
            self._specs.check_call(None, None, inputs, "benchmark")
            args = [0, 0] + [x for kv in inputs.items() for x in kv]
            func: Callable[..., Any] = self.run_from_inputs
        else:
            self._set(inputs, "benchmark")
            if self._missing:
                self._missing_input()
            packed = (self.metadata.interface_api == "packed"
                      and isinstance(self._entry, CPackedFunc))
            func = self._entry if packed else self.run
            args = self._inputs + self._outputs + self._extra if packed else []
        timer = time_evaluator(func, device or self.device, number, repeat, min_repeat_ms or 0,
                               cooldown_interval_ms, repeats_to_cooldown)
        return timer(*args)

    # -- Module -----------------------------------------------------------------------------
    def _get_local(self, name: str) -> PackedFunc | None:
        if name in self._EXPORTED:
            return as_packed_func(getattr(self, name), name)
        if name == "get_model_metadata":
            return PackedFunc(lambda: self.metadata.to_json(), name)
        return None

    def __repr__(self) -> str:
        return (f"Module(AotExecutor, {self.metadata.module_name!r}, {self.get_num_inputs()} "
                f"inputs, {self.get_num_outputs()} outputs)")


def create(lib: Module, dev: Device | Sequence[Device] | None = None,
           mod_name: str = "default") -> AotExecutor:
    """An AotExecutor for module ``mod_name`` of ``lib`` (its params linked or none); on the
    RPC server when ``lib`` was loaded there."""
    session = getattr(lib, "rpc_session", None)
    if session is not None:
        dev = dev[0] if isinstance(dev, (list, tuple)) else dev
        create_remote = session.get_function("tvm.aot_executor.create")
        return create_remote(lib, dev, mod_name)  # type: ignore[no-any-return]
    return AotExecutor(lib, dev, None, None, mod_name)


class AotModule(ExecutorWrapper):
    """The user-facing wrapper of an AOT executor module: ``AotModule(factory["default"]
    (dev))`` (``tvm.runtime.executor.AotModule``). Its methods are the executor's
    (``set_input``, ``run``, ``get_output``, ...); ``module`` is the wrapped Module."""

    executor_type = AotExecutor
    kind = "an AOT executor"


__all__ = ["AotExecutor", "AotModule", "constant_pool", "create", "read_metadata"]
