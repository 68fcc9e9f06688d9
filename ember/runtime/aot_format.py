"""The AOT executor's artifact format: the unified model metadata, its JSON form and version.

This module is the one contract between the compile side (``relay/backend/aot/``, which
fills a :class:`ModelMetadata` and writes it three ways: this JSON, a C struct and macros in
``tvmgen_<mod>.h``) and the run side (``runtime/aot_executor.py``, which reads it back with
:func:`parse_metadata`). The structure is that of RFC 0046 ("Compiler <-> Runtime Metadata"),
plus what ember's executor needs to call the compiled code::

    {"version": 1, "module_name": "my_mod", "prefix": "tvmgen_my_mod",
     "interface_api": "packed", "unpacked_api": false, "link_params": false,
     "operator_calling_convention": "cpacked",
     "workspace_alignment": 16, "constant_alignment": 16,
     "functions": [{"function_name": "tvmgen_my_mod_run_model",
                    "params": [{"relay_name_hint": "a", "tir_name_hint": "a",
                                "shape": [1, 2], "dtype": "uint8"}, ...],   # inputs, outputs
                    "num_inputs": 2, "num_outputs": 1, "workspace_size_bytes": 0,
                    "io_size_bytes": 6, "constant_size_bytes": 0}],
     "constants": [{"name": "p0", "shape": [4], "dtype": "float32", "offset": 0}],
     "operators": [{"function_name": "tvmgen_my_mod_fused_add", "workspace_size_bytes": 0}],
     "memory": {"planned_bytes": 0, "lower_bound": 0, "total_bytes": 0}}

Symbols of the compiled library (``<prefix>`` is ``tvmgen_<module name as a C identifier>``):
``<prefix>_run_model(inputs..., outputs..., [constants], [workspace])`` (plain pointers),
``<prefix>_run`` (the entry: a PackedFunc taking DLTensors in the same order, the workspace
optional; or with ``interface_api == "c"`` ``int32_t <prefix>_run(struct <prefix>_inputs*,
struct <prefix>_outputs*)``), ``<prefix>_set_constants(pool, nbytes)`` (C interface without
linked params) and ``<prefix>_get_metadata`` (a PackedFunc returning this JSON).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from . import json_reader
from .errors import ArtifactError

METADATA_VERSION = 1
INTERFACES = ("packed", "c")
CONVENTIONS = ("packed", "cpacked", "unpacked")


class MetadataError(ArtifactError, ValueError):
    """Malformed AOT metadata: 'aot metadata: <path>: <what is wrong>'."""


@dataclass(frozen=True)
class ParameterInfo:
    """One argument of ``run_model``: Relay name, C name, static shape, dtype."""

    relay_name_hint: str
    tir_name_hint: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return _nbytes(self.shape, self.dtype)


@dataclass(frozen=True)
class FunctionInfo:
    """A generated executor function: its parameters (inputs, then outputs) and sizes."""

    function_name: str
    params: tuple[ParameterInfo, ...]
    num_inputs: int
    num_outputs: int
    workspace_size_bytes: int
    io_size_bytes: int
    constant_size_bytes: int

    @property
    def inputs(self) -> tuple[ParameterInfo, ...]:
        return self.params[:self.num_inputs]

    @property
    def outputs(self) -> tuple[ParameterInfo, ...]:
        return self.params[self.num_inputs:]


@dataclass(frozen=True)
class ConstantInfo:
    """A constant of the model; ``offset`` is its byte offset in the constant pool."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int

    @property
    def nbytes(self) -> int:
        return _nbytes(self.shape, self.dtype)


@dataclass(frozen=True)
class ModelMetadata:
    """Everything the run side needs to know about an AOT-compiled model (see module doc)."""

    module_name: str
    prefix: str
    functions: tuple[FunctionInfo, ...]
    interface_api: str = "packed"
    unpacked_api: bool = False
    link_params: bool = False
    operator_calling_convention: str = "cpacked"
    workspace_alignment: int = 16
    constant_alignment: int = 16
    constants: tuple[ConstantInfo, ...] = ()
    operators: tuple[dict[str, Any], ...] = ()
    memory: dict[str, int] = field(default_factory=dict)
    version: int = METADATA_VERSION
    # USMP: per workspace pool {pool_name, size_hint_bytes, planned_bytes, lower_bound};
    # empty without USMP. run_model takes one pointer per pool after its other parameters.
    pools: tuple[dict[str, Any], ...] = ()
    use_workspace_io: bool = False

    @property
    def main(self) -> FunctionInfo:
        """The ``run_model`` function (the first and, for now, only one)."""
        return self.functions[0]

    @property
    def constant_pool_bytes(self) -> int:
        """Bytes of the constant pool passed at run time (0 with linked params)."""
        if self.link_params or not self.constants:
            return 0
        return max(c.offset + c.nbytes for c in self.constants)

    @property
    def needs_constant_pool(self) -> bool:
        return not self.link_params and bool(self.constants)

    def symbol(self, what: str) -> str:
        """The C symbol ``<prefix>_<what>`` (``run``, ``run_model``, ``get_metadata``...)."""
        return f"{self.prefix}_{what}"

    def to_json(self) -> str:
        """The JSON text (keys in a fixed order; same metadata, same text)."""
        return json.dumps(asdict(self), separators=(",", ":"))


def c_prefix(mod_name: str) -> str:
    """``tvmgen_<mod_name>`` as a C identifier (what every generated symbol starts with)."""
    text = f"tvmgen_{mod_name}" if mod_name else "tvmgen"
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in text)


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    from .dtype import DataType

    dt = DataType(dtype)
    count = 1
    for d in shape:
        count *= d
    return int(count * ((dt.bits * dt.lanes + 7) // 8))


# -- parsing with validation ---------------------------------------------------------------------
def _fail(path: str, what: str) -> MetadataError:
    return MetadataError(f"aot metadata: {path}: {what}")


def _get(obj: Any, key: str, kind: type | tuple[type, ...], path: str) -> Any:
    if not isinstance(obj, dict):
        raise _fail(path, f"expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise _fail(f"{path}.{key}" if path else key, "missing")
    value = obj[key]
    bad_bool = isinstance(value, bool) and kind in (int, (int,))
    if not isinstance(value, kind) or bad_bool:
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _fail(f"{path}.{key}" if path else key,
                    f"expected {name}, got {type(value).__name__} {value!r}")
    return value


def _shape(obj: Any, path: str) -> tuple[int, ...]:
    shape = _get(obj, "shape", list, path)
    for i, d in enumerate(shape):
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise _fail(f"{path}.shape[{i}]", f"expected a non-negative int, got {d!r}")
    return tuple(shape)


def _dtype(obj: Any, path: str) -> str:
    from .dtype import DataType

    text = _get(obj, "dtype", str, path)
    try:
        DataType(text)
    except (ValueError, TypeError) as err:
        raise _fail(f"{path}.dtype", f"not a dtype: {err}") from None
    return str(text)


def _param(obj: Any, path: str) -> ParameterInfo:
    return ParameterInfo(_get(obj, "relay_name_hint", str, path),
                         _get(obj, "tir_name_hint", str, path), _shape(obj, path),
                         _dtype(obj, path))


def _size(obj: Any, key: str, path: str) -> int:
    value = _get(obj, key, int, path)
    if value < 0:
        raise _fail(f"{path}.{key}", f"must be >= 0, got {value}")
    return int(value)


def _function(obj: Any, path: str) -> FunctionInfo:
    params = tuple(_param(p, f"{path}.params[{i}]")
                   for i, p in enumerate(_get(obj, "params", list, path)))
    n_in, n_out = _size(obj, "num_inputs", path), _size(obj, "num_outputs", path)
    if n_in + n_out != len(params):
        raise _fail(f"{path}.params", f"{len(params)} parameters, but num_inputs + num_outputs "
                    f"= {n_in} + {n_out}")
    if n_out == 0:
        raise _fail(f"{path}.num_outputs", "a model has at least one output")
    return FunctionInfo(_get(obj, "function_name", str, path), params, n_in, n_out,
                        _size(obj, "workspace_size_bytes", path),
                        _size(obj, "io_size_bytes", path), _size(obj, "constant_size_bytes", path))


def _choice(obj: Any, key: str, choices: tuple[str, ...]) -> str:
    value = _get(obj, key, str, "")
    if value not in choices:
        raise _fail(key, f"must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return str(value)


def metadata_from_dict(obj: Any) -> ModelMetadata:
    """A ModelMetadata from its JSON object; MetadataError naming the path of a bad field."""
    version = _get(obj, "version", int, "")
    if version != METADATA_VERSION:
        raise _fail("version", f"format version {version}; this runtime reads version "
                    f"{METADATA_VERSION}")
    functions = tuple(_function(f, f"functions[{i}]")
                      for i, f in enumerate(_get(obj, "functions", list, "")))
    if not functions:
        raise _fail("functions", "empty; the model's run_model function is missing")
    constants = []
    for i, c in enumerate(_get(obj, "constants", list, "")):
        where = f"constants[{i}]"
        constants.append(ConstantInfo(_get(c, "name", str, where), _shape(c, where),
                                      _dtype(c, where), _get(c, "offset", int, where)))
    operators = tuple(_get(obj, "operators", list, ""))
    for i, op in enumerate(operators):
        _get(op, "function_name", str, f"operators[{i}]")
    memory = _get(obj, "memory", dict, "")
    return ModelMetadata(
        module_name=_get(obj, "module_name", str, ""), prefix=_get(obj, "prefix", str, ""),
        functions=functions, interface_api=_choice(obj, "interface_api", INTERFACES),
        unpacked_api=_get(obj, "unpacked_api", bool, ""),
        link_params=_get(obj, "link_params", bool, ""),
        operator_calling_convention=_choice(obj, "operator_calling_convention", CONVENTIONS),
        workspace_alignment=_size(obj, "workspace_alignment", ""),
        constant_alignment=_size(obj, "constant_alignment", ""),
        constants=tuple(constants), operators=operators,
        memory={str(k): _size(memory, k, "memory") for k in memory}, version=version,
        pools=tuple(_pool(p, f"pools[{i}]") for i, p in
                    enumerate(_get(obj, "pools", list, "") if "pools" in obj else [])),
        use_workspace_io=(_get(obj, "use_workspace_io", bool, "")
                          if "use_workspace_io" in obj else False))


def _pool(obj: Any, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {"pool_name": _get(obj, "pool_name", str, path)}
    for key in ("size_hint_bytes", "planned_bytes", "lower_bound"):
        out[key] = _get(obj, key, int, path)
    return out


def parse_metadata(text: str | bytes) -> ModelMetadata:
    """Parse and validate metadata JSON (see the module doc); MetadataError if malformed."""
    try:
        obj = json_reader.loads(text)
    except (ValueError, TypeError) as err:
        raise MetadataError(f"aot metadata: not valid JSON: {err}") from None
    return metadata_from_dict(obj)


__all__ = [
    "METADATA_VERSION",
    "ConstantInfo",
    "FunctionInfo",
    "MetadataError",
    "ModelMetadata",
    "ParameterInfo",
    "c_prefix",
    "metadata_from_dict",
    "parse_metadata",
]
