"""The graph JSON format: round trips of the schema objects, and an indexed message for every
kind of malformed graph (checked before anything runs)."""
from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember.runtime.graph_format import (
    GRAPH_FORMAT_VERSION,
    Entry,
    Graph,
    GraphFormatError,
    Node,
    parse_graph,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testlib import graph, mlp_graph, op, var  # noqa: E402


def test_parse_hand_written_graph():
    g = parse_graph(json.dumps(mlp_graph()))
    assert g.input_names == ["x", "w", "b"] and g.num_entries == 7
    assert g.nodes[3].func_name == "k_matmul" and g.nodes[3].inputs == [Entry(0), Entry(1)]
    assert g.heads == [Entry(6)] and g.storage_id[6] == 4 and g.shape[3] == (2, 4)
    assert g.nbytes(3) == 32 and g.entry_id(Entry(6)) == 6


def test_to_json_writes_the_standard_layout_and_round_trips():
    nodes = [Node("null", "x"), Node("tvm_op", "f", [Entry(0)], func_name="fused_relu",
                                     extra_attrs={"hash": "abc"})]
    g = Graph(nodes, [0], [Entry(1)], [0, 1], [(4,), (4,)], ["float32", "float32"])
    text = g.to_json()
    data = json.loads(text)
    assert data["nodes"][1]["attrs"] == {"func_name": "fused_relu", "num_inputs": "1",
                                         "num_outputs": "1", "flatten_data": "0", "hash": "abc"}
    assert data["node_row_ptr"] == [0, 1, 2] and data["heads"] == [[1, 0, 0]]
    assert data["attrs"]["format_version"] == ["size_t", 1]  # no storage_offset
    assert data["attrs"]["shape"] == ["list_shape", [[4], [4]]]
    again = parse_graph(text)
    assert again.to_json() == text and again.nodes[1].extra_attrs == {"hash": "abc"}


def test_to_json_refuses_an_invalid_graph():
    g = Graph([Node("null", "x")], [0], [Entry(3)], [0], [(1,)], ["float32"])
    with pytest.raises(GraphFormatError, match=r"heads\[0\]: node 3 out of range"):
        g.to_json()


def test_integer_attrs_and_two_element_entries_are_accepted():
    g = mlp_graph()
    g["nodes"][3]["attrs"]["num_outputs"] = 1
    g["nodes"][3]["inputs"] = [[0, 0], [1, 0]]
    del g["node_row_ptr"]
    assert parse_graph(g).nodes[3].inputs == [Entry(0), Entry(1)]


def _edit(path: str, value: Any) -> Callable[[dict], None]:
    """Set the item at a dotted path (ints index lists); value DELETE removes it."""
    def apply(g: dict) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        target = g
        for k in keys[:-1]:
            target = target[k]
        if value is DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return apply


DELETE = object()
BAD = [
    (lambda g: "{not json", r"graph json: not valid JSON"),
    (lambda g: [1, 2], r"expected a JSON object at the top level, got list"),
    (_edit("heads", DELETE), r"missing the 'heads' field"),
    (_edit("nodes", {}), r"graph json: nodes: expected a list, got dict"),
    (_edit("nodes.3", 7), r"nodes\[3\]: expected an object, got int"),
    (_edit("nodes.3.op", "conv"), r"nodes\[3\]\.op: expected 'null' or 'tvm_op', got 'conv'"),
    (_edit("nodes.0.name", ""), r"nodes\[0\]\.name: expected a non-empty string"),
    (_edit("nodes.0.inputs", [[1, 0, 0]]), r"nodes\[0\]\.inputs: an input node"),
    (_edit("nodes.3.attrs", DELETE), r"nodes\[3\]\.attrs: a tvm_op node needs an attrs object"),
    (_edit("nodes.4.attrs.func_name", 5), r"nodes\[4\]\.attrs\.func_name: expected a non-empty"),
    (_edit("nodes.4.attrs.num_outputs", "two"),
     r"nodes\[4\]\.attrs\.num_outputs: expected an integer, got 'two'"),
    (_edit("nodes.4.attrs.num_outputs", "0"), r"num_outputs: expected an integer >= 1, got 0"),
    (_edit("nodes.6.inputs.1", [12, 0, 0]),
     r"graph json: nodes\[6\]\.inputs\[1\]: node 12 out of range \(graph has 7 nodes\)"),
    (_edit("nodes.3.inputs.0", [5, 0, 0]), r"nodes\[3\]\.inputs\[0\]: node 5 is not before"),
    (_edit("nodes.5.inputs.0", [4, 1, 0]),
     (r"nodes\[5\]\.inputs\[0\]: output 1 of node 4 \('add_bias'\) out of range \(it has 1 "
      r"output\)")),
    (_edit("nodes.5.inputs.0", [4]), r"nodes\[5\]\.inputs\[0\]: expected \[node_id, index"),
    (_edit("nodes.5.inputs.0", [-1, 0, 0]), r"inputs\[0\]: expected an integer >= 0, got -1"),
    (_edit("nodes.5.attrs.num_inputs", "2"), r"nodes\[5\]\.attrs\.num_inputs: says 2 but the node"),
    (_edit("arg_nodes", [0, 1, 9]), r"arg_nodes\[2\]: node 9 out of range"),
    (_edit("arg_nodes", [0, 1, 3]), r"arg_nodes\[2\]: node 3 \('mm'\) is a tvm_op"),
    (_edit("arg_nodes", [0, 1]), r"nodes\[2\]: input node 'b' is not listed in arg_nodes"),
    (_edit("nodes.1.name", "x"), r"arg_nodes\[1\]: two inputs named 'x' \(nodes 0 and 1\)"),
    (_edit("heads.0", [6, 2, 0]), r"heads\[0\]: output 2 of node 6"),
    (_edit("node_row_ptr", [0, 1, 2, 3, 4, 5, 6, 8]), r"node_row_ptr: .* disagrees"),
    (_edit("attrs", []), r"attrs: expected an object, got list"),
    (_edit("attrs.storage_id", DELETE), r"attrs\.storage_id: missing"),
    (_edit("attrs.storage_id.1", [0, 1]), r"attrs\.storage_id: has 2 values but the graph has 7"),
    (_edit("attrs.shape.0", "list_int"), r"attrs\.shape: expected \[\"list_shape\""),
    (_edit("attrs.shape.1.2", [3, -4]), r"attrs\.shape\[1\]\[2\]\[1\]: expected an integer >= 0"),
    (_edit("attrs.dltype.1.3", "float33"), r"attrs\.dltype\[1\]\[3\]: unknown dtype 'float33'"),
    (_edit("attrs.device_index", ["list_int", [1, 1, 1, 2, 1, 1, 1]]),
     r"attrs\.device_index\[1\]\[3\]: device type 2 is not supported"),
    (_edit("attrs.format_version", ["size_t", GRAPH_FORMAT_VERSION + 1]),
     r"attrs\.format_version: is 4; this runtime reads versions 1 to 3"),
    (_edit("attrs.storage_id.1", [0, 1, 2, 3, 4, 5, 0]),
     (r"attrs\.storage_id\[1\]\[6\]: storage 0 of graph input 'x' is also used by entry 6 "
      r"\('residual'\)")),
]


@pytest.mark.parametrize("mutate, message", BAD, ids=[m for _, m in BAD])
def test_malformed_graphs_are_rejected_with_the_path(mutate, message):
    g = copy.deepcopy(mlp_graph())
    result = mutate(g)  # edits g in place, or returns the source to parse instead
    source = result if isinstance(result, str) else json.dumps(g if result is None else result)
    with pytest.raises(GraphFormatError, match=message) as info:
        parse_graph(source)
    assert isinstance(info.value, ember.TVMError) and isinstance(info.value, ValueError)


def _nop_graph(nop_sid: int, nop_shape: list[int]) -> dict:
    nodes = [var("x"), op("relu", "k_relu", [[0, 0, 0]]), op("r", "__nop", [[1, 0, 0]])]
    return graph(nodes, [[2, 0, 0]], [0, 1, nop_sid], [[4], [4], nop_shape])


def test_nop_must_alias_its_input():
    parse_graph(_nop_graph(1, [2, 2]))
    with pytest.raises(GraphFormatError, match=r"nodes\[2\]: __nop node 'r' must alias its input: "
                                               r"its output uses storage 2, its input storage 1"):
        parse_graph(_nop_graph(2, [2, 2]))
    with pytest.raises(GraphFormatError, match="outputs 32 bytes from an input of 16 bytes"):
        parse_graph(_nop_graph(1, [8]))
    g = _nop_graph(1, [4])
    g["nodes"][2]["inputs"].append([0, 0, 0])
    g["nodes"][2]["attrs"]["num_inputs"] = "2"
    with pytest.raises(GraphFormatError, match=r"must alias input 1: its output uses storage 1, "
                                               r"input 1 storage 0"):
        parse_graph(g)
    g["nodes"][2]["inputs"] = []
    g["nodes"][2]["attrs"]["num_inputs"] = "0"
    with pytest.raises(GraphFormatError, match="a __nop node must have inputs and one output"):
        parse_graph(g)


def test_nop_view_of_an_input_may_share_its_storage():
    nodes = [var("x"), op("r", "__nop", [[0, 0, 0]])]
    parse_graph(graph(nodes, [[1, 0, 0]], [0, 0], [[4], [2, 2]]))


@given(st.lists(st.integers(0, 2), min_size=1, max_size=12), st.sampled_from(["float32", "int8",
                                                                              "float16"]))
def test_chain_graphs_round_trip(kinds, dtype):
    """parse(to_json(g)) is g for chains of one- and two-input ops and __nop views."""
    nodes, sids, shapes = [Node("null", "in")], [0], [(3, 2)]
    for i, kind in enumerate(kinds):
        prev = Entry(len(nodes) - 1)
        if kind == 2:
            nodes.append(Node("tvm_op", f"view{i}", [prev], func_name="__nop"))
            sids.append(sids[-1])
            shapes.append(tuple(reversed(shapes[-1])))
        else:
            nodes.append(Node("tvm_op", f"op{i}", [prev] * (kind + 1), func_name=f"f{kind}"))
            sids.append(len(nodes))
            shapes.append(shapes[-1])
    g = Graph(nodes, [0], [Entry(len(nodes) - 1)], sids, shapes, [dtype] * len(nodes))
    again = parse_graph(g.to_json())
    assert again.to_dict() == g.to_dict()


# -- storage_offset: concatenations written in place ----------------------------------------
def _concat_graph(offsets: list[int] | None, shapes=None) -> dict:
    """x -> a [2], b [3] (kernels) -> cat [5] = a, b end to end (a __nop with two inputs)."""
    nodes = [var("x"), op("a", "k_a", [[0, 0, 0]]), op("b", "k_b", [[0, 0, 0]]),
             op("cat", "__nop", [[1, 0, 0], [2, 0, 0]])]
    g = graph(nodes, [[3, 0, 0]], [0, 1, 1, 1], shapes or [[4], [2], [3], [5]])
    if offsets is not None:
        g["attrs"]["storage_offset"] = ["list_int", offsets]
    return g


def test_storage_offset_round_trips_and_is_optional():
    g = parse_graph(json.dumps(_concat_graph([0, 0, 8, 0])))
    assert g.storage_offset == [0, 0, 8, 0] and g.offset(2) == 8
    assert g.storage_bytes() == {0: 16, 1: 20}
    again = parse_graph(g.to_json())
    assert again.storage_offset == [0, 0, 8, 0]
    assert json.loads(g.to_json())["attrs"]["format_version"] == ["size_t", 2]
    assert parse_graph(json.dumps(mlp_graph())).storage_offset is None  # absent: all 0


@pytest.mark.parametrize("offsets, message", [
    ([0, 4, 8, 0], r"nodes\[3\]: __nop node 'cat': input 0 is at byte 4 of storage 1, "
                   r"expected 0 \(the inputs laid end to end from the output's offset\)"),
    ([0, 0, 6, 0], r"attrs\.storage_offset\[1\]\[2\]: entry 2 \('b'\) starts 6 bytes into "
                   r"storage 1, not a multiple of its element size \(4 bytes, float32\)"),
    ([0, 0, 1 << 20, 0], r"attrs\.storage_offset\[1\]\[2\]: entry 2 \('b'\) at bytes "
                         r"\[1048576, 1048588\) runs past the end of storage 1 \(20 bytes"),
    ([0, 0, -8, 0], r"attrs\.storage_offset\[1\]\[2\]: expected an integer >= 0, got -8"),
    ([0, 0, 8], r"attrs\.storage_offset: has 3 values but the graph has 4 entries"),
])
def test_bad_storage_offset_is_named(offsets, message):
    with pytest.raises(GraphFormatError, match=message):
        parse_graph(json.dumps(_concat_graph(offsets)))


def test_concat_nop_inputs_must_fill_its_output():
    with pytest.raises(GraphFormatError, match=r"__nop node 'cat': its inputs hold 20 bytes, "
                                               r"its output 24"):
        parse_graph(json.dumps(_concat_graph([0, 0, 8, 0], [[4], [2], [3], [6]])))


def test_view_nop_lies_within_its_input():
    """A one-input __nop at an offset is a slice of its input's bytes."""
    nodes = [var("x"), op("a", "k_a", [[0, 0, 0]]), op("v", "__nop", [[1, 0, 0]])]
    good = graph(nodes, [[2, 0, 0]], [0, 1, 1], [[4], [6], [2]])
    good["attrs"]["storage_offset"] = ["list_int", [0, 0, 16]]
    assert parse_graph(json.dumps(good)).offset(2) == 16
    bad = graph(nodes + [op("b", "k_b", [[2, 0, 0]])], [[3, 0, 0]], [0, 1, 1, 1],
                [[4], [6], [2], [10]])  # storage 1 holds 40 bytes (b)
    bad["attrs"]["storage_offset"] = ["list_int", [0, 0, 20, 0]]
    with pytest.raises(GraphFormatError, match=r"nodes\[2\]: __nop node 'v' outputs 8 bytes "
                                               r"from an input of 24 bytes at offset 20"):
        parse_graph(json.dumps(bad))


# -- storage_size: storages larger than their largest entry at offset 0 ----------------------
def _arena_graph(sizes: list[int] | None, offsets=(0, 0, 16, 0)) -> dict:
    """x [4] -> a [4] -> b [4] -> c [4]: a at byte 0 of storage 1, b at byte 16 (an arena of
    32 bytes; its largest entry at offset 0 has 16), c (the output) in storage 2."""
    nodes = [var("x"), op("a", "k", [[0, 0, 0]]), op("b", "k", [[1, 0, 0]]),
             op("c", "k", [[2, 0, 0]])]
    g = graph(nodes, [[3, 0, 0]], [0, 1, 1, 2], [[4]] * 4)
    g["attrs"]["storage_offset"] = ["list_int", list(offsets)]
    if sizes is not None:
        g["attrs"]["storage_size"] = ["list_int", sizes]
    return g


def test_storage_size_round_trips_and_sizes_the_storages():
    g = parse_graph(json.dumps(_arena_graph([16, 32, 16])))
    assert g.storage_size == [16, 32, 16]
    assert g.storage_bytes() == {0: 16, 1: 32, 2: 16}
    text = g.to_json()
    assert json.loads(text)["attrs"]["format_version"] == ["size_t", 3]
    assert parse_graph(text).storage_size == [16, 32, 16]


def test_storage_size_may_be_larger_than_its_entries():
    assert parse_graph(json.dumps(_arena_graph([16, 4096, 16]))).storage_bytes()[1] == 4096


def test_without_storage_size_a_storage_is_its_largest_entry_at_offset_0():
    """TVM's graphs (and ember's before format 3): b at 16 does not fit storage 1's 16."""
    with pytest.raises(GraphFormatError, match=r"attrs\.storage_offset\[1\]\[2\]: entry 2 "
                       r"\('b'\) at bytes \[16, 32\) runs past the end of storage 1 \(16 bytes"):
        parse_graph(json.dumps(_arena_graph(None)))
    assert parse_graph(json.dumps(_arena_graph(None, (0, 0, 0, 0)))).storage_bytes() == {
        0: 16, 1: 16, 2: 16}


@pytest.mark.parametrize("sizes, message", [
    ([16, 24, 16], r"attrs\.storage_size\[1\]\[1\]: storage 1 is 24 bytes, too small for "
                   r"entry 2 \('b'\), float32\[4\] at bytes \[16, 32\)"),
    ([16, 32, 8], r"attrs\.storage_size\[1\]\[2\]: storage 2 is 8 bytes, too small for "
                  r"entry 3 \('c'\), float32\[4\] at bytes \[0, 16\)"),
    ([16, 32, -1], r"attrs\.storage_size\[1\]\[2\]: expected an integer >= 0, got -1"),
    ([16, 32], r"attrs\.storage_size: has 2 values but the graph has 3 storage ids"),
    ([16, 32, 16, 16], r"attrs\.storage_size: has 4 values but the graph has 3 storage ids"),
    ([16, "x", 16], r"attrs\.storage_size\[1\]\[1\]: expected an integer, got 'x'"),
])
def test_bad_storage_size_is_named(sizes, message):
    with pytest.raises(GraphFormatError, match=message):
        parse_graph(json.dumps(_arena_graph(sizes)))


def test_storage_size_of_the_wrong_kind_is_named():
    g = _arena_graph(None)
    g["attrs"]["storage_size"] = ["list_shape", [16, 32, 16]]
    with pytest.raises(GraphFormatError, match=r"attrs\.storage_size: expected \[\"list_int\""):
        parse_graph(json.dumps(g))
