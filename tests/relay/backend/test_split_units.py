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
from ember.relay.transform.alter_op_layout import plan_lanes
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
    monkeypatch.setattr(codegen, "usable_cpus", lambda: 8)


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


def _conv_model(c: int) -> tuple[ember.IRModule, dict[str, np.ndarray], list]:
    """Two convs of c channels whose tiles come from all three parts of the conv object: a 1x1
    over rows of 30 columns (the wide one-block tiles: part 1), a 3x3 on a 7x7 map (the flat
    tiles: part 2), relu; and their numpy reference."""
    rng = np.random.default_rng(c)
    w1 = rng.standard_normal((c, c, 1, 1)).astype("float32")
    w3 = rng.standard_normal((c, c, 3, 3)).astype("float32") * 0.2
    x1 = relay.var("x1", shape=(1, c, 5, 30), dtype="float32")
    x3 = relay.var("x3", shape=(1, c, 7, 7), dtype="float32")
    y1 = relay.nn.relu(relay.nn.conv2d(x1, relay.var("w1", shape=w1.shape), channels=c,
                                       kernel_size=(1, 1)))
    y3 = relay.nn.relu(relay.nn.conv2d(x3, relay.var("w3", shape=w3.shape), channels=c,
                                       kernel_size=(3, 3), padding=(1, 1)))
    fn = relay.Function(relay.analysis.free_vars(relay.Tuple([y1, y3])), relay.Tuple([y1, y3]))
    return ember.IRModule.from_expr(fn), {"w1": w1, "w3": w3}, [w1, w3]


def _conv_ref(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    h, wd = xp.shape[2] - k + 1, xp.shape[3] - k + 1
    out = np.zeros((x.shape[0], w.shape[0], h, wd), "float64")
    for ky in range(k):
        for kx in range(k):
            out += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + h, kx:kx + wd], w[:, :, ky, kx])
    return np.maximum(out, 0)


@pytest.mark.parametrize("halves", [2, 3])
def test_conv_object_in_parts_links_and_matches_numpy(halves):
    """The conv kernel object compiles as three parts (ember/kernels/linkage.h) that link
    into the model at each lane count a model here plans: the target's L lanes for L
    channels, L / 2 lanes for 3L / 2 channels (12 channels on AVX2, 24 on AVX-512)."""
    half = plan_lanes() // 2
    c, lanes = half * halves, (2 * half if halves == 2 else half)
    mod, params, (w1, w3) = _conv_model(c)
    with ember.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params)
    units = [name for name, _ in factory.get_lib().units]
    name = f"kernel_ember_conv2d_nchwc_x{lanes}"
    assert {f"{name}.c", f"{name}_part1.c", f"{name}_part2.c"} <= set(units), units
    rng = np.random.default_rng(3)
    x1 = rng.standard_normal((1, c, 5, 30)).astype("float32")
    x3 = rng.standard_normal((1, c, 7, 7)).astype("float32")
    m = factory["default"](ember.cpu(0))
    m.set_input("x1", x1)
    m.set_input("x3", x3)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), _conv_ref(x1, w1, 0), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(m.get_output(1).numpy(), _conv_ref(x3, w3, 1), rtol=1e-4,
                               atol=1e-4)
