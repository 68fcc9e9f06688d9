"""TVM's own metadata section, read: text that TVM's ``astext`` printed ends with its object
graph (``tvm.ir.save_json``) rather than ember's table, and ember reads that too.

    {"root": 1,
     "nodes": [{"type_key": ""},
               {"type_key": "Map", "keys": ["relay.Constant"], "data": [2]},
               {"type_key": "Array", "data": [3]},
               {"type_key": "relay.Constant", "attrs": {"data": "0", ...}}],
     "b64ndarrays": ["<base64 of TVM's NDArray serialisation>"],
     "attrs": {"tvm_version": "0.8.0"}}

An NDArray is serialised (little-endian) as: magic u64, reserved u64, device (i32 type, i32
id), ndim i32, dtype (u8 code, u8 bits, u16 lanes), shape i64[ndim], byte count i64, bytes.
Only ``relay.Constant`` entries are read; others are left out (a ``meta[...]`` reference to
one is then an error naming it). Printing stays in ember's format (docs/text_format.md).
"""
from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

import numpy as np

from ._text_common import CONSTANT_KIND

NDARRAY_MAGIC = 0xDD5E40F096B4A13F
_HEAD = struct.Struct("<QQiiiBBH")  # magic, reserved, device type, device id, ndim, dtype
_DTYPE_CODES = {0: "int", 1: "uint", 2: "float"}


def is_tvm_graph(table: Any) -> bool:
    """Whether a decoded metadata section is TVM's object graph."""
    return isinstance(table, dict) and "root" in table and "nodes" in table


def read_tvm_metadata(graph: dict[str, Any]) -> dict[str, list[np.ndarray]]:
    """``{"relay.Constant": [arrays]}`` from TVM's object graph. ValueError names the node
    (or array) that is wrong."""
    nodes, arrays = graph["nodes"], graph.get("b64ndarrays", [])
    if not isinstance(nodes, list) or not isinstance(arrays, list):
        raise ValueError("'nodes' and 'b64ndarrays' must be lists")
    root = _node(nodes, graph["root"], "root")
    if root.get("type_key") not in ("Map", "StrMap"):
        raise ValueError(f"the root node is a {root.get('type_key')!r}, expected a Map")
    table: dict[str, list[np.ndarray]] = {}
    for kind, index in _map_items(nodes, root):
        if kind != CONSTANT_KIND:
            continue
        entries = _node(nodes, index, f"the {kind} list")
        if entries.get("type_key") != "Array":
            raise ValueError(f"node {index} ({kind}) is a {entries.get('type_key')!r}, "
                             "expected an Array")
        table[kind] = [_constant(nodes, arrays, i) for i in entries.get("data", [])]
    return table


def _node(nodes: list[Any], index: Any, what: str) -> dict[str, Any]:
    if not isinstance(index, int) or not 0 <= index < len(nodes):
        raise ValueError(f"{what} refers to node {index!r}, but there are {len(nodes)} nodes")
    node = nodes[index]
    if not isinstance(node, dict):
        raise ValueError(f"node {index} is not an object")
    return node


def _map_items(nodes: list[Any], root: dict[str, Any]) -> list[tuple[str, Any]]:
    """(key, value node index) of a Map: string keys are listed in ``keys``; otherwise
    ``data`` alternates key and value nodes, a key being a ``runtime.String``."""
    data = root.get("data", [])
    if "keys" in root:
        return list(zip(root["keys"], data))
    pairs = []
    for k, v in zip(data[::2], data[1::2]):
        pairs.append((_node(nodes, k, "a Map key").get("repr_str", ""), v))
    return pairs


def _constant(nodes: list[Any], arrays: list[Any], index: Any) -> np.ndarray:
    node = _node(nodes, index, "the relay.Constant list")
    if node.get("type_key") != CONSTANT_KIND:
        raise ValueError(f"node {index} is a {node.get('type_key')!r}, expected a "
                         f"{CONSTANT_KIND}")
    attrs = node.get("attrs")
    ref = attrs.get("data") if isinstance(attrs, dict) else None
    # TVM writes the index as a string ("0"); a negative, float or bool one is no index.
    if not (isinstance(ref, (int, str)) and not isinstance(ref, bool) and str(ref).isdigit()
            and int(ref) < len(arrays)):
        raise ValueError(f"node {index} ({CONSTANT_KIND}): its data {ref!r} is not an index "
                         f"into the {len(arrays)} b64ndarrays")
    try:
        return decode_tvm_ndarray(arrays[int(ref)])
    except ValueError as err:
        raise ValueError(f"b64ndarrays[{int(ref)}] (node {index}): {err}") from None


def decode_tvm_ndarray(blob: Any) -> np.ndarray:
    """The array of one base64 NDArray of TVM's serialisation; ValueError says what is wrong."""
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ValueError("not base64 text") from None
    if len(raw) < _HEAD.size:
        raise ValueError(f"{len(raw)} bytes is too short for an NDArray header")
    magic, _, _, _, ndim, code, bits, lanes = _HEAD.unpack_from(raw)
    if magic != NDARRAY_MAGIC:
        raise ValueError(f"bad magic {magic:#x} (an NDArray starts with {NDARRAY_MAGIC:#x})")
    dtype = _dtype(code, bits, lanes)
    offset = _HEAD.size + 8 * ndim + 8
    if ndim < 0 or len(raw) < offset:
        raise ValueError(f"ndim {ndim} does not fit in {len(raw)} bytes")
    shape = struct.unpack_from(f"<{ndim}q", raw, _HEAD.size)
    (size,) = struct.unpack_from("<q", raw, offset - 8)
    want = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if min(shape, default=0) < 0 or size != want or len(raw) != offset + size:
        raise ValueError(f"shape {tuple(shape)} of {dtype} needs {want} bytes; the header says "
                         f"{size} and {len(raw) - offset} follow it")
    count = int(np.prod(shape, dtype=np.int64))
    data = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"), count=count,
                         offset=offset)
    return data.astype(dtype).reshape(shape)


def _dtype(code: int, bits: int, lanes: int) -> str:
    if code == 1 and bits == 1 and lanes == 1:
        return "bool"
    name = _DTYPE_CODES.get(code)
    dtype = f"{name}{bits}" if name else ""
    if lanes != 1 or dtype not in ("int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "float16", "float32", "float64"):
        raise ValueError(f"unsupported dtype (code {code}, bits {bits}, lanes {lanes})")
    return dtype
