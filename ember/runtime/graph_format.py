"""The graph executor's artifact format: the graph JSON, its schema, version and validation.

This module is the one contract between the compile side (``relay/backend/graph/codegen.py``,
which builds a :class:`Graph` and calls :meth:`Graph.to_json`) and the run side
(``runtime/graph_executor.py``, which calls :func:`parse_graph`). Layout (the Relay-era one)::

    {
      "nodes": [                                   # in execution (topological) order
        {"op": "null", "name": "data", "inputs": []},                  # an input or a param
        {"op": "tvm_op", "name": "tvmgen_default_fused_add",
         "inputs": [[0, 0, 0], [1, 0, 0]],         # [node id, output index, version]
         "attrs": {"func_name": "tvmgen_default_fused_add",  # "__nop": no kernel call
                   "num_inputs": "2", "num_outputs": "1", "flatten_data": "0"}}
      ],
      "arg_nodes": [0, 1],                         # the "null" nodes: inputs then params
      "heads": [[2, 0, 0]],                        # the graph outputs, as entries
      "node_row_ptr": [0, 1, 2, 3],                # entry id of (nid, i) = node_row_ptr[nid] + i
      "attrs": {                                   # one value per entry (node output)
        "storage_id": ["list_int", [0, 1, 2]],     # entries with one id share memory
        "shape": ["list_shape", [[4], [4], [4]]],
        "dltype": ["list_str", ["float32", "float32", "float32"]],
        "device_index": ["list_int", [1, 1, 1]],   # optional; DLDeviceType, 1 = CPU
        "storage_offset": ["list_int", [0, 0, 0]], # optional (absent = all 0): bytes into
                                                   # the entry's storage
        "storage_size": ["list_int", [16, 16, 16]],  # optional: bytes of each storage,
                                                   # indexed by storage id (0 .. max id)
        "format_version": ["size_t", 1]            # optional (absent = 1); written by to_json:
                                                   # 3 with storage_size, else 2 with
                                                   # storage_offset
      }
    }

Semantics the executor relies on:

- A ``tvm_op`` node calls the packed function ``func_name`` with its input entries followed
  by its output entries, as DLTensors. Node attrs may be strings (as TVM writes them) or ints.
- ``func_name == "__nop"`` makes no call. With one input its output is a view of bytes of
  the input (same storage, within the input's bytes: a reshape-only group, or a contiguous
  slice); with several, a concatenation whose producers wrote each input in its slice (same
  storage, input k at the output's offset plus the bytes of inputs 0..k-1, all of them
  together exactly the output's bytes).
- Storage id ``s`` is one buffer of ``storage_size[s]`` bytes; without ``storage_size`` (TVM's
  graphs, ember's before format 3), as large as the largest entry at offset 0 using it. Each
  entry is a zero-copy view into it, ``storage_offset`` bytes from its start (a multiple of
  the entry's element size), and ends within the buffer. Entries of one storage may overlap
  only when they are not alive at the same time (the planner's business; ember's puts all
  intermediates in one storage, at offsets from its arena plan). Graph inputs/params must
  not share storage with other entries.
- ``flatten_data`` ("1") passes every argument to the kernel as a 1-D tensor.

:func:`parse_graph` checks every field before anything runs and raises
:class:`GraphFormatError` naming the path, e.g. ``graph json: nodes[7].inputs[1]: node 12
out of range (graph has 10 nodes)``.
"""
from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import json_reader
from .dtype import DataType
from .errors import ArtifactError
from .ndarray import _parse_dtype

# 2: entries may start at a storage_offset (a runtime that reads 1 only would ignore it and
# read the wrong bytes); a graph without offsets is still written as version 1.
# 3: storages may declare their size (storage_size; a runtime that reads 2 only would size a
# storage by its largest entry at offset 0, too small for the entries past it).
GRAPH_FORMAT_VERSION = 3
NOP = "__nop"
CPU_DEVICE_TYPE = 1
# Node attrs with a meaning to the executor; others are kept verbatim (e.g. "hash").
_KNOWN_ATTRS = ("func_name", "num_inputs", "num_outputs", "flatten_data")


class GraphFormatError(ArtifactError, ValueError):
    """A graph JSON is malformed: 'graph json: <path>: <what is wrong>'."""


@dataclass(frozen=True)
class Entry:
    """One tensor of the graph: output ``index`` of node ``nid``."""

    nid: int
    index: int = 0
    version: int = 0

    def to_json(self) -> list[int]:
        return [self.nid, self.index, self.version]


@dataclass
class Node:
    """A graph node: an input/param (``op == "null"``) or a kernel call (``"tvm_op"``)."""

    op: str
    name: str
    inputs: list[Entry] = field(default_factory=list)
    func_name: str = ""
    num_outputs: int = 1
    flatten_data: bool = False
    extra_attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def is_input(self) -> bool:
        return self.op == "null"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "name": self.name,
                               "inputs": [e.to_json() for e in self.inputs]}
        if not self.is_input:
            out["attrs"] = {"func_name": self.func_name, "num_inputs": str(len(self.inputs)),
                            "num_outputs": str(self.num_outputs),
                            "flatten_data": str(int(self.flatten_data)), **self.extra_attrs}
        return out


@dataclass
class Graph:
    """A parsed, validated graph. Per-entry lists are indexed by entry id (``entry_id``)."""

    nodes: list[Node]
    arg_nodes: list[int]
    heads: list[Entry]
    storage_id: list[int]
    shape: list[tuple[int, ...]]
    dltype: list[str]
    device_index: list[int] | None = None
    node_row_ptr: list[int] = field(default_factory=list)
    storage_offset: list[int] | None = None  # bytes into the storage, per entry (None: all 0)
    storage_size: list[int] | None = None  # bytes per storage id (None: see storage_bytes)

    def __post_init__(self) -> None:
        if not self.node_row_ptr:
            self.node_row_ptr = row_ptr_of(self.nodes)

    @property
    def num_entries(self) -> int:
        return self.node_row_ptr[-1]

    def entry_id(self, entry: Entry | int, index: int = 0) -> int:
        """Entry id of an Entry, or of output ``index`` of node ``entry`` (an int)."""
        if isinstance(entry, Entry):
            return self.node_row_ptr[entry.nid] + entry.index
        return self.node_row_ptr[entry] + index

    def offset(self, eid: int) -> int:
        """Bytes from the start of entry ``eid``'s storage to its first byte."""
        return self.storage_offset[eid] if self.storage_offset is not None else 0

    def storage_bytes(self) -> dict[int, int]:
        """Per storage id that an entry uses, its buffer's size: ``storage_size`` where the
        graph declares it, else its largest entry at offset 0."""
        if self.storage_size is not None:
            return {sid: self.storage_size[sid] for sid in sorted(set(self.storage_id))}
        sizes: dict[int, int] = {}
        for eid, sid in enumerate(self.storage_id):
            at_zero = self.offset(eid) == 0
            sizes[sid] = max(sizes.get(sid, 0), self.nbytes(eid) if at_zero else 0)
        return sizes

    def nbytes(self, eid: int) -> int:
        """Bytes of entry ``eid`` (vector dtypes count every lane)."""
        dt = DataType(self.dltype[eid])
        return int(math.prod(self.shape[eid]) * dt.lanes * ((dt.bits + 7) // 8))

    @property
    def input_names(self) -> list[str]:
        return [self.nodes[nid].name for nid in self.arg_nodes]

    def to_dict(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "storage_id": ["list_int", list(self.storage_id)],
            "shape": ["list_shape", [list(s) for s in self.shape]],
            "dltype": ["list_str", list(self.dltype)],
        }
        if self.device_index is not None:
            attrs["device_index"] = ["list_int", list(self.device_index)]
        if self.storage_offset is not None:
            attrs["storage_offset"] = ["list_int", list(self.storage_offset)]
        if self.storage_size is not None:
            attrs["storage_size"] = ["list_int", list(self.storage_size)]
        attrs["format_version"] = ["size_t", 3 if self.storage_size is not None else
                                   1 if self.storage_offset is None else 2]
        return {"nodes": [n.to_json() for n in self.nodes], "arg_nodes": list(self.arg_nodes),
                "heads": [h.to_json() for h in self.heads],
                "node_row_ptr": list(self.node_row_ptr), "attrs": attrs}

    def to_json(self, indent: int | None = None) -> str:
        """The graph JSON text, validated (an invalid Graph raises GraphFormatError).

        By default one node and one attribute per line (readable, and compact for big graphs);
        ``indent`` gives ``json.dumps``'s fully indented layout instead."""
        data = self.to_dict()
        if indent is not None:
            text = json.dumps(data, indent=indent)
        else:
            nodes = ",\n".join(f"    {json.dumps(n)}" for n in data.pop("nodes"))
            attrs = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}"
                                for k, v in data.pop("attrs").items())
            rest = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items()]
            text = ",\n".join([f'{{\n  "nodes": [\n{nodes}\n  ]', *rest,
                               f'  "attrs": {{\n{attrs}\n  }}\n}}'])
        parse_graph(text)
        return text


def row_ptr_of(nodes: Sequence[Node]) -> list[int]:
    """node_row_ptr for ``nodes``: prefix sums of the output counts."""
    ptr = [0]
    for node in nodes:
        ptr.append(ptr[-1] + (1 if node.is_input else node.num_outputs))
    return ptr


# ---- parsing and validation -----------------------------------------------------------------
def _fail(path: str, msg: str) -> GraphFormatError:
    return GraphFormatError(f"graph json: {path}: {msg}" if path else f"graph json: {msg}")


def _int(value: Any, path: str, minimum: int = 0) -> int:
    """An int (or a string holding one, as TVM writes node attrs) >= minimum."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise _fail(path, f"expected an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise _fail(path, f"expected an integer >= {minimum}, got {value}")
    return int(value)


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list, got {type(value).__name__}")
    return value


def _entry(value: Any, path: str, nodes: Sequence[Node], limit: int) -> Entry:
    """An [nid, index(, version)] triple referring to an output of a node before ``limit``."""
    items = _list(value, path)
    if len(items) not in (2, 3):
        raise _fail(path, f"expected [node_id, index, version], got {value!r}")
    nid = _int(items[0], path)
    index = _int(items[1], path)
    version = _int(items[2], path) if len(items) == 3 else 0
    if nid >= len(nodes):
        raise _fail(path, f"node {nid} out of range (graph has {len(nodes)} nodes)")
    if nid >= limit:
        raise _fail(path, f"node {nid} is not before this node (nodes must be in execution "
                    "order)")
    outputs = 1 if nodes[nid].is_input else nodes[nid].num_outputs
    if index >= outputs:
        raise _fail(path, f"output {index} of node {nid} ({nodes[nid].name!r}) out of range "
                    f"(it has {outputs} output{'s' * (outputs != 1)})")
    return Entry(nid, index, version)


def _node_head(value: Any, i: int) -> Node:
    """Node ``i`` without its inputs (those are checked once every node is known)."""
    path = f"nodes[{i}]"
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object, got {type(value).__name__}")
    op, name = value.get("op"), value.get("name")
    if op not in ("null", "tvm_op"):
        raise _fail(f"{path}.op", f"expected 'null' or 'tvm_op', got {op!r}")
    if not isinstance(name, str) or not name:
        raise _fail(f"{path}.name", f"expected a non-empty string, got {name!r}")
    if op == "null":
        if value.get("inputs"):
            raise _fail(f"{path}.inputs", "an input node ('null') cannot have inputs")
        return Node("null", name)
    attrs = value.get("attrs", value.get("param"))  # very old graphs call it "param"
    if not isinstance(attrs, dict):
        raise _fail(f"{path}.attrs", "a tvm_op node needs an attrs object")
    func = attrs.get("func_name")
    if not isinstance(func, str) or not func:
        raise _fail(f"{path}.attrs.func_name", f"expected a non-empty string, got {func!r}")
    num_outputs = _int(attrs.get("num_outputs", 1), f"{path}.attrs.num_outputs", 1)
    flatten = _int(attrs.get("flatten_data", 0), f"{path}.attrs.flatten_data")
    extra = {k: v for k, v in attrs.items() if k not in _KNOWN_ATTRS}
    return Node("tvm_op", name, [], func, num_outputs, bool(flatten), extra)


def _node_inputs(value: dict[str, Any], node: Node, i: int, nodes: list[Node]) -> None:
    path = f"nodes[{i}]"
    inputs = _list(value.get("inputs", []), f"{path}.inputs")
    node.inputs = [_entry(e, f"{path}.inputs[{k}]", nodes, i) for k, e in enumerate(inputs)]
    if node.is_input:
        return
    declared = value.get("attrs", value.get("param", {})).get("num_inputs")
    if declared is not None and _int(declared, f"{path}.attrs.num_inputs") != len(node.inputs):
        raise _fail(f"{path}.attrs.num_inputs", f"says {declared} but the node has "
                    f"{len(node.inputs)} inputs")
    if node.func_name == NOP and (not node.inputs or node.num_outputs != 1):
        raise _fail(path, f"a {NOP} node must have inputs and one output, got "
                    f"{len(node.inputs)} and {node.num_outputs}")


def _attr(attrs: dict[str, Any], key: str, kind: str, count: int, required: bool,
          per: str = "entries") -> Any:
    """The values of ``attrs[key]`` = ``[kind, [...]]``, one per entry (or per ``per``)."""
    path = f"attrs.{key}"
    if key not in attrs:
        if required:
            raise _fail(path, f"missing (expected [\"{kind}\", [...]] with one value per entry)")
        return None
    value = _list(attrs[key], path)
    if len(value) != 2 or value[0] != kind:
        raise _fail(path, f"expected [\"{kind}\", [...]], got {json.dumps(value)[:80]}")
    items = _list(value[1], f"{path}[1]")
    if len(items) != count:
        raise _fail(path, f"has {len(items)} values but the graph has {count} {per}")
    return items


def _parse_attrs(attrs: Any, graph_nodes: list[Node], ptr: list[int]) -> dict[str, Any]:
    if not isinstance(attrs, dict):
        raise _fail("attrs", f"expected an object, got {type(attrs).__name__}")
    if "format_version" in attrs:
        version = attrs["format_version"]
        if not (isinstance(version, list) and len(version) == 2 and version[0] == "size_t"):
            raise _fail("attrs.format_version", f"expected [\"size_t\", n], got {version!r}")
        if not 1 <= _int(version[1], "attrs.format_version") <= GRAPH_FORMAT_VERSION:
            raise _fail("attrs.format_version", f"is {version[1]}; this runtime reads versions "
                        f"1 to {GRAPH_FORMAT_VERSION}")
    n = ptr[-1]
    sids = [_int(s, f"attrs.storage_id[1][{k}]") for k, s in
            enumerate(_attr(attrs, "storage_id", "list_int", n, True))]
    shapes = []
    for k, s in enumerate(_attr(attrs, "shape", "list_shape", n, True)):
        dims = _list(s, f"attrs.shape[1][{k}]")
        shapes.append(tuple(_int(d, f"attrs.shape[1][{k}][{j}]") for j, d in enumerate(dims)))
    dtypes = _attr(attrs, "dltype", "list_str", n, True)
    for k, d in enumerate(dtypes):
        try:
            _parse_dtype(d)  # a dtype an NDArray can hold
        except (ValueError, TypeError) as err:
            raise _fail(f"attrs.dltype[1][{k}]", f"unknown dtype {d!r} ({err})") from None
    devs = _attr(attrs, "device_index", "list_int", n, False)
    if devs is not None:
        devs = [_int(d, f"attrs.device_index[1][{k}]") for k, d in enumerate(devs)]
        for k, d in enumerate(devs):
            if d != CPU_DEVICE_TYPE:
                raise _fail(f"attrs.device_index[1][{k}]", f"device type {d} is not supported; "
                            "ember runs graphs on the CPU (device type 1)")
    offsets = _attr(attrs, "storage_offset", "list_int", n, False)
    if offsets is not None:
        offsets = [_int(o, f"attrs.storage_offset[1][{k}]") for k, o in enumerate(offsets)]
    # one size per storage id, not per entry: ids 0 .. the largest one
    sizes = _attr(attrs, "storage_size", "list_int", max(sids, default=-1) + 1, False,
                  "storage ids")
    if sizes is not None:
        sizes = [_int(z, f"attrs.storage_size[1][{k}]") for k, z in enumerate(sizes)]
    return {"storage_id": sids, "shape": shapes, "dltype": [str(d) for d in dtypes],
            "device_index": devs, "storage_offset": offsets, "storage_size": sizes}


def _check_fit(g: Graph) -> None:
    """Each entry starts whole elements into its storage and ends within it."""
    if g.storage_offset is None and g.storage_size is None:
        return  # every entry at offset 0 of a storage sized by its largest entry
    sizes = g.storage_bytes()
    declared = g.storage_size is not None
    for eid, sid in enumerate(g.storage_id):
        offset = g.offset(eid)
        if offset == 0 and not declared:
            continue
        dt = DataType(g.dltype[eid])
        item = max(1, (dt.bits * dt.lanes + 7) // 8)
        what = f"entry {eid} ({_entry_name(g, eid)!r})"
        if offset % item:
            raise _fail(f"attrs.storage_offset[1][{eid}]", f"{what} starts {offset} bytes into "
                        f"storage {sid}, not a multiple of its element size ({item} bytes, "
                        f"{g.dltype[eid]})")
        end = offset + g.nbytes(eid)
        if end <= sizes[sid]:
            continue
        if declared:
            raise _fail(f"attrs.storage_size[1][{sid}]", f"storage {sid} is {sizes[sid]} bytes, "
                        f"too small for {what}, {g.dltype[eid]}{list(g.shape[eid])} at bytes "
                        f"[{offset}, {end})")
        raise _fail(f"attrs.storage_offset[1][{eid}]", f"{what} at bytes [{offset}, {end}) runs "
                    f"past the end of storage {sid} ({sizes[sid]} bytes: its largest entry at "
                    "offset 0; a larger storage needs storage_size)")


def _check_nop(g: Graph, i: int, node: Node) -> None:
    """A __nop node makes no call: with one input its output is bytes of the input (a view:
    same storage, within the input's bytes); with several, the inputs laid end to end in its
    output's storage are its output (a concatenation written in place)."""
    dst = g.entry_id(i)
    where = f"nodes[{i}]"
    for k, e in enumerate(node.inputs):
        src = g.entry_id(e)
        if g.storage_id[src] != g.storage_id[dst]:
            which = "its input" if len(node.inputs) == 1 else f"input {k}"
            raise _fail(where, f"{NOP} node {node.name!r} must alias {which}: its output uses "
                        f"storage {g.storage_id[dst]}, {which} storage {g.storage_id[src]}")
    if len(node.inputs) == 1:
        src = g.entry_id(node.inputs[0])
        skip = g.offset(dst) - g.offset(src)
        if g.nbytes(dst) + max(skip, 0) > g.nbytes(src):
            raise _fail(where, f"{NOP} node {node.name!r} outputs {g.nbytes(dst)} bytes from "
                        f"an input of {g.nbytes(src)} bytes" + (f" at offset {skip}" if skip
                                                                 else ""))
        if skip < 0:
            raise _fail(where, f"{NOP} node {node.name!r}: its output starts {-skip} bytes "
                        "before its input")
        return
    at = g.offset(dst)
    for k, e in enumerate(node.inputs):
        src = g.entry_id(e)
        if g.offset(src) != at:
            raise _fail(where, f"{NOP} node {node.name!r}: input {k} is at byte "
                        f"{g.offset(src)} of storage {g.storage_id[src]}, expected {at} (the "
                        "inputs laid end to end from the output's offset)")
        at += g.nbytes(src)
    if at - g.offset(dst) != g.nbytes(dst):
        raise _fail(where, f"{NOP} node {node.name!r}: its inputs hold "
                    f"{at - g.offset(dst)} bytes, its output {g.nbytes(dst)}")


def _check_storage(g: Graph) -> None:
    """__nop nodes alias their inputs' storage; a graph input's storage belongs to it alone
    (and to __nop views of it), or set_input would overwrite another tensor."""
    _check_fit(g)
    src_of: dict[int, int] = {}  # __nop output entry -> its input entry (views only)
    for i, node in enumerate(g.nodes):
        if node.func_name != NOP:
            continue
        _check_nop(g, i, node)
        if len(node.inputs) == 1:
            src_of[g.entry_id(i)] = g.entry_id(node.inputs[0])

    def root(eid: int) -> int:
        while eid in src_of:
            eid = src_of[eid]
        return eid

    input_of = {g.storage_id[g.entry_id(nid)]: g.entry_id(nid) for nid in g.arg_nodes}
    for eid, sid in enumerate(g.storage_id):
        owner = input_of.get(sid)
        if owner is not None and eid != owner and root(eid) != owner:
            raise _fail(f"attrs.storage_id[1][{eid}]", f"storage {sid} of graph input "
                        f"{_entry_name(g, owner)!r} "
                        f"is also used by entry {eid} ({_entry_name(g, eid)!r})")


def _entry_name(g: Graph, eid: int) -> str:
    nid = bisect.bisect_right(g.node_row_ptr, eid) - 1
    index = eid - g.node_row_ptr[nid]
    return g.nodes[nid].name + (f"[{index}]" if index else "")


def parse_graph(source: str | bytes | Mapping[str, Any]) -> Graph:
    """Parse and validate graph JSON text (or the decoded dict). Raises GraphFormatError."""
    if isinstance(source, (str, bytes, bytearray)):
        try:
            data = json_reader.loads(source)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise _fail("", f"not valid JSON: {err}") from None
    else:
        data = source
    if not isinstance(data, Mapping):
        raise _fail("", f"expected a JSON object at the top level, got {type(data).__name__}")
    for key in ("nodes", "arg_nodes", "heads", "attrs"):
        if key not in data:
            raise _fail("", f"missing the {key!r} field")
    raw_nodes = _list(data["nodes"], "nodes")
    nodes = [_node_head(v, i) for i, v in enumerate(raw_nodes)]
    for i, (value, node) in enumerate(zip(raw_nodes, nodes)):
        _node_inputs(value, node, i, nodes)
    ptr = row_ptr_of(nodes)
    if "node_row_ptr" in data:
        given = [_int(v, f"node_row_ptr[{k}]") for k, v in
                 enumerate(_list(data["node_row_ptr"], "node_row_ptr"))]
        if given != ptr:
            raise _fail("node_row_ptr", f"{given[:12]} disagrees with the nodes' output counts "
                        f"(expected {ptr[:12]})")
    arg_nodes = [_int(v, f"arg_nodes[{k}]") for k, v in
                 enumerate(_list(data["arg_nodes"], "arg_nodes"))]
    _check_arg_nodes(arg_nodes, nodes)
    heads = [_entry(h, f"heads[{k}]", nodes, len(nodes)) for k, h in
             enumerate(_list(data["heads"], "heads"))]
    graph = Graph(nodes, arg_nodes, heads, node_row_ptr=ptr, **_parse_attrs(data["attrs"], nodes,
                                                                              ptr))
    _check_storage(graph)
    return graph


def _check_arg_nodes(arg_nodes: list[int], nodes: list[Node]) -> None:
    seen: dict[str, int] = {}
    for k, nid in enumerate(arg_nodes):
        if nid >= len(nodes):
            raise _fail(f"arg_nodes[{k}]", f"node {nid} out of range (graph has {len(nodes)} "
                        "nodes)")
        if not nodes[nid].is_input:
            raise _fail(f"arg_nodes[{k}]", f"node {nid} ({nodes[nid].name!r}) is a tvm_op, not an "
                        "input ('null') node")
        name = nodes[nid].name
        if name in seen:
            raise _fail(f"arg_nodes[{k}]", f"two inputs named {name!r} (nodes {seen[name]} and "
                        f"{nid})")
        seen[name] = nid
    listed = set(arg_nodes)
    for i, node in enumerate(nodes):
        if node.is_input and i not in listed:
            raise _fail(f"nodes[{i}]", f"input node {node.name!r} is not listed in arg_nodes")
