"""The debug executor: per-node timing, the per-node table, profile() reports, intermediate
outputs (also of tensors whose storage is reused later) and the dump folder."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import ember
from ember.contrib.debugger import debug_executor
from ember.runtime.debug_executor import DUMP_DIR, GraphExecutorDebug, GraphModuleDebug
from ember.runtime.params import load_param_dict
from ember.runtime.profiling import Duration, Report

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _graph_testlib import dumps, graph, lib, mlp_graph, op, requires_cc, var  # noqa: E402

RNG = np.random.default_rng(2)
INPUTS = {"x": RNG.random((2, 3), dtype="float32"), "w": RNG.random((3, 4), dtype="float32"),
          "b": RNG.random((2, 4), dtype="float32") - 0.5}
MM = INPUTS["x"] @ INPUTS["w"]
ADD = MM + INPUTS["b"]
REF = np.maximum(ADD, 0) + MM
OP_NODES = ["mm", "add_bias", "relu", "residual"]


@pytest.fixture(scope="module")
def kernels():
    if ember.contrib.cc.get_cc() is None:
        pytest.skip("no C compiler found")
    return lib()


@pytest.fixture
def dbg(kernels) -> GraphModuleDebug:
    m = debug_executor.create(dumps(mlp_graph()), kernels, ember.cpu(0))
    m.set_input(**INPUTS)
    return m


@requires_cc
def test_run_times_every_node_and_prints_the_table(dbg, capsys):
    dbg.run(number=2, repeat=2, min_repeat_ms=0)
    np.testing.assert_allclose(dbg.get_output(0).numpy(), REF, rtol=1e-5, atol=1e-5)
    table = capsys.readouterr().out
    for name in OP_NODES:
        assert name in table
    assert "Sum" in table and "Executor: Graph" in table
    assert all(len(t) == 2 and min(t) >= 0 for t in dbg.module.node_times.values())


@requires_cc
def test_run_individual(dbg):
    times = dbg.run_individual(number=1, repeat=1)
    assert len(times) == 7 and times[:3] == [0.0, 0.0, 0.0] and all(t > 0 for t in times[3:])


@requires_cc
def test_profile_report(dbg):
    report = dbg.profile()
    assert isinstance(report, Report)
    assert [c["Name"] for c in report.calls] == OP_NODES
    assert report.configuration["Executor"] == "Graph"
    assert sum(float(c["Percent"]) for c in report.calls) == pytest.approx(100)
    (metrics,) = report.device_metrics.values()
    assert isinstance(metrics["Duration (us)"], Duration)
    mm = report.calls[0]
    assert mm["Argument Shapes"] == "float32[2, 3], float32[3, 4], float32[2, 4]"
    assert mm["Count"].value == 1 and mm["Duration (us)"].microseconds > 0
    assert Report.from_json(report.json()).calls == report.calls
    table = report.table()
    assert all(name in table for name in OP_NODES)
    np.testing.assert_allclose(dbg.get_output(0).numpy(), REF, rtol=1e-5, atol=1e-5)


@requires_cc
def test_debug_get_output_of_reused_storage(dbg):
    dbg.run(number=1, display=False)  # residual has overwritten add_bias's storage
    np.testing.assert_allclose(dbg.debug_get_output("add_bias").numpy(), ADD, rtol=1e-5)
    np.testing.assert_allclose(dbg.debug_get_output(3).numpy(), MM, rtol=1e-5)
    out = ember.nd.empty((2, 4), "float32")
    assert dbg.debug_get_output("relu", out) is out
    np.testing.assert_allclose(out.numpy(), np.maximum(ADD, 0), rtol=1e-5)
    np.testing.assert_array_equal(dbg.debug_get_output("x").numpy(), INPUTS["x"])


@requires_cc
def test_dump_root(kernels, tmp_path):
    dbg = debug_executor.create(dumps(mlp_graph()), kernels, ember.cpu(0), dump_root=str(tmp_path))
    dbg.run(display=False, min_repeat_ms=0, **INPUTS)
    folder = tmp_path / DUMP_DIR
    outputs = load_param_dict((folder / "output_tensors.params").read_bytes())
    assert len(outputs) == 7
    np.testing.assert_allclose(outputs["add_bias____topo-index:4____output-num:0"].numpy(), ADD,
                               rtol=1e-5)
    trace = json.loads((folder / "_tvmdbg_execution_trace.json").read_text())
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "B"] == OP_NODES
    assert json.loads((folder / "_tvmdbg_graph_dump.json").read_text())["heads"] == [[6, 0, 0]]


@requires_cc
def test_nop_nodes_appear_in_the_table(kernels):
    nodes = [var("x"), op("relu", "k_relu", [[0, 0, 0]]), op("reshape", "__nop", [[1, 0, 0]])]
    g = graph(nodes, [[2, 0, 0]], [0, 1, 1], [[4], [4], [2, 2]])
    m = debug_executor.create(dumps(g), kernels)
    report = m.profile(x=np.array([-1, 2, -3, 4], "float32"))
    assert [c["Name"] for c in report.calls] == ["relu", "reshape"]
    assert report.calls[1]["Duration (us)"].microseconds == 0
    np.testing.assert_array_equal(m.get_output(0).numpy(), [[0, 2], [0, 4]])


@requires_cc
def test_graph_module_debug_wraps_debug_create(kernels, tmp_path):
    factory = ember.runtime.executor_factory.GraphExecutorFactoryModule(
        dumps(mlp_graph()), kernels, "default", {"w": INPUTS["w"], "b": INPUTS["b"]})
    module = factory["debug_create"]("default", ember.cpu(0))
    assert isinstance(module, GraphExecutorDebug)
    dbg = debug_executor.GraphModuleDebug(module, [ember.cpu(0)], factory.get_graph_json(),
                                          str(tmp_path))
    assert module.dump_root == str(tmp_path)
    dbg.set_input("x", INPUTS["x"])
    dbg.run(number=1, display=False)
    np.testing.assert_allclose(dbg.get_output(0).numpy(), REF, rtol=1e-5, atol=1e-5)
    assert dbg.benchmark(ember.cpu(0), repeat=2, number=1).mean > 0
    with pytest.raises(TypeError, match="expected a debug executor"):
        debug_executor.GraphModuleDebug(factory["default"](ember.cpu(0)))


@requires_cc
def test_errors(dbg, kernels):
    fresh = debug_executor.create(dumps(mlp_graph()), kernels)
    with pytest.raises(ember.TVMError, match=r"nothing measured yet; call run\(\) or profile"):
        fresh.report()
    with pytest.raises(ember.TVMError, match="no node named 'conv'"):
        dbg.debug_get_output("conv")
    with pytest.raises(IndexError, match=r"node 7 out of range \(the graph has 7 nodes\)"):
        dbg.debug_get_output(7)
    with pytest.raises(ember.TVMError, match="metric collectors are not supported"):
        dbg.profile(collectors=["PAPI"])
    with pytest.raises(ValueError, match="run: number must be >= 1, got 0"):
        dbg.run(number=0)
    with pytest.raises(TypeError, match="lib must be a Module"):
        debug_executor.create(dumps(mlp_graph()), None)


@requires_cc
def test_nodes_are_timed_by_the_executors_clock(dbg):
    """``clock`` (wall time by default; op_compare --clock thread sets time.thread_time) is
    what every node's time is read from: a clock that advances 1 s per read gives 1 s."""
    ticks = iter(range(10_000))
    dbg.module.clock = lambda: float(next(ticks))
    times = dbg.run_individual(number=1, repeat=2)
    assert times[3:] == [1.0] * 4 and times[:3] == [0.0, 0.0, 0.0]
