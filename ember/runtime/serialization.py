"""JSON save/load of registered object graphs (``save_json`` / ``load_json``).

Format (``attrs.format`` = "ember.json", ``format_version`` 1)::

    {
      "root": 3,                                   # index of the root node
      "nodes": [                                   # children always come before parents
        {"type_key": "relay.Var", "fields": {"name_hint": "x", "type_annotation": {"$node": 0}}},
        ...
      ],
      "b64ndarrays": ["iUVNQlROUwoB..."],          # base64 of ember.runtime.params records
      "attrs": {"ember_version": "0.1.0", "format": "ember.json", "format_version": 1}
    }

Every Object appears once in ``nodes`` however often it is referenced, so sharing (and the
identity of eq=False nodes) survives the round trip; NDArrays are likewise stored once.
Field values are JSON scalars (None, bool, int, finite float, str), JSON arrays for tuples,
or single-key tagged objects for everything else:

    {"$node": i}                Object at nodes[i]        {"$list": [...]}   list
    {"$dict": {...}}            dict with str keys        {"$items": [[k, v], ...]} other dicts
    {"$dtype": "float32x4"}     DataType                  {"$device": [1, 0]}  Device
    {"$ndarray": k}             NDArray b64ndarrays[k]    {"$numpy": k}      numpy array
    {"$np": ["float32", 1.5]}   numpy scalar              {"$float": "nan"}  nan/inf/-inf
    {"$enum": ["mod:Cls", "NAME"]}  Enum member           {"$bytes": "b64"}  bytes

Nodes are rebuilt with ``cls._from_json_state(fields)`` (see ``Object``): like pickle, without
calling ``__init__``. Enum classes are imported only from modules already loaded or inside
``ember``, so a JSON file cannot make ember import arbitrary modules.
"""
from __future__ import annotations

import base64
import binascii
import difflib
import enum
import importlib
import json
import math
import sys
from typing import Any

import numpy as np

from . import json_reader
from .container import as_object
from .device import Device
from .dtype import DataType
from .errors import ArgumentTypeError, ArtifactError
from .ndarray import NDArray
from .object import OBJECT_TYPES, Object, is_registered
from .params import deserialize_ndarray, serialize_ndarray

FORMAT = "ember.json"
FORMAT_VERSION = 1
# type_key prefix -> module that registers those types (imported on demand by load_json).
_TYPE_KEY_MODULES = {"relay": "ember.relay", "ir": "ember.ir", "tir": "ember.tir",
                     "te": "ember.te", "runtime": "ember.runtime", "IRModule": "ember.ir",
                     "DictAttrs": "ember.ir"}


def _version() -> str:
    pkg = sys.modules.get("ember")
    return str(getattr(pkg, "__version__", "unknown"))


class JSONFormatError(ArtifactError, ValueError):
    """A document ``load_json`` cannot read: 'load_json: nodes[3].fields.data: ...'."""


class _Encoder:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.node_ids: dict[int, int] = {}
        self.arrays: list[str] = []
        self.array_ids: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps encoded objects alive so their ids stay unique

    def add_graph(self, root: Object) -> int:
        """Append ``root`` and everything it references, children first (iteratively, so
        deep IR chains do not hit the recursion limit)."""
        stack: list[tuple[Object, dict[str, Any] | None]] = [(root, None)]
        on_path: set[int] = set()
        while stack:
            obj, state = stack[-1]
            if id(obj) in self.node_ids:
                stack.pop()
                continue
            if state is None:
                state = self._state_of(obj)
                stack[-1] = (obj, state)
                on_path.add(id(obj))
                pending = [c for c in _child_objects(state.values()) if id(c) not in self.node_ids]
                for child in pending:
                    if id(child) in on_path:
                        raise ValueError(f"save_json: {obj.type_key} is part of a reference cycle")
                    stack.append((child, None))
                if pending:
                    continue
            where = obj.type_key
            fields = {k: self.encode(v, f"{where}.{k}") for k, v in state.items()}
            self.node_ids[id(obj)] = len(self.nodes)
            self.nodes.append({"type_key": obj.type_key, "fields": fields})
            self.keep.append(obj)
            on_path.discard(id(obj))
            stack.pop()
        return self.node_ids[id(root)]

    @staticmethod
    def _state_of(obj: Object) -> dict[str, Any]:
        if not is_registered(obj):
            registered = OBJECT_TYPES.get(type(obj).type_key)
            raise TypeError(
                f"save_json: {type(obj).__qualname__} is not registered (type_key "
                f"{type(obj).type_key!r} belongs to {registered!r}); decorate it with "
                "@register_object, placed above @dataclass")
        state = obj._json_state()
        if not all(isinstance(k, str) for k in state):
            raise TypeError(f"save_json: {obj.type_key}._json_state() keys must be str")
        return state

    def _array_index(self, arr: Any) -> int:
        if id(arr) not in self.array_ids:
            self.array_ids[id(arr)] = len(self.arrays)
            self.arrays.append(base64.b64encode(serialize_ndarray(arr)).decode("ascii"))
            self.keep.append(arr)
        return self.array_ids[id(arr)]

    def encode(self, v: Any, where: str) -> Any:  # noqa: C901 - one branch per value kind
        if isinstance(v, Object):
            return {"$node": self.node_ids[id(v)]}
        if v is None or type(v) in (bool, str):
            return v
        if isinstance(v, enum.Enum):
            cls = type(v)
            return {"$enum": [f"{cls.__module__}:{cls.__qualname__}", v.name]}
        if isinstance(v, np.generic):
            if v.dtype.name not in DataType.NUMPY2STR.values():
                raise TypeError(f"save_json: {where}: numpy scalar of dtype {v.dtype} "
                                "is not supported")
            return {"$np": [v.dtype.name, self.encode(v.item(), where)]}
        if type(v) is int:
            return v
        if type(v) is float:
            return v if math.isfinite(v) else {"$float": repr(v)}
        if type(v) is tuple:
            return [self.encode(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if type(v) is list:
            return {"$list": [self.encode(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if type(v) is dict:
            if all(type(k) is str for k in v):
                return {"$dict": {k: self.encode(x, f"{where}[{k!r}]") for k, x in v.items()}}
            return {"$items": [[self.encode(k, f"{where}.key"), self.encode(x, f"{where}[{k!r}]")]
                               for k, x in v.items()]}
        if isinstance(v, DataType):
            return {"$dtype": str(v)}
        if isinstance(v, Device):
            return {"$device": [v.device_type, v.device_id]}
        if isinstance(v, NDArray):
            return {"$ndarray": self._array_index(v)}
        if isinstance(v, np.ndarray):
            return {"$numpy": self._array_index(v)}
        if isinstance(v, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(bytes(v)).decode("ascii")}
        raise TypeError(f"save_json: cannot serialize {where}: {type(v).__name__} value "
                        f"{_short(v)} (supported: None, bool, int, float, str, tuple, list, "
                        "dict, Enum, DataType, Device, NDArray, numpy arrays and scalars, bytes, "
                        "Objects)")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _child_objects(values: Any) -> list[Object]:
    """The Objects referenced by field values (not looking inside the Objects themselves)."""
    out: list[Object] = []
    todo = list(values)
    while todo:
        v = todo.pop()
        if isinstance(v, Object):
            out.append(v)
        elif type(v) in (tuple, list):
            todo.extend(v)
        elif type(v) is dict:
            todo.extend(v.keys())
            todo.extend(v.values())
    out.reverse()
    return out


def save_json(obj: Any) -> str:
    """Serialize an Object graph (or a list/dict/str, converted to Array/Map/String) to JSON.

    Shared sub-objects are stored once and come back shared from ``load_json``.
    Raises TypeError naming the field for values that cannot be saved, ValueError on cycles.
    """
    enc = _Encoder()
    root = enc.add_graph(as_object(obj))
    attrs = {"ember_version": _version(), "format": FORMAT, "format_version": FORMAT_VERSION}
    nodes = ",\n    ".join(json.dumps(n, allow_nan=False) for n in enc.nodes)
    arrays = ",\n    ".join(json.dumps(a) for a in enc.arrays)
    return (f'{{\n  "root": {root},\n  "nodes": [\n    {nodes}\n  ],\n'
            f'  "b64ndarrays": [{arrays and chr(10) + "    " + arrays + chr(10) + "  "}],\n'
            f'  "attrs": {json.dumps(attrs)}\n}}\n')


def load_json(text: str | bytes) -> Any:
    """Rebuild the object graph saved by ``save_json``.

    Raises JSONFormatError (an ArtifactError and a ValueError) for malformed JSON, documents of
    another format or version, dangling references and type keys that no loaded module
    registers (naming close matches).
    """
    try:
        doc = json_reader.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise JSONFormatError(f"load_json: not valid JSON: {err}") from None
    except TypeError:
        raise ArgumentTypeError(f"load_json: expected a str, got {type(text).__name__}"
                                ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) \
            or type(doc.get("root")) is not int:
        raise JSONFormatError("load_json: not an ember JSON document: expected an object with an "
                         "integer 'root' and a 'nodes' list")
    attrs = doc.get("attrs", {})
    if not isinstance(attrs, dict) or attrs.get("format", FORMAT) != FORMAT:
        raise JSONFormatError(f"load_json: not an ember JSON document (attrs.format = "
                         f"{attrs.get('format') if isinstance(attrs, dict) else attrs!r})")
    version = attrs.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise JSONFormatError(f"load_json: format_version {version!r} is not supported (this ember "
                         f"reads version {FORMAT_VERSION}; saved by ember "
                         f"{attrs.get('ember_version', 'unknown')})")
    arrays = doc.get("b64ndarrays", [])
    if not isinstance(arrays, list):
        raise JSONFormatError("load_json: 'b64ndarrays' must be a list")
    return _Decoder(doc["nodes"], arrays).run(doc["root"])


class _Decoder:
    def __init__(self, nodes: list[Any], arrays: list[Any]) -> None:
        self.nodes = nodes
        self.raw_arrays = arrays
        self.arrays: dict[int, NDArray] = {}
        self.objs: list[Any] = []

    def run(self, root: int) -> Any:
        for i, node in enumerate(self.nodes):
            where = f"nodes[{i}]"
            if not (isinstance(node, dict) and isinstance(node.get("type_key"), str)
                    and isinstance(node.get("fields", {}), dict)):
                raise JSONFormatError(f"load_json: {where} must be an object with a str 'type_key' "
                                 "and a 'fields' object")
            cls = _lookup(node["type_key"], where)
            state = {k: self.decode(v, f"{where}.fields.{k}") for k, v in
                     node.get("fields", {}).items()}
            try:
                self.objs.append(cls._from_json_state(state))
            except (TypeError, ValueError, KeyError, AttributeError) as err:
                raise JSONFormatError(f"load_json: {where} ({node['type_key']}): {err}") from None
        if not 0 <= root < len(self.objs):
            raise JSONFormatError(f"load_json: root {root} is not a node index (there are "
                             f"{len(self.objs)} nodes)")
        return self.objs[root]

    def decode(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return tuple(self.decode(x, f"{where}[{i}]") for i, x in enumerate(v))
        if not (isinstance(v, dict) and len(v) == 1):
            raise JSONFormatError(f"load_json: {where}: expected a value or a single-key tagged "
                             f"object, got {_short(v)}")
        ((tag, arg),) = v.items()
        handler = getattr(self, "_tag_" + tag.lstrip("$"), None) if tag.startswith("$") else None
        if handler is None:
            raise JSONFormatError(f"load_json: {where}: unknown tag {tag!r}")
        try:
            return handler(arg, where)
        except (TypeError, ValueError, KeyError, IndexError, ArtifactError) as err:
            if str(err).startswith("load_json:"):
                raise
            raise JSONFormatError(f"load_json: {where}: bad {tag} value {_short(arg)}: "
                                  f"{err}") from None

    def _tag_node(self, arg: Any, where: str) -> Any:
        if type(arg) is not int or not 0 <= arg < len(self.objs):
            raise ValueError(f"node reference must name an earlier node (< {len(self.objs)})")
        return self.objs[arg]

    def _tag_list(self, arg: list[Any], where: str) -> list[Any]:
        return [self.decode(x, f"{where}[{i}]") for i, x in enumerate(arg)]

    def _tag_dict(self, arg: dict[str, Any], where: str) -> dict[str, Any]:
        return {k: self.decode(x, f"{where}[{k!r}]") for k, x in arg.items()}

    def _tag_items(self, arg: list[Any], where: str) -> dict[Any, Any]:
        return {self.decode(k, f"{where}.key"): self.decode(x, f"{where}.value") for k, x in arg}

    def _tag_dtype(self, arg: str, where: str) -> DataType:
        return DataType(arg)

    def _tag_device(self, arg: list[int], where: str) -> Device:
        dev_type, dev_id = arg
        return Device(int(dev_type), int(dev_id))

    def _tag_float(self, arg: str, where: str) -> float:
        if arg not in ("nan", "inf", "-inf"):
            raise ValueError("expected 'nan', 'inf' or '-inf'")
        return float(arg)

    def _tag_np(self, arg: list[Any], where: str) -> Any:
        dtype, value = arg
        if dtype not in DataType.NUMPY2STR.values():
            raise ValueError(f"unsupported numpy dtype {dtype!r}")
        return np.dtype(dtype).type(self.decode(value, where))

    def _tag_bytes(self, arg: str, where: str) -> bytes:
        return base64.b64decode(arg.encode("ascii"), validate=True)

    def _tag_ndarray(self, arg: int, where: str) -> NDArray:
        if type(arg) is not int or not 0 <= arg < len(self.raw_arrays):
            raise ValueError(f"no b64ndarrays[{arg}] (there are {len(self.raw_arrays)})")
        if arg not in self.arrays:
            try:
                blob = base64.b64decode(str(self.raw_arrays[arg]).encode("ascii"), validate=True)
            except binascii.Error as err:
                raise ValueError(f"b64ndarrays[{arg}] is not base64: {err}") from None
            self.arrays[arg] = deserialize_ndarray(blob)
        return self.arrays[arg]

    def _tag_numpy(self, arg: int, where: str) -> np.ndarray:
        # The NDArray storage is cached, so two references to one array share it again.
        return self._tag_ndarray(arg, where)._np

    def _tag_enum(self, arg: list[str], where: str) -> enum.Enum:
        path, name = arg
        module, _, qualname = path.partition(":")
        if module not in sys.modules and not module.startswith("ember."):
            raise ValueError(f"enum module {module!r} is not loaded (only modules already "
                             "imported or inside ember are imported by load_json)")
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
            raise ValueError(f"{path} is not an Enum")
        return cls[name]


def _lookup(type_key: str, where: str) -> Any:
    if type_key not in OBJECT_TYPES:
        module = _TYPE_KEY_MODULES.get(type_key.split(".")[0])
        if module is not None:
            try:
                importlib.import_module(module)  # registers the types of that layer
            except ImportError:
                pass
    cls = OBJECT_TYPES.get(type_key)
    if cls is None:
        close = difflib.get_close_matches(type_key, OBJECT_TYPES, n=3, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise JSONFormatError(f"load_json: {where}: unknown type_key {type_key!r} (no registered "
                         f"object type has it{hint})")
    return cls

