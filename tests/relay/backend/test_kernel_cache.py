"""Lowered kernels cached on disk (relay.backend.kernel_cache): a rebuild skips lowering and
gives byte-identical artifacts; the key follows the function, the CPU and the settings."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.backend import Executor, kernel_cache, te_compiler

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler")


def conv_model():
    x = relay.var("x", shape=(1, 3, 9, 9))
    w = relay.const(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32"))
    b = relay.const(np.arange(4, dtype="float32"))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, padding=(1, 1)), b))
    z = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    return ember.IRModule.from_expr(relay.Function([x], relay.sum(z, axis=[1]) * relay.const(.5)))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EMBER_KERNEL_CACHE", raising=False)
    return tmp_path / "cache"


def _count_lowerings(monkeypatch) -> list[int]:
    calls = [0]
    original = te_compiler._lower_graph

    def counting(*args):
        calls[0] += 1
        return original(*args)

    monkeypatch.setattr(te_compiler, "_lower_graph", counting)
    return calls


@requires_cc
@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_rebuild_uses_the_cache_and_is_byte_identical(executor, fresh_cache, tmp_path,
                                                      monkeypatch):
    calls = _count_lowerings(monkeypatch)
    first = relay.build(conv_model(), "llvm", executor=Executor(executor))
    lowered = calls[0]
    assert lowered > 0 and list((fresh_cache / "kernels").rglob("*.pickle"))
    second = relay.build(conv_model(), "llvm", executor=Executor(executor))
    assert calls[0] == lowered  # nothing lowered again
    assert second.get_lib().get_source() == first.get_lib().get_source()
    first.export_library(tmp_path / "a.so")
    second.export_library(tmp_path / "b.so")
    monkeypatch.setenv("EMBER_KERNEL_CACHE", "0")
    third = relay.build(conv_model(), "llvm", executor=Executor(executor))
    assert calls[0] == 2 * lowered  # the cache off: lowered again, same C
    assert third.get_lib().get_source() == first.get_lib().get_source()
    third.export_library(tmp_path / "c.so")
    data = (tmp_path / "a.so").read_bytes()
    assert (tmp_path / "b.so").read_bytes() == data == (tmp_path / "c.so").read_bytes()


@requires_cc
def test_cached_kernels_compute_the_same(fresh_cache):
    x = np.random.default_rng(1).standard_normal((1, 3, 9, 9)).astype("float32")
    outs = []
    for _ in range(2):
        factory = relay.build(conv_model(), "llvm")
        gmod = ember.contrib.graph_executor.GraphModule(factory["default"](ember.cpu()))
        gmod.set_input(0, x)
        gmod.run()
        outs.append(gmod.get_output(0).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


def test_key_follows_cpu_settings_and_function(fresh_cache, monkeypatch):
    base = kernel_cache.kernel_key(1, "fn", "llvm", "avx2:-march=native")
    assert kernel_cache.kernel_key(1, "fn", "llvm", "avx512:-march=skylake-avx512") != base
    assert kernel_cache.kernel_key(2, "fn", "llvm", "avx2:-march=native") != base
    assert kernel_cache.kernel_key(1, "fn2", "llvm", "avx2:-march=native") != base
    monkeypatch.setenv("EMBER_VECTOR_BYTES", "16")
    assert kernel_cache.kernel_key(1, "fn", "llvm", "avx2:-march=native") != base
    monkeypatch.delenv("EMBER_VECTOR_BYTES")
    with ember.transform.PassContext(opt_level=3, config={"relay.some.option": True}):
        assert kernel_cache.kernel_key(1, "fn", "llvm", "avx2:-march=native") != base
    assert kernel_cache.kernel_key(1, "fn", "llvm", "avx2:-march=native") == base


def test_corrupt_entries_are_misses(fresh_cache, monkeypatch):
    calls = _count_lowerings(monkeypatch)
    func = relay.transform.FuseOps()(relay.transform.InferType()(conv_model()))
    te_compiler.lower_module(func, "llvm")
    n = calls[0]
    for entry in (fresh_cache / "kernels").rglob("*.pickle"):
        entry.write_bytes(b"not a pickle")
    _, lib = te_compiler.lower_module(func, "llvm")
    assert calls[0] == 2 * n and lib.code


def test_target_cpu_changes_the_kernels_flags(fresh_cache):
    func = relay.transform.FuseOps()(relay.transform.InferType()(conv_model()))
    _, lib = te_compiler.lower_module(func, "llvm -mcpu=skylake-avx512")
    assert lib.compile_options == ["-march=skylake-avx512"]
    _, lib = te_compiler.lower_module(func, "c")
    assert "-march=native" not in lib.compile_options


def test_cached_kernel_lowers_its_prim_func_again_when_asked(fresh_cache):
    from ember.tir.codegen import generate_c

    func = relay.transform.FuseOps()(relay.transform.InferType()(conv_model()))
    fresh, _ = te_compiler.lower_module(func, "llvm")
    cached, _ = te_compiler.lower_module(func, "llvm")
    for key, low in cached.items():
        if isinstance(key, str):
            continue
        assert low.kept_prim_func is None  # nothing but C came from the cache
        assert low.prim_func.name == low.name
        assert generate_c([low.prim_func]) == low.c_source == fresh[key].c_source
