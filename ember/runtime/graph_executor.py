"""The graph executor: runs a graph JSON (see ``graph_format.py``) as a list of packed calls.

``create(graph_json, lib, dev)`` allocates one buffer per storage id, makes every tensor of
the graph a zero-copy view into its buffer (at its ``storage_offset``), resolves each node's
kernel in ``lib`` once, and precomputes each call's argument arrays, so that ``run()`` is a
loop of C calls that allocates nothing. The executor is a Module too: ``m["set_input"]``,
``m["run"]``, ``m["get_output"]``... are its packed functions, as with the Relay-era runtime.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import huge_pages
from ._bridge import raise_error
from .device import Device
from .errors import ArgumentError, ArgumentTypeError, TVMError, add_note
from .executor_common import (  # noqa: F401
    CPlan,
    ExecutorWrapper,
    GraphIndexError,
    GraphInputError,
    Inputs,
    InputSpec,
    c_plan,
    check_name,
    check_out,
    check_output_index,
    check_timing,
    one_device,
    type_str,
)
from .executor_common import c_call as _c_call
from .executor_guard import UseGuard, guarded
from .graph_format import NOP, Graph, parse_graph
from .module import Module
from .ndarray import ALIGNMENT, NDArray, _parse_dtype
from .packed_func import CPackedFunc, PackedFunc, as_packed_func
from .params import load_param_dict
from .time_eval import BenchmarkResult, time_evaluator


def _view(buf: np.ndarray, shape: tuple[int, ...], dtype: str, dev: Device,
          offset: int = 0) -> NDArray:
    """An NDArray of ``shape``/``dtype`` at byte ``offset`` of the buffer ``buf`` (no copy)."""
    dt, scalar = _parse_dtype(dtype)
    full = shape if dt.lanes == 1 else shape + (dt.lanes,)
    arr = np.ndarray(full, dtype=scalar, buffer=buf, offset=offset)  # its base keeps buf alive
    return NDArray(arr, dev, dt)


def _carve(sizes: Mapping[int, int]) -> dict[int, np.ndarray]:
    """A buffer of ``size`` bytes per storage id, each 64-byte aligned, all in one block on
    huge pages (``huge_pages.py``: the params are read from there at every run)."""
    offsets, total = {}, 0
    for sid, size in sizes.items():
        offsets[sid] = total
        total += -(-max(size, 1) // ALIGNMENT) * ALIGNMENT
    block = huge_pages.buffer(total)
    return {sid: block[offsets[sid]:offsets[sid] + size] for sid, size in sizes.items()}


def _py_call(func: PackedFunc, args: Sequence[NDArray]) -> Callable[[], int]:
    def call() -> int:
        func(*args)
        return 0

    return call


def _flat(arr: NDArray) -> NDArray:
    """A 1-D view of ``arr`` (for nodes with flatten_data)."""
    return NDArray(arr._np.reshape(-1) if arr._dtype.lanes == 1 else
                   arr._np.reshape(-1, arr._dtype.lanes), arr.device, arr._dtype)


class GraphExecutor(Module):
    """A graph, its tensors and its kernels, ready to run. Create with :func:`create`.

    Inputs are named or indexed in ``arg_nodes`` order; outputs are the graph's ``heads``.
    ``get_output``/``get_input`` return views of the executor's own memory (the next
    ``run``/``set_input`` changes them); pass ``out=`` or call ``.numpy()`` to keep a copy.
    One thread at a time: concurrent use raises ConcurrentUseError (``executor_guard``).
    """

    type_key = "GraphExecutor"
    # The packed functions of the Module interface (``m["run"]()``).
    _EXPORTED: tuple[str, ...] = (
        "set_input", "run", "get_output", "get_input", "get_num_outputs", "get_num_inputs",
        "get_input_index", "get_input_info", "get_output_info", "load_params", "share_params",
        "run_from_inputs")

    def __init__(self, graph: Graph | str, lib: Module, dev: Device | Sequence[Device]
                 | None = None, *, _like: GraphExecutor | None = None) -> None:
        super().__init__()
        self.graph = graph if isinstance(graph, Graph) else parse_graph(graph)
        self.lib = lib
        self.device = one_device(dev, "graph executor")
        self._guard = UseGuard("graph executor")
        g = self.graph
        self._input_eids = [g.entry_id(nid) for nid in g.arg_nodes]
        self._inputs = Inputs([InputSpec(name, g.dltype[eid], g.shape[eid])
                               for name, eid in zip(g.input_names, self._input_eids)])
        self._output_eids = [g.entry_id(h) for h in g.heads]
        self._param_names: set[str] = set()
        shared: dict[int, NDArray] = {}
        if _like is not None:  # a clone: the same kernels and the same params' memory
            self._param_names = set(_like._param_names)
            shared = {eid: _like._entries[eid] for name, eid in
                      zip(g.input_names, self._input_eids) if name in self._param_names}
        self._entries = self._allocate(shared)
        for eid, arr in shared.items():  # a param whose storage id holds more: a copy
            if self._entries[eid] is not arr:
                np.copyto(self._entries[eid]._np, arr._np)
        self._funcs = _like._funcs if _like is not None else self._resolve()
        if _like is None:
            self._load_linked_params()
        self._plan: list[tuple[Callable[[], int], int]] = []
        self._build_plan()

    def clone(self) -> GraphExecutor:
        """An executor of the same graph and kernels that shares this one's params (their
        memory, not a copy) and owns every other buffer: it runs at the same time as this
        one, from another thread. Inputs that are not params start unset (zeros)."""
        return GraphExecutor(self.graph, self.lib, self.device, _like=self)

    # -- setting up -------------------------------------------------------------------------
    def _allocate(self, shared: Mapping[int, NDArray]) -> list[NDArray]:
        """One 64-byte aligned buffer per storage id (``Graph.storage_bytes``; all of them in
        one block on huge pages, :func:`_carve`), and a view into it per entry, at the entry's
        offset; an entry of ``shared`` whose storage id holds nothing else (ember's planner
        never reuses a param's storage) is taken as it is."""
        g = self.graph
        users: dict[int, int] = {}
        for sid in g.storage_id:
            users[sid] = users.get(sid, 0) + 1
        shared = {e: a for e, a in shared.items() if users[g.storage_id[e]] == 1}
        owned = {sid for eid, sid in enumerate(g.storage_id) if eid not in shared}
        pools = _carve({sid: size for sid, size in g.storage_bytes().items() if sid in owned})
        return [shared[eid] if eid in shared else
                _view(pools[sid], g.shape[eid], g.dltype[eid], self.device, g.offset(eid))
                for eid, sid in enumerate(g.storage_id)]

    def _load_linked_params(self) -> None:
        """Params linked into the library (``Executor("graph", {"link-params": True})``):
        its ``_lookup_linked_param(name, tensor)`` copies each into its entry."""
        try:
            lookup = self.lib.get_function("_lookup_linked_param", query_imports=True)
        except AttributeError:
            return
        g = self.graph
        for name, eid in zip(g.input_names, self._input_eids, strict=True):
            if lookup(name, self._entries[eid]):
                self._param_names.add(name)

    def _resolve(self) -> dict[int, PackedFunc]:
        """Each kernel node's function, looked up once; a missing one fails here, not in run."""
        funcs: dict[int, PackedFunc] = {}
        for i, node in enumerate(self.graph.nodes):
            if node.is_input or node.func_name == NOP:
                continue
            try:
                funcs[i] = self.lib.get_function(node.func_name, query_imports=True)
            except AttributeError:
                raise TVMError(f"graph executor: nodes[{i}] ({node.name!r}) calls "
                               f"{node.func_name!r}, which is not in {self.lib!r} or its "
                               "imports") from None
        return funcs

    def _build_plan(self) -> None:
        """(call, node id) per kernel node; rebuilt when an entry's array changes."""
        g, plan, keep, written = self.graph, [], [], set()
        for i, func in self._funcs.items():
            node = g.nodes[i]
            args = [self._entries[g.entry_id(e)] for e in node.inputs]
            args += [self._entries[g.entry_id(i, k)] for k in range(node.num_outputs)]
            if node.flatten_data:
                args = [_flat(a) for a in args]
            make = _c_call if isinstance(func, CPackedFunc) else _py_call
            plan.append((make(func, args), i))  # type: ignore[arg-type]
            keep.append(args)
            written.update(a._dl_addr for a in args[len(args) - node.num_outputs:])
        self._plan = plan
        self._keep = keep  # the packed arrays hold these NDArrays' addresses: keep them alive
        # Every kernel compiled: the whole loop is one C call (EmberRunCalls).
        funcs = list(self._funcs.values())
        compiled = all(isinstance(f, CPackedFunc) for f in funcs)
        self._run_all = (c_plan(funcs, [c for c, _ in plan], frozenset(written))  # type: ignore
                         if compiled else None)

    # -- running ----------------------------------------------------------------------------
    @guarded("run")
    def run(self, **inputs: Any) -> None:
        """Run every node in order (after ``set_input(**inputs)`` if inputs are given)."""
        if inputs:
            self.set_input(**inputs)
        self._execute()

    def c_plan(self) -> CPlan | None:
        """The run as one CPlan (every kernel compiled, the library has EmberRunCalls), for
        a one-C-call model run (``execution_pool``); None otherwise."""
        return self._run_all

    def _execute(self) -> None:
        """The run loop: one packed call per kernel node, nothing allocated."""
        if self._run_all is not None:
            failed = self._run_all()
            if failed:
                nid = self._plan[-1 - failed][1]
                try:
                    self._kernel_failed(nid)
                except Exception as err:
                    add_note(err, f"while running graph node nodes[{nid}] "
                                  f"({self.graph.nodes[nid].name!r})")
                    raise
            return
        try:
            for call, nid in self._plan:
                if call():
                    self._kernel_failed(nid)
        except Exception as err:
            add_note(err, f"while running graph node nodes[{nid}] "
                         f"({self.graph.nodes[nid].name!r})")
            raise

    def _kernel_failed(self, nid: int) -> None:
        func = self._funcs[nid]
        raise_error(func._take_error, func.name)  # type: ignore[attr-defined]

    @guarded("call")
    def run_from_inputs(self, *args: Any) -> list[NDArray]:
        """``(device_type, device_id, name0, value0, ...)``: set the inputs, run, and return
        copies of the outputs (what ``benchmark(end_to_end=True)`` times)."""
        self._set(pairs_to_dict(args, "run_from_inputs"), "run_from_inputs")
        self._execute()
        return [self._entries[eid].copyto(self.device) for eid in self._output_eids]

    # -- inputs -----------------------------------------------------------------------------
    @guarded("write")
    def set_input(self, key: str | int | None = None, value: Any = None, **params: Any) -> None:
        """Copy ``value`` into input ``key`` (a name or index), and each ``name=value`` of
        ``params``. Conversion rules: ``executor_common`` (exact dtype for arrays, lossless
        for Python numbers and lists, exact shape). The whole call is checked before any
        input changes."""
        self._copy_checked(self._inputs.check_call(key, value, params, "set_input"))

    def _set(self, params: Mapping[str, Any], where: str) -> None:
        self._copy_checked(self._inputs.check_call(None, None, params, where))

    def _copy_checked(self, checked: list[tuple[int, Any]]) -> None:
        for k, src in checked:
            np.copyto(self._entries[self._input_eids[k]]._np, src)
            self._guard.wrote(k)

    @guarded("call")
    def get_input(self, key: str | int, out: NDArray | None = None) -> NDArray:
        """The input ``key`` (a view of the executor's memory), or a copy into ``out``."""
        arr = self._entries[self._input_eids[self._inputs.slot(key, "get_input")]]
        return arr if out is None else check_out(out, arr, "get_input").copyfrom(arr)

    def get_input_index(self, name: str) -> int:
        """The index of the input ``name``, or -1 if there is none (as in the Relay-era API)."""
        return self._inputs.index.get(check_name(name, "get_input_index"), -1)

    def get_num_inputs(self) -> int:
        """The number of graph inputs, params included."""
        return len(self._input_eids)

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """``(shapes, dtypes)`` by name of the inputs that are not loaded params."""
        g, shapes, dtypes = self.graph, {}, {}
        for name, eid in zip(g.input_names, self._input_eids):
            if name not in self._param_names:
                shapes[name], dtypes[name] = g.shape[eid], g.dltype[eid]
        return shapes, dtypes

    # -- outputs ----------------------------------------------------------------------------
    def get_num_outputs(self) -> int:
        return len(self._output_eids)

    @guarded("read")
    def get_output(self, index: int, out: NDArray | None = None) -> NDArray:
        """Output ``index`` (a view of the executor's memory), or a copy into ``out``."""
        index = check_output_index(index, len(self._output_eids))
        arr = self._entries[self._output_eids[index]]
        return arr if out is None else check_out(out, arr, "get_output").copyfrom(arr)

    def get_output_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """``(shapes, dtypes)`` keyed ``output_<i>``."""
        g = self.graph
        return ({f"output_{k}": g.shape[e] for k, e in enumerate(self._output_eids)},
                {f"output_{k}": g.dltype[e] for k, e in enumerate(self._output_eids)})

    # -- params -----------------------------------------------------------------------------
    @guarded("write")
    def load_params(self, params: bytes | bytearray | Mapping[str, Any]) -> None:
        """Set inputs from the params byte format (``save_param_dict``), or from a dict; every
        entry is checked before any input changes."""
        if isinstance(params, (bytes, bytearray, memoryview)):
            params = load_param_dict(params)
        if not isinstance(params, Mapping):
            raise ArgumentTypeError(f"load_params: expected a dict of arrays or the params "
                                    f"bytes, got {type(params).__name__}")
        self._set(params, "load_params")
        self._param_names.update(params)

    @guarded("write")
    def share_params(self, other: GraphExecutor | GraphModule, params: bytes | bytearray) -> None:
        """Make the inputs named in ``params`` use ``other``'s memory (no copy): executors of
        one model can then share their weights. Checked whole before anything changes."""
        if isinstance(other, GraphModule):
            other = other.module  # type: ignore[assignment]
        if not isinstance(other, GraphExecutor):
            raise ArgumentTypeError(f"share_params: expected a graph executor, got "
                                    f"{type(other).__name__}")
        if not isinstance(params, (bytes, bytearray, memoryview)):
            raise ArgumentTypeError(f"share_params: expected the params bytes, got "
                                    f"{type(params).__name__}")
        shared = []
        for name in load_param_dict(params):
            mine = self._input_eids[self._inputs.slot(name, "share_params")]
            theirs = other._entries[other._input_eids[other._inputs.slot(name, "share_params")]]
            want = self._entries[mine]
            if (theirs.dtype, theirs.shape) != (want.dtype, want.shape):
                raise GraphInputError(f"share_params({name!r}): expected "
                                      f"{type_str(want.dtype, want.shape)}, the other executor "
                                      f"has {type_str(theirs.dtype, theirs.shape)}")
            shared.append((mine, theirs, name))
        for mine, theirs, name in shared:
            self._entries[mine] = theirs
            self._param_names.add(name)
        self._build_plan()

    # -- timing -----------------------------------------------------------------------------
    @guarded("call")
    def benchmark(self, device: Device | None = None, func_name: str = "run", repeat: int = 5,
                  number: int = 5, min_repeat_ms: int | None = None, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1,
                  **inputs: Any) -> BenchmarkResult:
        """Time ``func_name`` (default: a whole ``run``): ``repeat`` measurements of ``number``
        calls each. With ``end_to_end``, each call also copies ``inputs`` in and the outputs
        out. Returns a BenchmarkResult (seconds; ``str()`` prints a table in ms)."""
        check_timing(number, repeat, min_repeat_ms, "benchmark")
        if device is not None:
            one_device(device, "benchmark")
        if func_name != "run" and not end_to_end:
            self.get_function(check_name(func_name, "benchmark"))
        if end_to_end:
            self._inputs.check_call(None, None, inputs, "benchmark")
            args: list[Any] = [0, 0]
            for name, value in inputs.items():
                args += [name, value]
            func: Callable[..., Any] = self.run_from_inputs
        else:
            self._set(inputs, "benchmark")
            # "run" is the plain run loop, also for the debug executor whose run() profiles.
            func, args = (self._execute if func_name == "run" else
                          self.get_function(func_name)), []
        timer = time_evaluator(func, device or self.device, number, repeat, min_repeat_ms or 0,
                               cooldown_interval_ms, repeats_to_cooldown)
        return timer(*args)

    # -- Module -----------------------------------------------------------------------------
    def _get_local(self, name: str) -> PackedFunc | None:
        if name in self._EXPORTED:
            return as_packed_func(getattr(self, name), name)
        return None

    def __repr__(self) -> str:
        return (f"Module(GraphExecutor, {len(self.graph.nodes)} nodes, "
                f"{self.get_num_inputs()} inputs, {self.get_num_outputs()} outputs)")


def pairs_to_dict(args: Sequence[Any], where: str) -> dict[Any, Any]:
    """``(device_type, device_id, key0, value0, ...)`` as ``{key: value}`` (keys are input
    names or indices; a repeated key is an error, as for ``set_input``)."""
    pairs = args[2:]
    if len(args) < 2 or len(pairs) % 2:
        raise ArgumentError(f"{where}: expected (device_type, device_id, name0, value0, ...), "
                            f"got {len(args)} arguments")
    out: dict[Any, Any] = {}
    for k in range(0, len(pairs), 2):
        key = pairs[k]
        if not isinstance(key, (str, int, np.integer)):
            raise ArgumentTypeError(f"{where}: inputs are named by str or int, got "
                                    f"{type(key).__name__}")
        if key in out:
            raise ArgumentError(f"{where}: input {key!r} given twice")
        out[key] = pairs[k + 1]
    return out


def create(graph_json_str: str | Graph, libmod: Module, device: Device | Sequence[Device]
           | None = None) -> GraphExecutor:
    """A GraphExecutor for ``graph_json_str`` with kernels from ``libmod``, on ``device``.

    Raises GraphFormatError for a malformed graph and TVMError when a kernel is missing. With
    a library loaded on an RPC server, the executor is created and runs on that server.
    """
    if not isinstance(libmod, Module):
        raise ArgumentTypeError(f"graph_executor.create: lib must be a Module, got "
                                f"{type(libmod).__name__}")
    session = getattr(libmod, "rpc_session", None)
    if session is not None:
        graph = graph_json_str if isinstance(graph_json_str, str) else graph_json_str.to_json()
        dev = device[0] if isinstance(device, (list, tuple)) else device
        create_remote = session.get_function("tvm.graph_executor.create")
        return create_remote(graph, libmod, dev)  # type: ignore[no-any-return]
    return GraphExecutor(graph_json_str, libmod, device)


class GraphModule(ExecutorWrapper):
    """The user-facing wrapper of a graph executor module: ``GraphModule(factory["default"]
    (dev))``. Its methods are those of :class:`GraphExecutor` (``set_input``, ``run``,
    ``get_output``, ``benchmark``, ...); ``module`` is the wrapped Module."""

    executor_type = GraphExecutor
    kind = "a graph executor"
