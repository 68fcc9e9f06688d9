"""Executor factory modules: what ``relay.build`` returns and ``load_module`` gives back.

A factory holds everything needed to create an executor: the executor description (for the
graph executor, the graph JSON), the kernel library (``lib``, imported by the factory) and the
params. ``factory[mod_name](dev)`` (or ``factory["default"](dev)``) creates the executor with
the params loaded; ``export_library`` writes one shared library holding the kernels plus the
factory, serialised into the embedded module blob, so that ``load_module`` returns the factory
with ``lib`` the loaded library, without any compiler module.

Serialised factory (``runtime.module.savebinary_<type_key>``), little-endian::

    magic     8 bytes   b"\\x89EMBEXF\\n"
    version   u32       FACTORY_FORMAT_VERSION (1)
    reserved  u32       0
    hlen      u64       length of the header
    header    hlen      UTF-8 JSON: {"executor": "graph", "mod_name": ..., "target": ...,
                        "config": <executor description>, "sections": [[name, length], ...]}
    sections            the bytes of each section in header order ("params": save_param_dict)

``ExecutorFactoryModule`` is the shared base (kind, mod_name, lib, params, serialisation);
an AOT or VM factory subclasses it with its own ``executor_kind`` and executor description.
"""
from __future__ import annotations

import json
import struct
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from . import json_reader
from .aot_format import ModelMetadata, c_prefix, parse_metadata
from .debug_executor import GraphExecutorDebug
from .device import Device
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ArtifactError,
    FunctionNotFoundError,
    TVMError,
)
from .graph_executor import GraphExecutor
from .graph_format import Graph, parse_graph
from .module import Module
from .ndarray import NDArray, array
from .packed_func import PackedFunc, as_packed_func
from .params import load_param_dict, save_param_dict
from .registry import register_func

FACTORY_MAGIC = b"\x89EMBEXF\n"
FACTORY_FORMAT_VERSION = 1
_HEAD = struct.Struct("<8sIIQ")
_KINDS: dict[str, type[ExecutorFactoryModule]] = {}


class ExecutorFactoryModule(Module):
    """Base of executor factories: ``executor_kind``, ``mod_name``, ``lib``, ``params``.

    Subclasses define ``executor_kind``, ``type_key``, ``get_executor_config`` (the executor
    description, a str), ``_create(dev)``, and register with :func:`register_factory`.
    """

    executor_kind: ClassVar[str] = ""

    def __init__(self, lib: Module | None, mod_name: str = "default",
                 params: Mapping[str, Any] | None = None, target: Any = None) -> None:
        super().__init__()
        if not isinstance(mod_name, str) or not mod_name:
            raise ArgumentTypeError(f"{type(self).__name__}: mod_name must be a non-empty str, "
                                    f"got {mod_name!r}")
        self.libmod_name = mod_name
        self.params = _param_arrays(params, type(self).__name__)
        self.target = target
        if lib is not None:  # a factory being loaded gets its library imported by the loader
            self.import_module(lib)

    # -- the common interface ---------------------------------------------------------------
    @property
    def lib(self) -> Module:
        if not self._imports:
            raise TVMError(f"{self!r} has no kernel library")
        return self._imports[0]

    def get_lib(self) -> Module:
        """The kernel library (a DSO module once loaded from an exported file)."""
        return self.lib

    def get_params(self) -> dict[str, NDArray]:
        """The params, by name (what ``factory[mod_name](dev)`` loads into the executor)."""
        return dict(self.params)

    def get_executor_config(self) -> str:
        raise NotImplementedError

    def list_module_names(self) -> list[str]:
        return [self.libmod_name]

    def get_devices(self) -> list[str]:
        """The devices of a heterogeneous build: none (ember builds for the host CPU)."""
        return []

    @property
    def module(self) -> "ExecutorFactoryModule":
        """The runtime module ``factory[name]`` indexes (the Relay-era factory wrapped one;
        ember's factory is that module itself)."""
        return self

    def _create(self, dev: Device) -> Module:
        raise NotImplementedError

    def create(self, dev: Device | Sequence[Device] | None = None) -> Module:
        """A new executor on ``dev`` with the params loaded."""
        return self._create(dev)  # type: ignore[arg-type]

    def get_function(self, name: str, query_imports: bool = False) -> PackedFunc:
        """As ``Module.get_function``; a missing name is reported with this factory's module
        name, as ``factory["wrong_name"]`` is the usual mistake."""
        try:
            return super().get_function(name, query_imports)
        except FunctionNotFoundError:
            raise FunctionNotFoundError(
                f"{self!r}: no module or function named {name!r}; this factory holds module "
                f"{self.libmod_name!r} (create its executor with factory[{self.libmod_name!r}]"
                "(dev))") from None

    def __iter__(self) -> Iterator[Any]:
        """The legacy ``graph, lib, params = relay.build(...)`` form (with the Relay-era
        DeprecationWarning; unlike there, a factory can be unpacked any number of times)."""
        warnings.warn("legacy graph executor behavior of producing json / lib / params: "
                      "prefer factory['default'](dev) with tvm.contrib.graph_executor."
                      "GraphModule (the recommended usage)", DeprecationWarning, stacklevel=2)
        return iter((self.get_executor_config(), self.lib, self.get_params()))

    def _functions(self) -> dict[str, Callable[..., Any]]:
        return {self.libmod_name: self.create, "default": self.create,
                "get_lib": self.get_lib, "get_params": self.get_params,
                "get_executor_config": self.get_executor_config,
                "list_module_names": self.list_module_names}

    def _get_local(self, name: str) -> PackedFunc | None:
        func = self._functions().get(name)
        return None if func is None else as_packed_func(func, name)

    # -- serialisation ----------------------------------------------------------------------
    def _header(self) -> dict[str, Any]:
        return {"executor": self.executor_kind, "mod_name": self.libmod_name,
                "target": None if self.target is None else str(self.target),
                "config": self.get_executor_config()}

    def _sections(self) -> list[tuple[str, bytes]]:
        """Named binary parts after the header (a VM factory would add its bytecode)."""
        return [("params", bytes(save_param_dict(self.params)))]

    def save_binary(self) -> bytes:
        """The factory in the serialised layout of the module docstring."""
        sections = self._sections()
        header = dict(self._header(), sections=[[n, len(b)] for n, b in sections])
        text = json.dumps(header).encode()
        return b"".join([_HEAD.pack(FACTORY_MAGIC, FACTORY_FORMAT_VERSION, 0, len(text)), text]
                        + [b for _, b in sections])

    @classmethod
    def _from_parts(cls, header: dict[str, Any], sections: dict[str, bytes]) -> Module:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Module({self.type_key}, {self.libmod_name!r})"


def _param_arrays(params: Any, who: str) -> dict[str, NDArray]:
    """A factory's params as NDArrays, each entry checked (name and array)."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise ArgumentTypeError(f"{who}: params must be a dict of arrays, got "
                                f"{type(params).__name__}")
    out: dict[str, NDArray] = {}
    for name, value in params.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{who}: params are named by str, got "
                                    f"{type(name).__name__} {name!r}")
        if isinstance(value, NDArray):
            out[name] = value
            continue
        try:
            out[name] = array(value)
        except (TypeError, ValueError) as err:
            raise ArgumentError(f"{who}: param {name!r}: {err}") from None
    return out


def _load_factory(data: bytes) -> Module:
    """Inverse of ``save_binary``: checks magic, version and every length first."""
    what = "executor factory"
    if len(data) < _HEAD.size:
        raise ArtifactError(f"{what}: truncated: {len(data)} bytes, the header needs "
                            f"{_HEAD.size}")
    magic, version, _, hlen = _HEAD.unpack_from(data)
    if magic != FACTORY_MAGIC:
        raise ArtifactError(f"{what}: bad magic {magic!r} (expected {FACTORY_MAGIC!r})")
    if version != FACTORY_FORMAT_VERSION:
        raise ArtifactError(f"{what}: format version {version}; this runtime reads version "
                            f"{FACTORY_FORMAT_VERSION}")
    if _HEAD.size + hlen > len(data):
        raise ArtifactError(f"{what}: truncated: header of {hlen} bytes, {len(data) - _HEAD.size}"
                            " left")
    try:
        header = json_reader.loads(data[_HEAD.size:_HEAD.size + hlen])
        layout = [(str(n), int(size)) for n, size in header["sections"]]
        kind = header["executor"]
    except (ValueError, KeyError, TypeError) as err:
        raise ArtifactError(f"{what}: corrupt header: {err}") from None
    cls = _KINDS.get(kind)
    if cls is None:
        raise ArtifactError(f"{what}: executor kind {kind!r} is not known to this runtime "
                            f"(known: {', '.join(sorted(_KINDS))})")
    pos, sections = _HEAD.size + hlen, {}
    for name, size in layout:
        if size < 0 or pos + size > len(data):
            raise ArtifactError(f"{what}: truncated: section {name!r} needs {size} bytes, "
                                f"{len(data) - pos} left")
        sections[name], pos = data[pos:pos + size], pos + size
    if pos != len(data):
        raise ArtifactError(f"{what}: {len(data) - pos} unexpected trailing bytes")
    try:
        return cls._from_parts(header, sections)
    except TVMError as err:  # a bad graph, metadata or params section: name the kind too
        raise ArtifactError(f"{what}: {kind} executor: {err}") from None
    except (KeyError, TypeError) as err:
        raise ArtifactError(f"{what}: corrupt header: missing or bad field {err}") from None
    except ValueError as err:  # e.g. a section that is not UTF-8
        raise ArtifactError(f"{what}: {kind} executor: corrupt section: {type(err).__name__}: "
                            f"{err}") from None


def register_factory(cls: type[ExecutorFactoryModule]) -> type[ExecutorFactoryModule]:
    """Class decorator: make ``cls`` savable into, and loadable from, exported libraries."""
    _KINDS[cls.executor_kind] = cls
    register_func(f"runtime.module.savebinary_{cls.type_key}", lambda m: m.save_binary(),
                  override=True)
    register_func(f"runtime.module.loadbinary_{cls.type_key}", _load_factory, override=True)
    return cls


@register_factory
class GraphExecutorFactoryModule(ExecutorFactoryModule):
    """The factory of graph executors: graph JSON + kernel library + params.

    ``GraphExecutorFactoryModule(graph_json, lib, libmod_name="default", params=None)``; the
    keyword arguments ``ir_mod``, ``target``, ``executor``, ``runtime`` and
    ``function_metadata`` are kept as attributes for later stages (Model Library Format), and
    only ``target`` (as a string) survives export. ``lib`` must be a C source module (or
    another DSO-exportable module) for ``export_library`` to work. Raises GraphFormatError if
    the graph JSON is malformed.
    """

    executor_kind = "graph"
    type_key = "GraphExecutorFactory"

    def __init__(self, graph_json: str | Graph, lib: Module | None,
                 libmod_name: str = "default", params: Mapping[str, Any] | None = None, *,
                 ir_mod: Any = None, target: Any = None, executor: Any = None,
                 runtime: Any = None, function_metadata: Any = None) -> None:
        super().__init__(lib, libmod_name, params, target)
        self.graph = graph_json if isinstance(graph_json, Graph) else parse_graph(graph_json)
        self.graph_json = graph_json if isinstance(graph_json, str) else self.graph.to_json()
        self.ir_mod = ir_mod
        self.executor = executor
        self.runtime = runtime
        self.function_metadata = function_metadata

    def get_graph_json(self) -> str:
        return self.graph_json

    get_executor_config = get_graph_json

    def get_graph_params(self) -> dict[str, NDArray]:
        """Alias of ``get_params``."""
        return self.get_params()

    def _create(self, dev: Any, debug: bool = False, dump_root: str | None = None) -> Module:
        ex: GraphExecutor = (GraphExecutorDebug(self.graph, self.lib, dev, dump_root) if debug else
              GraphExecutor(self.graph, self.lib, dev))
        if self.params:
            ex.load_params(self.params)
        return ex

    def debug_create(self, name: str = "default", dev: Any = None,
                     dump_root: str | None = None) -> Module:
        """A debug executor (its ``run`` times every node) for module ``name``."""
        if name not in (self.libmod_name, "default"):
            raise ArgumentError(f"debug_create: no module named {name!r}; this factory has "
                           f"{self.libmod_name!r}")
        return self._create(dev, debug=True, dump_root=dump_root)

    def remove_params(self) -> GraphExecutorFactoryModule:
        """A factory like this one without params (load them later with ``load_params``)."""
        return GraphExecutorFactoryModule(self.graph, self.lib, self.libmod_name, None,
                                          ir_mod=self.ir_mod, target=self.target,
                                          executor=self.executor, runtime=self.runtime,
                                          function_metadata=self.function_metadata)

    def _functions(self) -> dict[str, Callable[..., Any]]:
        return dict(super()._functions(), get_graph_json=self.get_graph_json,
                    get_graph_params=self.get_graph_params, remove_params=self.remove_params,
                    debug_create=self.debug_create)

    @classmethod
    def _from_parts(cls, header: dict[str, Any], sections: dict[str, bytes]) -> Module:
        params = load_param_dict(sections["params"]) if "params" in sections else {}
        return cls(header["config"], None, header["mod_name"], params, target=header["target"])


@register_factory
class AotExecutorFactoryModule(ExecutorFactoryModule):
    """The factory of AOT executors: the unified metadata + the compiled library + params.

    ``AotExecutorFactoryModule(metadata, lib, libmod_name, params)``: ``metadata`` is a
    ``ModelMetadata`` or its JSON (the executor config); ``params`` are the constants the
    executor loads into its constant pool (empty when they are linked into the library). The
    keyword arguments (``ir_mod``, ``target``, ``executor``, ``runtime``, ``header``: the
    generated ``tvmgen_<mod>.h``, ``sources``: ``{file name: C}`` of the library) are kept for
    later stages (Model Library Format); the header also survives export.
    """

    executor_kind = "aot"
    type_key = "AotExecutorFactory"

    def __init__(self, metadata: ModelMetadata | str, lib: Module | None,
                 libmod_name: str = "default", params: Mapping[str, Any] | None = None, *,
                 ir_mod: Any = None, target: Any = None, executor: Any = None,
                 runtime: Any = None, header: str = "",
                 sources: Mapping[str, str] | None = None) -> None:
        super().__init__(lib, libmod_name, params, target)
        self.metadata = (metadata if isinstance(metadata, ModelMetadata)
                         else parse_metadata(metadata))
        self.ir_mod, self.executor, self.runtime = ir_mod, executor, runtime
        self.header = header
        self.sources: Mapping[str, str] = sources or {}

    def get_executor_config(self) -> str:
        """The metadata as JSON (see ``ember.runtime.aot_format``)."""
        return self.metadata.to_json()

    def get_model_metadata(self) -> ModelMetadata:
        return self.metadata

    def import_module(self, module: Module) -> None:
        """Import ``module``; the first import is the kernel library, which then answers
        ``get_model_metadata`` for this model too (RFC 0046's ModelMetadataModule)."""
        super().import_module(module)
        if len(self._imports) == 1:
            module._note_model_prefix(c_prefix(self.libmod_name))

    def get_header(self) -> str:
        """The C interface header ``tvmgen_<mod>.h``."""
        return self.header

    def _create(self, dev: Any) -> Module:
        from .aot_executor import AotExecutor

        return AotExecutor(self.lib, dev, self.metadata, self.params)

    def _functions(self) -> dict[str, Callable[..., Any]]:
        return dict(super()._functions(), get_model_metadata=self.get_executor_config,
                    get_header=self.get_header)

    def _sections(self) -> list[tuple[str, bytes]]:
        return super()._sections() + [("header", self.header.encode())]

    @classmethod
    def _from_parts(cls, header: dict[str, Any], sections: dict[str, bytes]) -> Module:
        params = load_param_dict(sections["params"]) if "params" in sections else {}
        return cls(header["config"], None, header["mod_name"], params, target=header["target"],
                   header=sections.get("header", b"").decode())
