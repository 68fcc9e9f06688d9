"""``relay.create_executor`` and ``relay.build`` called as Relay-era scripts call them: every
executor kind with ``.evaluate()``, the legacy three-value form, a Function instead of a
module, the deprecated target options (with their messages), and the factory's methods and
Relay-era class names. Results are checked against numpy."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.contrib import graph_executor
from ember.relay.backend import executor_factory

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3)).astype("float32")
W = RNG.standard_normal((2, 3)).astype("float32")


def _func():
    x, w = relay.var("x", shape=(2, 3)), relay.var("w", shape=(2, 3))
    return relay.Function([x, w], relay.Tuple([relay.nn.relu(x + w), x * w]))


def _single():
    x, w = relay.var("x", shape=(2, 3)), relay.var("w", shape=(2, 3))
    return relay.Function([x, w], relay.nn.relu(x + w))


@pytest.mark.parametrize("kind", ["debug", "graph", "vm", "aot"])
def test_create_executor_every_kind(kind):
    mod = tvm.IRModule.from_expr(_func())
    ex = relay.create_executor(kind, mod=mod, device=tvm.cpu(0), target="llvm")
    out = ex.evaluate()(X, W)
    np.testing.assert_allclose(out[0].numpy(), np.maximum(X + W, 0), rtol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), X * W, rtol=1e-6)


@pytest.mark.parametrize("kind", ["debug", "graph", "vm", "aot"])
def test_create_executor_binds_params_and_takes_names(kind):
    mod = tvm.IRModule.from_expr(_single())
    ex = relay.create_executor(kind, mod=mod, target="llvm", params={"w": W})
    np.testing.assert_allclose(ex.evaluate()(X).numpy(), np.maximum(X + W, 0), rtol=1e-6)
    ex = relay.create_executor(kind, mod=mod, target="llvm")
    np.testing.assert_allclose(ex.evaluate()(x=X, w=W).numpy(), np.maximum(X + W, 0),
                               rtol=1e-6)


def test_evaluate_an_expression_or_a_function():
    ex = relay.create_executor()
    assert float(ex.evaluate(relay.const(1.0) + relay.const(2.0)).numpy()) == 3.0
    x = relay.var("x", shape=(2,))
    f = relay.create_executor("vm", target="llvm").evaluate(relay.Function([x], -x))
    np.testing.assert_allclose(f(np.array([1, -2], "float32")).numpy(), [-1, 2])


def test_aot_kind_accepts_the_relay_era_target_and_refuses_a_contradiction():
    mod = tvm.IRModule.from_expr(_single())
    ex = relay.create_executor("aot", mod=mod, target="llvm -executor=aot")
    np.testing.assert_allclose(ex.evaluate()(X, W).numpy(), np.maximum(X + W, 0), rtol=1e-6)
    with pytest.raises(tvm.TVMError, match=r"asks for the 'graph' executor.*create_executor"):
        relay.create_executor("aot", mod=mod, target="llvm -executor=graph").evaluate()


def test_aot_kind_refuses_dynamic_shapes_naming_the_vm():
    x = relay.var("x", shape=(relay.Any(), 3))
    mod = tvm.IRModule.from_expr(relay.Function([x], x + x))
    with pytest.raises(tvm.TVMError, match="use the VM"):
        relay.create_executor("aot", mod=mod, target="llvm").evaluate()


def test_unknown_kind_names_the_known_ones():
    with pytest.raises(tvm.TVMError, match="available kinds: 'debug', 'graph', 'aot', 'vm'"):
        relay.create_executor("jit")


def test_legacy_three_values_with_the_relay_era_warning():
    mod = tvm.IRModule.from_expr(_single())
    lib = relay.build(mod, target="llvm", params={"w": W})
    with pytest.warns(DeprecationWarning, match="legacy graph executor behavior of producing "
                                                "json / lib / params"):
        graph, lib_mod, params = lib
    assert isinstance(graph, str) and graph == lib.get_graph_json()
    with pytest.warns(DeprecationWarning):
        graph2, _, _ = lib  # unpacking twice works
    assert graph2 == graph
    m = graph_executor.create(graph, lib_mod, tvm.cpu(0))
    m.load_params(tvm.runtime.save_param_dict(params))
    m.set_input("x", X)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(X + W, 0), rtol=1e-6)


def test_build_a_function_binds_params_and_warns():
    with pytest.warns(DeprecationWarning, match=r"Please use input parameter mod \(tvm.IRModule"
                                                r"\) instead of deprecated parameter mod"):
        lib = relay.build(_single(), target="llvm", params={"w": W})
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", X)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(X + W, 0), rtol=1e-6)
    with pytest.warns(DeprecationWarning, match="deprecated parameter func"):
        relay.optimize(_single(), target="llvm")


def test_build_module_build_and_build_config():
    mod = tvm.IRModule.from_expr(_single())
    with relay.build_config(opt_level=3):
        lib = relay.build_module.build(mod, target="llvm")
    assert isinstance(lib, executor_factory.GraphExecutorFactoryModule)


@pytest.mark.parametrize("target, messages", [
    ("llvm -executor=aot", ["Please use Executor (tvm.relay.backend.Executor) instead of "
                            "deprecated Target parameter -executor"]),
    ("llvm -link-params", ["Please use Executor (tvm.relay.backend.Executor) parameter "
                           "link-params instead of deprecated Target parameter -link-params"]),
    ("c -runtime=c --system-lib", [
        "Please use Runtime (tvm.relay.backend.Runtime) instead of deprecated Target parameter "
        "-runtime",
        "Please use Runtime (tvm.relay.backend.Runtime) parameter system-lib instead of "
        "deprecated Target parameter -system-lib"]),
    ("c -executor=aot -runtime=c -interface-api=c -unpacked-api", [
        "parameter interface-api instead of deprecated Target parameter -interface-api",
        "parameter unpacked-api instead of deprecated Target parameter -unpacked-api",
        "instead of deprecated Target parameter -executor"]),
])
def test_deprecated_target_options_warn_with_relay_era_messages(target, messages):
    mod = tvm.IRModule.from_expr(_single())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        relay.build(mod, target=target)
    texts = [str(w.message) for w in caught if w.category is DeprecationWarning]
    for message in messages:
        assert any(message in t for t in texts), (message, texts)
    assert all(w.filename == __file__ for w in caught if "Target parameter" in str(w.message))


def test_plain_targets_do_not_warn():
    mod = tvm.IRModule.from_expr(_single())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        relay.build(mod, target="llvm", executor=relay.backend.Executor("aot"))


def test_factory_methods_and_relay_era_class_names(tmp_path):
    mod = tvm.IRModule.from_expr(_single())
    lib = relay.build(mod, target="llvm", params={"w": W})
    assert isinstance(lib, executor_factory.ExecutorFactoryModule)
    assert lib.get_executor_config() == lib.get_graph_json() == lib["get_graph_json"]()
    assert set(lib.get_params()) == set(lib.get_graph_params()) and len(lib.get_params()) == 1
    assert lib.get_lib() is lib.lib and lib.list_module_names() == ["default"]
    assert lib.get_devices() == [] and lib.module is lib and lib.libmod_name == "default"
    bare = lib.remove_params()
    assert bare.get_params() == {}
    debug = lib.debug_create("default", tvm.cpu(0))
    debug.set_input("x", X)
    debug.run()
    np.testing.assert_allclose(debug.get_output(0).numpy(), np.maximum(X + W, 0), rtol=1e-6)
    path = str(tmp_path / "net.so")
    lib.export_library(path)
    loaded = tvm.runtime.load_module(path)
    assert loaded.get_graph_json() == lib.get_graph_json()
    assert loaded.list_module_names() == ["default"] and loaded.get_devices() == []
    aot = relay.build(mod, target="llvm", executor=relay.backend.Executor("aot"))
    assert isinstance(aot, executor_factory.AOTExecutorFactoryModule)
    assert executor_factory.AOTExecutorFactoryModule is executor_factory.AotExecutorFactoryModule
