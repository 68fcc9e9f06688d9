"""Executor factory modules: the factory interface, the legacy tuple form, and export_library
-> load_module (in process, as .tar, and in a fresh process with no compiler)."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember.runtime import load_module
from ember.runtime.errors import ArtifactError
from ember.runtime.executor_factory import (
    FACTORY_MAGIC,
    ExecutorFactoryModule,
    GraphExecutorFactoryModule,
)
from ember.runtime.graph_executor import GraphExecutor, GraphModule
from ember.runtime.graph_format import GraphFormatError
from ember.runtime.loaders import DSOModule
from ember.runtime.params import save_param_dict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from _graph_testlib import dumps, lib, mlp_graph, requires_cc  # noqa: E402

RNG = np.random.default_rng(1)
W = RNG.random((3, 4), dtype="float32")
B = RNG.random((2, 4), dtype="float32") - 0.5
X = RNG.random((2, 3), dtype="float32")
REF = np.maximum(X @ W + B, 0) + X @ W


def _factory(mod_name: str = "default") -> GraphExecutorFactoryModule:
    return GraphExecutorFactoryModule(dumps(mlp_graph()), lib(), mod_name, {"w": W, "b": B},
                                      target="llvm")


def _check_runs(executor: GraphExecutor) -> None:
    executor.set_input("x", X)
    executor.run()
    np.testing.assert_allclose(executor.get_output(0).numpy(), REF, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> str:
    if ember.contrib.cc.get_cc() is None:
        pytest.skip("no C compiler found")
    path = str(tmp_path_factory.mktemp("factory") / "model.so")
    _factory().export_library(path)
    return path


# ---- the interface --------------------------------------------------------------------------
@requires_cc
def test_factory_creates_executors_with_params_loaded():
    factory = _factory("my_mod")
    assert isinstance(factory, ExecutorFactoryModule) and factory.executor_kind == "graph"
    _check_runs(factory["my_mod"](ember.cpu(0)))
    _check_runs(factory["default"](ember.cpu(0)))
    gm = GraphModule(factory["my_mod"](ember.cpu(0)))
    _check_runs(gm)
    assert factory.list_module_names() == ["my_mod"]
    assert factory["list_module_names"]() == ["my_mod"]


@requires_cc
def test_factory_accessors():
    factory = _factory()
    assert factory.get_graph_json() == factory.get_executor_config() == dumps(mlp_graph())
    assert factory["get_graph_json"]() == factory.get_graph_json()
    params = factory.get_params()
    assert set(params) == {"w", "b"} and isinstance(params["w"], ember.nd.NDArray)
    np.testing.assert_array_equal(factory.get_graph_params()["b"].numpy(), B)
    assert factory.get_lib() is factory.lib and factory.lib.type_key == "c"
    graph, lib_, params = factory  # the legacy tuple form
    assert graph == factory.get_graph_json() and lib_ is factory.lib and set(params) == {"w", "b"}


@requires_cc
def test_remove_params_then_load_params():
    factory = _factory()
    bare = factory.remove_params()
    assert bare.get_params() == {} and factory.get_params() != {}
    assert factory["remove_params"]().get_params() == {}
    executor = bare["default"](ember.cpu(0))
    executor.load_params(save_param_dict(factory.get_params()))
    _check_runs(executor)


@requires_cc
def test_debug_create():
    factory = _factory()
    debug = factory["debug_create"]("default", ember.cpu(0))
    debug.set_input("x", X)
    debug.run(number=1, display=False)
    np.testing.assert_allclose(debug.get_output(0).numpy(), REF, rtol=1e-5, atol=1e-5)
    with pytest.raises(ember.TVMError, match="debug_create: no module named 'other'"):
        factory.debug_create("other", ember.cpu(0))


def test_bad_construction():
    with pytest.raises(GraphFormatError, match=r"graph json: missing the 'heads' field"):
        GraphExecutorFactoryModule('{"nodes": [], "arg_nodes": [], "attrs": {}}', None)
    with pytest.raises(TypeError, match="mod_name must be a non-empty str"):
        GraphExecutorFactoryModule(dumps(mlp_graph()), None, "")
    factory = GraphExecutorFactoryModule(dumps(mlp_graph()), None)
    with pytest.raises(ember.TVMError, match="has no kernel library"):
        factory.get_lib()


# ---- serialisation --------------------------------------------------------------------------
def _blob() -> bytes:
    return GraphExecutorFactoryModule(dumps(mlp_graph()), None, "net", {"w": W}).save_binary()


def _load(data: bytes):
    return ember.get_global_func("runtime.module.loadbinary_GraphExecutorFactory")(data)


def test_save_and_load_binary_round_trip():
    loaded = _load(_blob())
    assert isinstance(loaded, GraphExecutorFactoryModule) and loaded.libmod_name == "net"
    assert loaded.get_graph_json() == dumps(mlp_graph())
    np.testing.assert_array_equal(loaded.get_params()["w"].numpy(), W)


def _patch(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value):]


def _header_swap(data: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new)
    return data.replace(old, new, 1)


@pytest.mark.parametrize("corrupt, message", [
    (lambda d: d[:10], r"truncated: 10 bytes, the header needs 24"),
    (lambda d: _patch(d, 0, b"X"), r"bad magic"),
    (lambda d: _patch(d, 8, struct.pack("<I", 9)), r"format version 9; this runtime reads"),
    (lambda d: _patch(d, 16, struct.pack("<Q", 1 << 40)), r"truncated: header of"),
    (lambda d: d[:-5], r"truncated: section 'params' needs"),
    (lambda d: d + b"xx", r"2 unexpected trailing bytes"),
    (lambda d: _patch(d, 24, b"!"), r"corrupt header"),
    (lambda d: _header_swap(d, b'"graph"', b'"other"'), r"executor kind 'other' is not known"),
    (lambda d: _header_swap(d, b'"mod_name"', b'"mod_nome"'), r"corrupt header: missing"),
])
def test_corrupt_factory_blobs_are_rejected(corrupt, message):
    data = _blob()
    assert data.startswith(FACTORY_MAGIC)
    with pytest.raises(ArtifactError, match=f"executor factory: .*{message}"):
        _load(corrupt(data))


@requires_cc
def test_export_and_load_in_process(exported):
    loaded = load_module(exported)
    assert isinstance(loaded, GraphExecutorFactoryModule)
    assert isinstance(loaded.get_lib(), DSOModule) and loaded.target == "llvm"
    assert set(loaded.get_params()) == {"w", "b"}
    _check_runs(loaded["default"](ember.cpu(0)))
    with pytest.raises(ember.TVMError, match="already compiled library"):
        loaded.export_library(os.path.join(os.path.dirname(exported), "again.so"))


@requires_cc
def test_export_tar_round_trip(tmp_path):
    path = str(tmp_path / "model.tar")
    _factory().export_library(path)
    loaded = load_module(path)
    assert isinstance(loaded, GraphExecutorFactoryModule)
    _check_runs(loaded["default"](ember.cpu(0)))


@requires_cc
def test_exported_factory_runs_in_a_fresh_process_without_compiler(exported, tmp_path):
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "ref.npy", REF)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import ember
        from ember.contrib import graph_executor
        factory = ember.runtime.load_module({exported!r})
        module = graph_executor.GraphModule(factory["default"](ember.cpu(0)))
        module.set_input("x", np.load({str(tmp_path / "x.npy")!r}))
        module.run()
        np.testing.assert_allclose(module.get_output(0).numpy(),
                                   np.load({str(tmp_path / "ref.npy")!r}), rtol=1e-5, atol=1e-5)
        graph, lib, params = factory
        assert sorted(params) == ["b", "w"], params
        compiler = [m for m in sys.modules if m.startswith(
            ("ember.relay", "ember.ir", "ember.te", "ember.tir", "ember.topi", "ember.contrib.cc"))]
        assert not compiler, compiler
        print("OK")
    """)
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    env.update(PATH=str(empty_bin), PYTHONPATH=REPO, EMBER_CACHE_DIR=str(tmp_path / "cache"),
               HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, cwd=str(tmp_path), check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"
