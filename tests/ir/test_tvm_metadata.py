"""Text printed by TVM: its metadata section is TVM's object graph with base64 NDArrays
(``ember/ir/_tvm_metadata.py``), which ember reads as well as its own."""
from __future__ import annotations

import base64
import json
import struct

import numpy as np
import pytest

import ember as tvm
from ember.ir.parser import fromtext, parse_expr

MAGIC = 0xDD5E40F096B4A13F
CODES = {"i": 0, "u": 1, "f": 2, "b": 1}
# What TVM 0.8 printed for relay.const(np.arange(1, 7, dtype="float32").reshape(2, 3)).
TVM_BLOB = ("P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAgAAAAIgAQACAAAAAAAAAAMAAAAAAAAAGAAAAAAAAAAAAIA/AAAAQ"
            "AAAQEAAAIBAAACgQAAAwEA=")


def blob(arr: np.ndarray, magic: int = MAGIC, lanes: int = 1, size_delta: int = 0) -> str:
    """TVM's serialisation of ``arr`` (little-endian), as base64."""
    bits = 1 if arr.dtype == bool else arr.dtype.itemsize * 8
    head = struct.pack("<QQiiiBBH", magic, 0, 1, 0, arr.ndim, CODES[arr.dtype.kind], bits, lanes)
    data = np.ascontiguousarray(arr, arr.dtype.newbyteorder("<")).tobytes()
    shape = struct.pack(f"<{arr.ndim}q", *arr.shape)
    return base64.b64encode(head + shape + struct.pack("<q", len(data) + size_delta)
                            + data).decode()


def graph(blobs: list[str]) -> str:
    """A metadata section in TVM's format whose relay.Constant list holds one constant node
    per blob."""
    count = len(blobs)
    nodes = [{"type_key": ""},
             {"type_key": "Map", "keys": ["relay.Constant"], "data": [2]},
             {"type_key": "Array", "data": list(range(3, 3 + count))}]
    nodes += [{"type_key": "relay.Constant", "attrs": {"_checked_type_": "0", "data": str(i),
                                                        "span": "0"}} for i in range(count)]
    return json.dumps({"root": 1, "nodes": nodes, "b64ndarrays": blobs,
                       "attrs": {"tvm_version": "0.8.0"}}, indent=2)


def program(meta: str, body: str = "meta[relay.Constant][0]") -> str:
    return f'#[version = "0.0.5"]\ndef @main() {{\n  {body}\n}}\n\n#[metadata]\n{meta}'


def test_text_that_tvm_printed():
    mod = fromtext(program(graph([TVM_BLOB])))
    np.testing.assert_array_equal(mod["main"].body.data.numpy(),
                                  np.arange(1, 7, dtype="float32").reshape(2, 3))


@pytest.mark.parametrize("arr", [
    np.arange(6, dtype="float32").reshape(2, 3), np.array(2.5, "float64"),
    np.array([1, -2], "int8"), np.array([[7]], "int64"), np.array([True, False, True]),
    np.array([0.5, -1], "float16"), np.array([255, 0], "uint8"), np.zeros((0, 3), "int32"),
    np.array([2**32 - 1], "uint32"),
], ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_arrays_of_each_dtype(arr):
    got = fromtext(program(graph([blob(arr)])))["main"].body.data.numpy()
    assert got.dtype == arr.dtype and got.shape == arr.shape
    np.testing.assert_array_equal(got, arr)


def test_shared_entries_and_several_constants():
    a, b = np.ones(2, "float32"), np.arange(3, dtype="int32")
    text = program(graph([blob(a), blob(b)]),
                   body="(meta[relay.Constant][0], meta[relay.Constant][1], "
                        "meta[relay.Constant][0])")
    fields = fromtext(text)["main"].body.fields
    assert fields[0] is fields[2]
    np.testing.assert_array_equal(fields[1].data.numpy(), b)


def test_map_with_object_keys():
    meta = json.loads(graph([blob(np.ones(1, "float32"))]))
    meta["nodes"][1] = {"type_key": "Map", "data": [4, 2]}  # key node 4, value node 2
    meta["nodes"].append({"type_key": "runtime.String", "repr_str": "relay.Constant"})
    e = parse_expr('#[version = "0.0.5"]\nmeta[relay.Constant][0]\n#[metadata]\n'
                   + json.dumps(meta))
    assert e.data.numpy().tolist() == [1.0]


def test_other_kinds_are_left_out():
    meta = json.loads(graph([]))
    meta["nodes"][1]["keys"], meta["nodes"][2]["data"] = ["IntImm"], []
    with pytest.raises(tvm.error.DiagnosticError, match=r"meta\[relay.Constant\]\[0\] is not "
                                                        "defined"):
        fromtext(program(json.dumps(meta)))


def _edit(text: str, change) -> str:
    meta = json.loads(text)
    change(meta)
    return json.dumps(meta)


def _bad_root(meta: dict) -> None:
    meta["nodes"][1]["type_key"] = "Array"


def _bad_index(meta: dict) -> None:
    meta["nodes"][2]["data"] = [17]


def _bad_data_ref(meta: dict) -> None:
    meta["nodes"][3]["attrs"]["data"] = "5"


def _attrs_not_object(meta: dict) -> None:
    meta["nodes"][3]["attrs"] = 5


def _data_ref(ref):
    def change(meta: dict) -> None:
        meta["nodes"][3]["attrs"]["data"] = ref
    return change


def _wrong_node(meta: dict) -> None:
    meta["nodes"][3]["type_key"] = "IntImm"


ONE = np.ones((2, 2), "float32")
BAD = {
    "bad magic": (graph([blob(ONE, magic=0x1234)]),
                  r"b64ndarrays\[0\] \(node 3\): bad magic 0x1234"),
    "vector lanes": (graph([blob(ONE, lanes=4)]),
                     r"unsupported dtype \(code 2, bits 32, lanes 4\)"),
    "byte count": (graph([blob(ONE, size_delta=4)]),
                   r"shape \(2, 2\) of float32 needs 16 bytes; the header says 20"),
    "truncated": (graph([blob(ONE)[:40]]), r"b64ndarrays\[0\] \(node 3\)"),
    "header only": (graph(["P6G0lvBAXt0="]), "8 bytes is too short for an NDArray header"),
    "not base64": (graph(["not base64!"]), "not base64 text"),
    "root not a map": (_edit(graph([blob(ONE)]), _bad_root),
                       "the root node is a 'Array', expected a Map"),
    "node out of range": (_edit(graph([blob(ONE)]), _bad_index),
                          "refers to node 17, but there are 4 nodes"),
    "array out of range": (_edit(graph([blob(ONE)]), _bad_data_ref),
                           r"its data '5' is not an index into the 1 b64ndarrays"),
    "attrs not an object": (_edit(graph([blob(ONE)]), _attrs_not_object),
                            "its data None is not an index"),
    "infinite data ref": (_edit(graph([blob(ONE)]), _data_ref(float("inf"))),
                          "its data inf is not an index"),
    "negative data ref": (_edit(graph([blob(ONE)]), _data_ref("-1")),
                          "its data '-1' is not an index"),
    "wrong node kind": (_edit(graph([blob(ONE)]), _wrong_node),
                        "node 3 is a 'IntImm', expected a relay.Constant"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_sections_are_errors_at_the_metadata_line(name):
    meta, message = BAD[name]
    with pytest.raises(tvm.error.DiagnosticError,
                       match=r"bad metadata section \(TVM's object graph\): .*" + message) as info:
        fromtext(program(meta))
    assert info.value.line == 6
