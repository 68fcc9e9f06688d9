"""Graph executor: hand-written graphs over a small C kernel library, checked against numpy;
storage sharing, __nop aliases, the input/output interface and every bad input."""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.contrib import graph_executor
from ember.runtime.graph_executor import GraphExecutor, GraphModule, create
from ember.runtime.module import PyModule
from ember.runtime.params import save_param_dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testlib import dumps, graph, lib, mlp_graph, op, requires_cc, var

RNG = np.random.default_rng(0)


def _mlp_inputs() -> dict[str, np.ndarray]:
    return {"x": RNG.random((2, 3), dtype="float32"), "w": RNG.random((3, 4), dtype="float32"),
            "b": RNG.random((2, 4), dtype="float32") - 0.5}


def _mlp_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mm = x @ w
    return np.maximum(mm + b, 0) + mm


@pytest.fixture(scope="module")
def kernels() -> ember.runtime.Module:
    if ember.contrib.cc.get_cc() is None:
        pytest.skip("no C compiler found")
    return lib()


@pytest.fixture
def mlp(kernels) -> GraphExecutor:
    return create(dumps(mlp_graph()), kernels, ember.cpu(0))


# ---- running --------------------------------------------------------------------------------
@requires_cc
def test_mlp_matches_numpy_with_shared_storage(mlp, allclose):
    inputs = _mlp_inputs()
    mlp.set_input(**inputs)
    mlp.run()
    allclose(mlp.get_output(0).numpy(), _mlp_ref(**inputs))
    # entries 4 (add_bias) and 6 (residual) share storage id 4: one buffer, two views
    assert mlp._entries[4].data_ptr == mlp._entries[6].data_ptr
    assert len({a.data_ptr for a in mlp._entries}) == 6


@requires_cc
def test_run_with_inputs_and_module_functions(mlp, allclose):
    inputs = _mlp_inputs()
    mlp.run(**inputs)
    first = mlp.get_output(0).numpy()
    allclose(first, _mlp_ref(**inputs))
    x2 = RNG.random((2, 3), dtype="float32")
    mlp["set_input"]("x", ember.nd.array(x2))
    mlp["run"]()
    assert mlp["get_num_outputs"]() == 1 and mlp["get_num_inputs"]() == 3
    allclose(mlp["get_output"](0).numpy(), _mlp_ref(x2, inputs["w"], inputs["b"]))


@requires_cc
def test_nop_aliases_its_input_storage(kernels, allclose):
    nodes = [var("x"), var("y"), op("relu", "k_relu", [[0, 0, 0]]),
             op("reshape", "__nop", [[2, 0, 0]]), op("add", "k_add", [[3, 0, 0], [1, 0, 0]])]
    g = graph(nodes, [[4, 0, 0]], [0, 1, 2, 2, 3], [[4], [2, 2], [4], [2, 2], [2, 2]])
    m = create(dumps(g), kernels)
    x, y = RNG.standard_normal(4).astype("float32"), RNG.random((2, 2), dtype="float32")
    m.run(x=x, y=y)
    allclose(m.get_output(0).numpy(), np.maximum(x, 0).reshape(2, 2) + y)
    assert m._entries[2].data_ptr == m._entries[3].data_ptr


@requires_cc
def test_multi_output_node_and_two_heads(kernels):
    nodes = [var("x"), op("halves", "k_halves", [[0, 0, 0]], num_outputs=2),
             op("relu", "k_relu", [[1, 1, 0]])]
    g = graph(nodes, [[1, 0, 0], [2, 0, 0]], [0, 1, 2, 3], [[6], [3], [3], [3]])
    m = create(dumps(g), kernels)
    x = np.array([1, -2, 3, -4, 5, -6], "float32")
    m.run(x=x)
    assert m.get_num_outputs() == 2
    np.testing.assert_array_equal(m.get_output(0).numpy(), x[:3])
    np.testing.assert_array_equal(m.get_output(1).numpy(), np.maximum(x[3:], 0))
    out = ember.nd.empty((3,), "float32")
    assert m.get_output(1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), [0, 5, 0])


@requires_cc
def test_flatten_data_passes_1d_tensors(kernels):
    nodes = [var("x"), op("copy", "k_ndim1", [[0, 0, 0]], flatten=1)]
    m = create(dumps(graph(nodes, [[1, 0, 0]], [0, 1], [[2, 3], [2, 3]])), kernels)
    x = RNG.random((2, 3), dtype="float32")
    m.run(x=x)
    np.testing.assert_array_equal(m.get_output(0).numpy(), x)
    nodes[1] = op("copy", "k_ndim1", [[0, 0, 0]])
    m2 = create(dumps(graph(nodes, [[1, 0, 0]], [0, 1], [[2, 3], [2, 3]])), kernels)
    with pytest.raises(ember.TVMError, match="k_ndim1: expected ndim 1, got 2"):
        m2.run(x=x)


def _py_lib() -> PyModule:
    def add(a, b, out):
        out.copyfrom(a.numpy() + b.numpy())

    def relu(x, out):
        out.copyfrom(np.maximum(x.numpy(), 0))

    return PyModule({"k_add": add, "k_relu": relu})


def test_python_kernels_run_without_a_compiler():
    nodes = [var("a"), var("b"), op("add", "k_add", [[0, 0, 0], [1, 0, 0]]),
             op("relu", "k_relu", [[2, 0, 0]])]
    m = create(dumps(graph(nodes, [[3, 0, 0]], [0, 1, 2, 3], [[3]] * 4)), _py_lib())
    m.run(a=[1.0, -5.0, 2.0], b=np.ones(3, "float32"))
    np.testing.assert_array_equal(m.get_output(0).numpy(), [2, 0, 3])


def test_zero_size_tensors():
    nodes = [var("a"), var("b"), op("add", "k_add", [[0, 0, 0], [1, 0, 0]])]
    m = create(dumps(graph(nodes, [[2, 0, 0]], [0, 1, 2], [[0, 3]] * 3)), _py_lib())
    m.run(a=np.zeros((0, 3), "float32"), b=np.zeros((0, 3), "float32"))
    assert m.get_output(0).shape == (0, 3)


# ---- inputs, params -------------------------------------------------------------------------
@requires_cc
def test_input_lookup_and_info(mlp):
    assert [mlp.get_input_index(n) for n in ("x", "w", "b", "img")] == [0, 1, 2, -1]
    x = RNG.random((2, 3), dtype="float32")
    mlp.set_input(0, x)
    np.testing.assert_array_equal(mlp.get_input("x").numpy(), x)
    np.testing.assert_array_equal(mlp.get_input(0).numpy(), x)
    shapes, dtypes = mlp.get_input_info()
    assert shapes == {"x": (2, 3), "w": (3, 4), "b": (2, 4)} and set(dtypes.values()) == {"float32"}
    mlp.load_params(save_param_dict({"w": _mlp_inputs()["w"]}))
    assert list(mlp.get_input_info()[0]) == ["x", "b"]  # loaded params are not user inputs
    assert mlp.get_output_info() == ({"output_0": (2, 4)}, {"output_0": "float32"})


@requires_cc
def test_load_params_and_share_params(kernels, allclose):
    inputs = _mlp_inputs()
    blob = save_param_dict({"w": inputs["w"], "b": inputs["b"]})
    a = create(dumps(mlp_graph()), kernels)
    a.load_params(blob)
    b = create(dumps(mlp_graph()), kernels)
    b.share_params(GraphModule(a), blob)
    b.run(x=inputs["x"])
    allclose(b.get_output(0).numpy(), _mlp_ref(**inputs))
    a.set_input("w", np.zeros((3, 4), "float32"))  # shared memory: b sees the change
    b.run()
    allclose(b.get_output(0).numpy(), np.maximum(inputs["b"], 0))
    with pytest.raises(TypeError, match="share_params: expected a graph executor, got dict"):
        b.share_params({}, blob)


@requires_cc
@pytest.mark.parametrize("call, message", [
    (lambda m: m.set_input("img", np.zeros((2, 3), "float32")),
     r"set_input: no input named 'img'; this model's inputs are 'x', 'w', 'b'"),
    (lambda m: m.set_input("x", np.zeros((2, 3), "float64")),
     r"set_input\('x'\): expected float32\[2, 3\], got float64\[2, 3\]"),
    (lambda m: m.set_input("x", ember.nd.array(np.zeros((3, 2), "float32"))),
     r"set_input\('x'\): expected float32\[2, 3\], got float32\[3, 2\]"),
    (lambda m: m.set_input("x", [[1.0, 2.0]]),
     r"set_input\('x'\): expected float32\[2, 3\], got float32\[1, 2\]"),
    (lambda m: m.set_input(x=np.zeros(6, "float32")),
     r"set_input\('x'\): expected float32\[2, 3\], got float32\[6\]"),
    (lambda m: m.run(image=np.zeros((2, 3), "float32")), "no input named 'image'"),
    (lambda m: m.set_input("x", "zeros"), r"set_input\('x'\): expected an array \(NDArray, "
                                          r"numpy array, number or nested list\) for "
                                          r"float32\[2, 3\], got str \(input 0 of 3\)"),
    (lambda m: m.load_params({"bias": np.zeros(4, "float32")}), "no input named 'bias'"),
])
def test_bad_inputs(mlp, call, message):
    with pytest.raises(ember.TVMError, match=message) as info:
        call(mlp)
    assert isinstance(info.value, (ValueError, TypeError))  # TypeError: not an array at all


@requires_cc
def test_index_errors_name_the_count(mlp):
    with pytest.raises(IndexError, match=r"get_output: index 1 out of range \(this model has 1 "
                                         r"output\)"):
        mlp.get_output(1)
    with pytest.raises(ember.TVMError, match="index -1 out of range"):
        mlp.get_output(-1)
    with pytest.raises(IndexError, match=r"set_input: input index 3 out of range \(this model "
                                         r"has 3 inputs\)"):
        mlp.set_input(3, np.zeros(1))
    with pytest.raises(TypeError, match="get_output: index must be an int, got str"):
        mlp.get_output("0")
    with pytest.raises(TypeError, match="inputs are named by str or int, got float"):
        mlp.get_input(1.0)


# ---- creation errors ------------------------------------------------------------------------
@requires_cc
def test_missing_kernel_fails_at_create_time(kernels):
    nodes = [var("x"), op("softmax", "k_softmax", [[0, 0, 0]])]
    with pytest.raises(ember.TVMError, match=r"nodes\[1\] \('softmax'\) calls 'k_softmax', "
                                             r"which is not in Module\(c"):
        create(dumps(graph(nodes, [[1, 0, 0]], [0, 1], [[4], [4]])), kernels)


@requires_cc
def test_kernel_error_at_run_time_names_the_node(kernels):
    nodes = [var("x"), op("check", "k_positive", [[0, 0, 0]])]
    m = create(dumps(graph(nodes, [[1, 0, 0]], [0, 1], [[2], [2]])), kernels)
    m.run(x=np.array([1, 2], "float32"))
    with pytest.raises(ember.TVMError, match="k_positive: x\\[0\\] is negative") as info:
        m.run(x=np.array([-1, 2], "float32"))
    assert "while running graph node nodes[1] ('check')" in info.value.__notes__


def test_bad_lib_and_devices():
    g = dumps(graph([var("x")], [[0, 0, 0]], [0], [[1]]))
    with pytest.raises(TypeError, match="lib must be a Module, got dict"):
        create(g, {})
    with pytest.raises(ember.TVMError, match="runs on one device, got 2"):
        create(g, _py_lib(), [ember.cpu(0), ember.cpu(1)])
    with pytest.raises(ember.TVMError):
        create(g, _py_lib(), ember.cuda(0))
    m = create(g, _py_lib(), [ember.cpu(0)])  # an input-only graph: the output is the input
    m.run(x=[3.0])
    assert m.get_output(0).numpy().tolist() == [3.0]


# ---- wrappers, benchmark --------------------------------------------------------------------
@requires_cc
def test_contrib_create_and_graph_module(kernels, allclose):
    gm = graph_executor.create(dumps(mlp_graph()), kernels, ember.cpu(0))
    assert isinstance(gm, GraphModule) and isinstance(gm.module, GraphExecutor)
    inputs = _mlp_inputs()
    gm.set_input(**inputs)
    gm.run()
    allclose(gm.get_output(0).numpy(), _mlp_ref(**inputs))
    assert GraphModule(gm).module is gm.module
    assert gm["get_num_outputs"]() == 1
    with pytest.raises(TypeError, match="expected a graph executor Module, got int"):
        GraphModule(3)
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        gm.nonexistent  # noqa: B018


@requires_cc
def test_benchmark(mlp):
    inputs = _mlp_inputs()
    result = mlp.benchmark(ember.cpu(0), repeat=3, number=2, **inputs)
    assert len(result.results) == 3 and result.min <= result.mean <= result.max
    assert "mean (ms)" in str(result)
    e2e = mlp.benchmark(ember.cpu(0), repeat=2, number=1, end_to_end=True, **inputs)
    assert len(e2e.results) == 2
    outs = mlp.run_from_inputs(1, 0, "x", ember.nd.array(inputs["x"]))
    np.testing.assert_allclose(outs[0].numpy(), mlp.get_output(0).numpy())


# ---- a law: any valid storage plan gives numpy's result --------------------------------------
def _plan_storage(nodes: list[dict], n_inputs: int, heads: set[int]) -> list[int]:
    """Greedy reuse: an intermediate's storage is freed after its last reader (once, even
    when that reader takes it twice, as ``add(n, n)`` does)."""
    last_use = {i: i for i in range(len(nodes))}
    for i, node in enumerate(nodes):
        for nid, _, _ in node["inputs"]:
            last_use[nid] = i
    sids, free, next_sid = [], [], 0
    for i in range(len(nodes)):
        if i >= n_inputs and free:
            sids.append(free.pop())
        else:
            sids.append(next_sid)
            next_sid += 1
        for nid in dict.fromkeys(nid for nid, _, _ in nodes[i]["inputs"]):  # add(x, x): once
            if last_use[nid] == i and nid >= n_inputs and nid not in heads:
                free.append(sids[nid])
    return sids


def _run_elementwise_graph(kernels: Any, nodes: list[dict], n_inputs: int) -> None:
    """Plan, run and compare with numpy a graph of k_add / k_relu nodes (last one = head)."""
    head = len(nodes) - 1
    sids = _plan_storage(nodes, n_inputs, {head})
    m = create(dumps(graph(nodes, [[head, 0, 0]], sids, [[5]] * len(nodes))), kernels)
    values = [RNG.standard_normal(5).astype("float32") for _ in range(n_inputs)]
    m.run(**{f"in{i}": v for i, v in enumerate(values)})
    for node in nodes[n_inputs:]:
        args = [values[nid] for nid, _, _ in node["inputs"]]
        values.append(args[0] + args[1] if node["attrs"]["func_name"] == "k_add"
                      else np.maximum(args[0], 0))
    np.testing.assert_allclose(m.get_output(0).numpy(), values[head], rtol=1e-6, atol=1e-6)


def test_oracle_plan_frees_a_value_read_twice_once():
    # n = relu(x); a = add(n, n) frees n once: b and c, live together, get distinct storage.
    nodes = [var("in0"), op("n", "k_relu", [[0, 0, 0]]), op("a", "k_add", [[1, 0, 0], [1, 0, 0]]),
             op("b", "k_relu", [[2, 0, 0]]), op("c", "k_add", [[2, 0, 0], [2, 0, 0]]),
             op("d", "k_add", [[3, 0, 0], [4, 0, 0]])]
    sids = _plan_storage(nodes, 1, {5})
    assert sids[3] != sids[4], sids


@requires_cc
def test_elementwise_graph_reading_one_value_twice(kernels):
    nodes = [var("in0"), op("n", "k_relu", [[0, 0, 0]]), op("a", "k_add", [[1, 0, 0], [1, 0, 0]]),
             op("b", "k_relu", [[2, 0, 0]]), op("c", "k_add", [[2, 0, 0], [2, 0, 0]]),
             op("d", "k_add", [[3, 0, 0], [4, 0, 0]])]
    _run_elementwise_graph(kernels, nodes, 1)


@requires_cc
@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_elementwise_graphs_match_numpy(kernels, data):
    n_inputs = data.draw(st.integers(1, 3))
    nodes = [var(f"in{i}") for i in range(n_inputs)]
    for i in range(data.draw(st.integers(1, 8))):
        pick = st.integers(0, len(nodes) - 1)
        if data.draw(st.booleans()):
            nodes.append(op(f"add{i}", "k_add", [[data.draw(pick), 0, 0],
                                                  [data.draw(pick), 0, 0]]))
        else:
            nodes.append(op(f"relu{i}", "k_relu", [[data.draw(pick), 0, 0]]))
    _run_elementwise_graph(kernels, nodes, n_inputs)
