"""What a client holds of the server's objects: arrays, functions and modules, by handle.

Each object keeps its session and the handle the server gave it; when the object dies its
handle is queued and released with the session's next request (a FREE frame), never from the
garbage collector directly. Arrays move between machines only when asked: ``numpy()``,
``copyfrom``, ``copyto``, or ``ember.nd.array(x, device=remote_dev)``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import RPC_SESS_MASK, Device
from ..dtype import DataType
from ..errors import RPCError
from ..module import Module
from ..ndarray import NDArray, _parse_dtype
from ..packed_func import PackedFunc
from ..time_eval import BenchmarkResult
from .codec import byte_view

if TYPE_CHECKING:
    from .client import RPCSession


def _release(obj: Any, session_attr: str) -> None:
    """Queue the handle of a dying remote object (objects that failed to construct have none)."""
    session, handle = getattr(obj, session_attr, None), getattr(obj, "_handle", None)
    if session is not None and handle is not None:
        session._free_later(handle)


class RemoteNDArray:
    """An array on an RPC server. ``numpy()`` copies it back; ``copyfrom`` copies into it.

    Made by ``ember.nd.array(x, device=session.cpu(0))``, ``ember.nd.empty(..., device=...)``
    or returned by remote functions (``get_output``). ``str(arr.device)`` starts with
    ``remote``.
    """

    __slots__ = ("__weakref__", "_device", "_dtype", "_handle", "_session", "_shape")

    def __init__(self, session: RPCSession, handle: int, dtype: str, shape: tuple[int, ...],
                 device: Device) -> None:
        self._session = session
        self._handle = handle
        self._dtype = DataType(dtype)
        self._shape = tuple(shape)
        self._device = device

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> str:
        return str(self._dtype)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def handle(self) -> int:
        """The server's handle of this array."""
        return self._handle

    @property
    def nbytes(self) -> int:
        dt, scalar = _parse_dtype(self.dtype)
        return int(np.prod(self._shape, dtype=np.int64)) * scalar.itemsize * dt.lanes

    def _full_shape(self) -> tuple[int, ...]:
        lanes = self._dtype.lanes
        return self._shape if lanes == 1 else self._shape + (lanes,)

    def numpy(self) -> np.ndarray:
        """A local copy of the contents (one or more ARRAY_READ requests)."""
        scalar = _parse_dtype(self.dtype)[1]
        data = self._session._read_array(self._handle, self.nbytes)
        out = np.frombuffer(data, dtype=scalar).reshape(self._full_shape())
        return out if out.flags.writeable else out.copy()

    asnumpy = numpy

    def copyfrom(self, source: Any) -> RemoteNDArray:
        """Copy ``source`` (numpy array, NDArray, RemoteNDArray, nested lists) into this
        array. The shapes must match; values are converted to this array's dtype."""
        if isinstance(source, RemoteNDArray) and source._session is self._session:
            self._session.get_function("ember.rpc.array_copy")(self, source)
            return self
        src = np.asarray(source.numpy() if isinstance(source, RemoteNDArray) else source)
        if src.shape != self._full_shape():
            raise ValueError(f"copyfrom: shape mismatch: array has shape {self._shape}, source "
                             f"has shape {src.shape}")
        if src.dtype.kind not in "biuf":
            raise TypeError(f"copyfrom: cannot convert {src.dtype} values to {self.dtype}")
        scalar = _parse_dtype(self.dtype)[1]
        data = np.ascontiguousarray(src, dtype=scalar)
        self._session._write_array(self._handle, byte_view(data))
        return self

    def copyto(self, target: Device | NDArray | RemoteNDArray) -> Any:
        """Copy into ``target`` (returned), or into a new array on ``target`` if a Device."""
        if isinstance(target, Device):
            from ..ndarray import empty

            return empty(self._shape, self.dtype, target).copyfrom(self)
        if isinstance(target, (NDArray, RemoteNDArray)):
            return target.copyfrom(self)
        raise TypeError(f"copyto: expected an NDArray or a Device, got {type(target).__name__}")

    def __setitem__(self, key: Any, value: Any) -> None:
        if not (isinstance(key, slice) and key == slice(None)) and key is not Ellipsis:
            raise ValueError("NDArray only supports whole-array assignment: arr[:] = value")
        if np.ndim(value) == 0 and not isinstance(value, (NDArray, RemoteNDArray)):
            value = np.full(self._full_shape(), value)
        self.copyfrom(value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<ember.NDArray shape={self._shape}, {self._device}, handle {self._handle}>"

    def __str__(self) -> str:
        return str(self.numpy())

    def __reduce__(self) -> Any:
        raise TypeError("a remote array cannot be pickled; copy it with .numpy() first")

    def __del__(self) -> None:
        _release(self, "_session")


class RemoteFunction(PackedFunc):
    """A function on an RPC server; calling it sends a CALL and waits for the result."""

    __slots__ = ("_handle", "_session")

    def __init__(self, session: RPCSession, handle: int, name: str) -> None:
        super().__init__(None, name)
        self._session = session
        self._handle = handle

    def __call__(self, *args: Any) -> Any:
        return self._session._call(self._handle, args, self.name)

    def __repr__(self) -> str:
        return f"PackedFunc({self.name}, remote {self._session.peer})"

    def __del__(self) -> None:
        _release(self, "_session")


class RemoteModule(Module):
    """A module on an RPC server (``session.load_module``, or returned by a remote function).

    ``mod["f"]``/``get_function`` give RemoteFunctions; ``time_evaluator`` times on the server.
    """

    type_key = "rpc"

    def __init__(self, session: RPCSession, handle: int, remote_type: str) -> None:
        super().__init__()
        self.rpc_session = session
        self._handle = handle
        self.remote_type = remote_type
        self._remote_funcs: dict[tuple[str, bool], PackedFunc | None] = {}

    def _find(self, name: str, query_imports: bool) -> PackedFunc | None:
        key = (name, query_imports)
        if key not in self._remote_funcs:
            try:
                self._remote_funcs[key] = self.rpc_session._get_function(self._handle, name,
                                                                         query_imports)
            except AttributeError:
                self._remote_funcs[key] = None
        return self._remote_funcs[key]

    def get_function(self, name: str, query_imports: bool = False) -> PackedFunc:
        func = self._find(name, query_imports)
        if func is None:
            raise AttributeError(f"{self!r} has no function named {name!r}")
        return func

    def import_module(self, module: Module) -> None:
        raise RPCError(f"{self!r}: cannot import modules into a remote module")

    def export_library(self, *args: Any, **kwargs: Any) -> None:
        raise RPCError(f"{self!r}: a remote module cannot be exported; export the module it was "
                       "built from, then upload the file")

    def save(self, file_name: str, fmt: str = "") -> None:
        raise RPCError(f"{self!r}: a remote module cannot be saved locally")

    def time_evaluator(self, func_name: str, dev: Any, number: int = 10, repeat: int = 1,
                       min_repeat_ms: int = 0, cooldown_interval_ms: int = 0,
                       repeats_to_cooldown: int = 1, f_preproc: str = "",
                       ) -> Callable[..., BenchmarkResult]:
        """A function ``f(*args) -> BenchmarkResult`` that times ``func_name`` on the server
        (so the figures exclude the network), with the arguments given to ``f``."""
        func = self.get_function(func_name, query_imports=True)
        evaluate = self.rpc_session.get_function("ember.rpc.time_evaluate")

        def timed(*args: Any) -> BenchmarkResult:
            return BenchmarkResult(evaluate(func, dev, number, repeat, min_repeat_ms,
                                            cooldown_interval_ms, repeats_to_cooldown, *args))

        return timed

    def __repr__(self) -> str:
        return f"Module(rpc, {self.remote_type} on {self.rpc_session.peer}, handle {self._handle})"

    def __del__(self) -> None:
        _release(self, "rpc_session")


class RemoteExecutor(RemoteModule):
    """A remote graph, AOT or VM-factory executor: the module-based interface with the
    keyword forms (``set_input(**inputs)``, ``run(**inputs)``) done on the client, so that
    ``GraphModule``/``AotModule`` wrap it as they wrap a local executor."""

    def set_input(self, key: str | int | None = None, value: Any = None, **params: Any) -> None:
        """Copy ``value`` into input ``key`` on the server (and each ``name=value``)."""
        func = self.get_function("set_input")
        if key is not None:
            func(key, value)
        for name, val in params.items():
            func(name, val)

    def run(self, **inputs: Any) -> None:
        if inputs:
            self.set_input(**inputs)
        self.get_function("run")()

    def get_output(self, index: int, out: Any = None) -> Any:
        """Output ``index`` (a RemoteNDArray), or copied into ``out``."""
        arr = self.get_function("get_output")(index)
        return arr if out is None else out.copyfrom(arr)

    def get_input(self, key: str | int, out: Any = None) -> Any:
        arr = self.get_function("get_input")(key)
        return arr if out is None else out.copyfrom(arr)

    def benchmark(self, device: Device, func_name: str = "run", repeat: int = 5, number: int = 5,
                  min_repeat_ms: int | None = None, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1,
                  **inputs: Any) -> BenchmarkResult:
        """Time ``func_name`` on the server (``end_to_end``: with inputs copied in and
        outputs out on the server, through ``run_from_inputs``)."""
        args: list[Any] = []
        if end_to_end:
            func_name = "run_from_inputs"
            args = [device.device_type % RPC_SESS_MASK, device.device_id]
            args += [x for kv in inputs.items() for x in kv]
        else:
            self.set_input(**inputs)
        timer = self.time_evaluator(func_name, device, number, repeat, min_repeat_ms or 0,
                                    cooldown_interval_ms, repeats_to_cooldown)
        return timer(*args)

    def __getattr__(self, name: str) -> Any:
        # Any other method of the interface (get_num_outputs, get_input_index...) is a
        # remote function of the same name.
        if name.startswith("_") or name in ("rpc_session", "remote_type"):
            raise AttributeError(name)
        try:
            return self.get_function(name)
        except AttributeError:
            raise AttributeError(f"{self!r} has no attribute or remote function {name!r}") \
                from None
