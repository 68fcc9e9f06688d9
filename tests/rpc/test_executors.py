"""Executors over RPC: a graph, an AOT and a VM model exported, uploaded, loaded and run on a
loopback server (and in a LocalSession), with inputs set from the client; results compared
with the same libraries run locally (exactly) and with numpy (rtol 1e-5, atol 1e-5)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import ember as tvm
from ember import relay, rpc
from ember.contrib import graph_executor
from ember.runtime import aot_executor
from ember.runtime.container import ADT
from ember.runtime.executor import AotModule
from ember.runtime.vm import VirtualMachine
from ember.testing import requires_llvm

pytestmark = requires_llvm.marks()
TOL = {"rtol": 1e-5, "atol": 1e-5}
RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 8)).astype("float32")
W = RNG.standard_normal((4, 8)).astype("float32")
B = RNG.standard_normal(4).astype("float32")
REF = np.maximum(X @ W.T + B, 0)


def _model() -> tvm.IRModule:
    x, w, b = (relay.var("x", shape=(2, 8)), relay.var("w", shape=(4, 8)),
               relay.var("b", shape=(4,)))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
    return tvm.IRModule.from_expr(relay.Function([x, w, b], y))


def _tuple_model() -> tvm.IRModule:
    x = relay.var("x", shape=(2, 8))
    y = relay.Tuple([relay.add(x, x), relay.nn.relu(x)])
    return tvm.IRModule.from_expr(relay.Function([x], y))


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Exported libraries (paths) and the factories they came from."""
    tmp = tmp_path_factory.mktemp("rpc_libs")
    params = {"w": W, "b": B}
    graph = relay.build(_model(), "llvm", params=params)
    aot = relay.build(_model(), "llvm -executor=aot", params=params)
    linked = relay.build(_model(), "llvm", params=params,
                         executor=relay.backend.Executor("aot", {"link-params": True}))
    exe = relay.vm.compile(_model(), target="llvm")
    tup = relay.vm.compile(_tuple_model(), target="llvm")
    out = {"graph": graph, "aot": aot, "vm": exe}
    for name, mod in (("graph.so", graph), ("aot.so", aot), ("aot_linked.so", linked),
                      ("vm.so", exe.mod),
                      ("tuple_vm.so", tup.mod), ("graph.tar", graph)):
        mod.export_library(str(tmp / name))
        out[name] = str(tmp / name)
    return out


def _upload_load(session: rpc.RPCSession, path: object) -> rpc.RemoteModule:
    session.upload(str(path))
    return session.load_module(os.path.basename(str(path)))


def _local_graph(path: object) -> np.ndarray:
    m = graph_executor.GraphModule(tvm.runtime.load_module(str(path))["default"](tvm.cpu(0)))
    m.set_input("x", X)
    m.run()
    return m.get_output(0).numpy()


def test_graph_factory(session, libs):
    dev = session.cpu(0)
    rlib = _upload_load(session, libs["graph.so"])
    m = graph_executor.GraphModule(rlib["default"](dev))
    m.set_input("x", X)
    m.run()
    out = m.get_output(0)
    assert isinstance(out, rpc.RemoteNDArray) and str(out.device).startswith("remote")
    np.testing.assert_array_equal(out.numpy(), _local_graph(libs["graph.so"]))
    np.testing.assert_allclose(out.numpy(), REF, **TOL)
    m.set_input(x=tvm.nd.array(X * 2, dev))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(2 * X @ W.T + B, 0), **TOL)
    assert m.get_num_outputs() == 1 and m.get_input_index("x") == 0


def test_graph_create_from_json(session, libs):
    dev = session.cpu(0)
    rlib = _upload_load(session, libs["graph.so"])
    m = graph_executor.create(libs["graph"].get_graph_json(), rlib, dev)
    m.set_input("x", X)
    m.set_input(**libs["graph"].get_params())
    m.run()
    out = tvm.nd.empty((2, 4), "float32")
    m.get_output(0, out)
    np.testing.assert_allclose(out.numpy(), REF, **TOL)


def test_graph_input_errors_come_back(session, libs):
    m = graph_executor.GraphModule(_upload_load(session, libs["graph.so"])["default"](
        session.cpu(0)))
    with pytest.raises(ValueError, match=r"set_input\('x'\): expected float32\[2, 8\], got "
                                         r"float64\[2, 8\]"):
        m.set_input("x", X.astype("float64"))
    with pytest.raises(ValueError, match="no input named 'img'"):
        m.set_input("img", X)


def test_aot_factory_and_create(session, libs):
    dev = session.cpu(0)
    rlib = _upload_load(session, libs["aot.so"])
    m = AotModule(rlib["default"](dev))
    m.set_input("x", tvm.nd.array(X, dev))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), REF, **TOL)
    # Without the factory, the params must be linked into the library.
    direct = aot_executor.create(_upload_load(session, libs["aot_linked.so"]), dev, "default")
    direct.run(x=X)
    np.testing.assert_array_equal(direct.get_output(0).numpy(), m.get_output(0).numpy())


def test_vm(session, libs):
    dev = session.cpu(0)
    rexec = _upload_load(session, libs["vm.so"])
    vm = VirtualMachine(rexec, dev)
    out = vm.invoke("main", tvm.nd.array(X, dev), W, B)
    local = VirtualMachine(libs["vm"], tvm.cpu(0)).invoke("main", X, W, B).numpy()
    np.testing.assert_array_equal(out.numpy(), local)
    np.testing.assert_allclose(out.numpy(), REF, **TOL)
    out = vm.run(X, b=B, w=W)  # named arguments bound on the client
    np.testing.assert_allclose(out.numpy(), REF, **TOL)
    vm.set_input("main", x=X, w=W, b=B)
    vm.invoke_stateful("main")
    np.testing.assert_allclose(vm.get_output(0).numpy(), REF, **TOL)
    with pytest.raises(tvm.TVMError, match="expected 3 arguments"):
        vm.invoke("main", X)


def test_vm_tuple_result(session, libs):
    dev = session.cpu(0)
    vm = VirtualMachine(_upload_load(session, libs["tuple_vm.so"]), dev)
    out = vm.invoke("main", X)
    assert isinstance(out, ADT) and len(out) == 2
    np.testing.assert_allclose(out[0].numpy(), X + X, **TOL)
    np.testing.assert_allclose(out[1].numpy(), np.maximum(X, 0), **TOL)


def test_time_evaluator_runs_on_the_server(session, libs):
    dev = session.cpu(0)
    m = graph_executor.GraphModule(_upload_load(session, libs["graph.so"])["default"](dev))
    m.set_input("x", X)
    result = m.module.time_evaluator("run", dev, number=3, repeat=2)()
    assert len(result.results) == 2 and result.mean > 0
    assert m.benchmark(dev, number=2, repeat=2).min > 0
    vm = VirtualMachine(_upload_load(session, libs["vm.so"]), dev)
    assert len(vm.benchmark(dev, X, W, B, number=2, repeat=3).results) == 3


def test_download_linked_module(session, libs, tmp_path: Path):
    session.upload(libs["graph.tar"])
    blob = session.download_linked_module("graph.tar")
    path = tmp_path / "linked.so"
    path.write_bytes(blob)
    np.testing.assert_allclose(_local_graph(path), REF, **TOL)
    with pytest.raises(ValueError, match="neither a library"):
        session.upload(b"x", target="a.txt")
        session.download_linked_module("a.txt")


def test_remote_module_cannot_be_exported(session, libs):
    rlib = _upload_load(session, libs["graph.so"])
    with pytest.raises(rpc.RPCError, match="cannot be exported"):
        rlib.export_library("x.so")
    with pytest.raises(AttributeError, match="has no function named 'nope'"):
        rlib["nope"]
