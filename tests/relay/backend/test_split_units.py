"""A model built as several translation units plus kernel objects (codegen.split_c) gives
the same results in every executor and through export_library -> load_module, while its
``get_source`` stays one self-contained unit."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.backend import Executor
from ember.tir import codegen

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _model() -> tuple[ember.IRModule, dict[str, np.ndarray]]:
    x = relay.var("x", shape=(4, 16), dtype="float32")
    w = relay.var("w", shape=(8, 16), dtype="float32")
    y = relay.nn.softmax(relay.nn.relu(relay.nn.dense(x, w)) * relay.const(0.5))
    z = relay.nn.softmax(relay.tanh(y) + relay.const(1.0), axis=0)
    mod = ember.IRModule.from_expr(relay.Function([x, w], relay.concatenate([y, z], 0)))
    rng = np.random.default_rng(1)
    return mod, {"w": rng.standard_normal((8, 16)).astype("float32")}


def _softmax(v: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _reference(xv: np.ndarray, wv: np.ndarray) -> np.ndarray:
    y = _softmax(np.maximum(xv @ wv.T, 0) * 0.5, 1)
    return np.concatenate([y, _softmax(np.tanh(y) + 1.0, 0)], 0)


@pytest.fixture
def small_units(monkeypatch: pytest.MonkeyPatch) -> None:
    """Units of a few hundred bytes: even this small model splits into several."""
    monkeypatch.setattr(codegen, "_UNIT_BYTES", 200)
    monkeypatch.setattr(codegen.os, "cpu_count", lambda: 8)


def _run(factory, xv: np.ndarray) -> np.ndarray:
    m = factory["default"](ember.cpu(0))
    m.set_input("x", xv)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_split_build_runs_and_exports(small_units, tmp_path, executor):
    mod, params = _model()
    xv = np.random.default_rng(2).standard_normal((4, 16)).astype("float32")
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params, executor=Executor(executor))
    lib = factory.get_lib()
    units = [name for name, _ in lib.units]
    assert sum(n.startswith("lib_") for n in units) >= 2
    assert "kernel_ember_softmax.c" in units
    assert codegen.LINKED_DEFINE not in lib.get_source()  # the C export stays standalone
    want = _reference(xv, params["w"])
    np.testing.assert_allclose(_run(factory, xv), want, rtol=1e-5, atol=1e-6)
    path = tmp_path / "model.so"
    factory.export_library(str(path))
    loaded = ember.runtime.load_module(str(path))
    np.testing.assert_allclose(_run(loaded, xv), want, rtol=1e-5, atol=1e-6)


def test_split_build_runs_in_the_vm(small_units):
    mod, params = _model()
    xv = np.random.default_rng(3).standard_normal((4, 16)).astype("float32")
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
    assert sum(n.startswith("lib_") for n, _ in exe.lib.units) >= 2
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu(0))
    got = vm.invoke("main", ember.nd.array(xv)).numpy()
    np.testing.assert_allclose(got, _reference(xv, params["w"]), rtol=1e-5, atol=1e-6)


def test_lowering_starts_the_kernel_objects_in_the_background(monkeypatch):
    """As soon as a kernel that calls ember's kernels is lowered, its objects (and the
    argument checks) are handed to the compiler driver to compile while lowering goes on."""
    from ember.relay.backend import te_compiler

    seen: list[tuple[list[str], list[str]]] = []
    monkeypatch.setattr(cc, "prefetch_objects", lambda sources, options=None: seen.append(
        ([n for n, _ in sources], list(options or []))) or 0)
    x = relay.var("x", shape=(4, 16), dtype="float32")
    func = relay.Function([x], relay.nn.softmax(x)).with_attr("Primitive", 1)
    te_compiler.TECompiler().lower(func, "llvm")
    assert seen and seen[0][0] == ["kernel_ember_softmax.c", "kernel_ember_arg_checks.c"]
    assert seen[0][1] == te_compiler.arch_options("llvm")
    seen.clear()
    y = relay.var("y", shape=(4,), dtype="float32")
    te_compiler.TECompiler().lower(relay.Function([y], relay.exp(y)).with_attr("Primitive", 1),
                                   "llvm")
    assert seen == []  # no kernel called: nothing to start
