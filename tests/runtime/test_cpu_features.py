"""The CPU a build compiles for, the feature record every library carries, and the loader's
refusal of a library the host cannot run (ember.runtime.cpu_features, contrib.cc)."""
from __future__ import annotations

import os
import shutil
import stat

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.backend import Executor
from ember.runtime import cpu_features
from ember.runtime.errors import ArtifactError, CompileError, CpuFeatureError
from ember.target.simd import cpu_choice, host_features

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler")
no_avx512 = pytest.mark.skipif("avx512f" in host_features(),
                               reason="the host runs AVX-512 code")


def small_module() -> ember.IRModule:
    x = relay.var("x", shape=(4, 8))
    return ember.IRModule.from_expr(relay.Function([x], relay.nn.relu(x) + relay.const(1.0)))


def patched(path, tmp_path, old: bytes, new: bytes):
    """A copy of the library at ``path`` with ``old`` replaced by ``new`` (same length)."""
    assert len(old) == len(new)
    with open(path, "rb") as f:
        data = f.read()
    assert old in data
    out = tmp_path / f"patched_{len(os.listdir(tmp_path))}.so"
    out.write_bytes(data.replace(old, new))
    return str(out)


# -- one decision: target, then EMBER_MARCH, then the host ---------------------------------------
@pytest.mark.parametrize("target,flags,level", [
    ("llvm -mcpu=skylake-avx512", ("-march=skylake-avx512",), "avx512"),
    ("llvm -mcpu=haswell -mattr=-avx2", ("-march=haswell", "-mno-avx2"), "sse"),
    ("c -mcpu=cortex-m4", None, "scalar"),
])
def test_target_decides_flags_and_level_together(target, flags, level, monkeypatch):
    monkeypatch.setenv("EMBER_MARCH", "x86-64-v3")
    choice = cpu_choice(target)
    assert choice.level.name == level and choice.source == "target"
    if flags is not None:
        assert choice.arch_flags == flags


def test_env_then_host_then_portable_c(monkeypatch):
    monkeypatch.setenv("EMBER_MARCH", "x86-64-v2")
    assert cpu_choice("llvm").arch_flags == ("-march=x86-64-v2",)
    monkeypatch.delenv("EMBER_MARCH")
    assert cpu_choice("llvm").arch_flags == ("-march=native",)
    assert cpu_choice("c").source == "portable" and cpu_choice("c").level.name == "scalar"
    assert "-march=native" not in cpu_choice("c").arch_flags


def test_bad_mattr_is_refused():
    with pytest.raises(ValueError, match="not a CPU feature name"):
        cpu_choice("llvm -mattr=+av$x")


@requires_cc
def test_target_options_replace_the_default_march(monkeypatch):
    monkeypatch.setenv("EMBER_MARCH", "x86-64-v2")
    flags = cc.default_flags(options=["-march=skylake-avx512"])
    assert not any(f.startswith("-march=") for f in flags)
    assert "-march=x86-64-v2" in cc.default_flags()
    lib = relay.build(small_module(), "llvm -mcpu=haswell").get_lib()
    assert "-march=haswell" in lib.compile_options


@requires_cc
def test_compiled_features_come_from_the_compiler():
    assert {"avx512f", "avx2", "fma"} <= set(cc.compiled_features(["-march=skylake-avx512"]))
    assert "avx512f" not in cc.compiled_features(["-march=haswell"])
    native = set(cc.compiled_features(["-march=native"]))
    assert native and native <= host_features()
    with pytest.raises(CompileError, match="instruction-set flags"):
        cc.compiled_features(["-march=no-such-cpu"])


# -- the record and the Python loader -------------------------------------------------------------
@requires_cc
def test_host_build_records_features_and_loads(tmp_path):
    path = tmp_path / "host.so"
    relay.build(small_module(), "llvm").export_library(path)
    record = cpu_features.read_record(str(path))
    assert record is not None and "sse2" in record["features"].split(",")
    assert ember.runtime.load_module(str(path)) is not None


@requires_cc
@no_avx512
@pytest.mark.parametrize("executor", ["graph", pytest.param("aot", marks=pytest.mark.slow),
                                      pytest.param("vm", marks=pytest.mark.slow)])
def test_avx512_build_succeeds_but_load_is_refused(executor, tmp_path):
    target = "llvm -mcpu=skylake-avx512"
    if executor == "vm":
        built = relay.vm.compile(small_module(), target=target).mod
    else:
        built = relay.build(small_module(), target, executor=Executor(executor))
    path = tmp_path / f"{executor}.so"
    built.export_library(path)
    with pytest.raises(CpuFeatureError) as err:
        ember.runtime.load_module(str(path))
    message = str(err.value)
    assert str(path) in message and "avx512f" in message and "skylake-avx512" in message
    assert "EMBER_MARCH=x86-64-v3" in message and "-mcpu" in message
    assert isinstance(err.value, ArtifactError)


@requires_cc
def test_unknown_feature_is_refused_and_old_libraries_load(tmp_path):
    path = tmp_path / "host.so"
    relay.build(small_module(), "llvm").export_library(path)
    record = cpu_features.read_record(str(path))
    first = record["features"].split(",")[0].encode()
    # a feature no CPU has (host independent)
    bad = patched(path, tmp_path, b"features=" + first, b"features=" + b"z" * len(first))
    with pytest.raises(CpuFeatureError, match="z" * len(first)):
        ember.runtime.load_module(bad)
    # no record at all: a library of an older ember
    old = patched(path, tmp_path, cpu_features.RECORD_MAGIC, b"EMBER-XXX/1 ")
    assert cpu_features.read_record(old) is None
    mod = ember.runtime.load_module(old)
    assert mod is not None


def test_missing_features_cannot_be_checked_without_host_flags():
    record = {"features": "avx512f,sse2"}
    assert cpu_features.missing_features(record, frozenset({"sse2"})) == ["avx512f"]
    assert cpu_features.missing_features(record, frozenset()) == []


def test_macros_translate_to_cpuinfo_names():
    macros = "#define __AVX2__ 1\n#define __SSE3__ 1\n#define __FMA__ 1\n#define __x86_64__ 1\n"
    assert cpu_features.features_of_macros(macros) == ["avx2", "fma", "pni"]


# -- the compiler driver follows $CC ---------------------------------------------------------------
@requires_cc
def test_probed_flags_follow_cc_changes(tmp_path, monkeypatch):
    real = shutil.which(cc.compiler_argv()[0])
    wrapper = tmp_path / "no-openmp-cc"
    wrapper.write_text("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -fopenmp ] && exit 1; done\n"
                       f'exec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    with_openmp = "-fopenmp" in cc.default_flags()
    monkeypatch.setenv("CC", str(wrapper))
    assert "-fopenmp" not in cc.default_flags()
    monkeypatch.delenv("CC")
    assert ("-fopenmp" in cc.default_flags()) == with_openmp


@requires_cc
def test_wrapped_compiler_identity_includes_the_wrapped_program():
    env = shutil.which("env")
    real = cc.compiler_argv()[0]
    if env is None:
        pytest.skip("no env program")
    identity = cc.compiler_id(f"{env} {real}")
    assert os.path.realpath(real) in identity


@requires_cc
def test_avx2_level_build_runs_here(tmp_path):
    if not {"avx2", "fma"} <= host_features():
        pytest.skip("the host has no AVX2")
    factory = relay.build(small_module(), "llvm -mcpu=haswell")
    gmod = ember.contrib.graph_executor.GraphModule(factory["default"](ember.cpu()))
    x = np.linspace(-1, 1, 32, dtype="float32").reshape(4, 8)
    gmod.set_input(0, x)
    gmod.run()
    np.testing.assert_allclose(gmod.get_output(0).numpy(), np.maximum(x, 0) + 1, rtol=1e-6)


@requires_cc
@no_avx512
def test_tar_export_carries_the_record(tmp_path):
    relay.build(small_module(), "llvm -mcpu=skylake-avx512").export_library(tmp_path / "m.tar")
    with pytest.raises(CpuFeatureError, match=r"m\.tar .*avx512f"):
        ember.runtime.load_module(str(tmp_path / "m.tar"))
    relay.build(small_module(), "llvm").export_library(tmp_path / "host.tar")
    assert ember.runtime.load_module(str(tmp_path / "host.tar")) is not None


def test_cache_sizes_from_sysfs(tmp_path):
    # the data and unified caches by level (the largest instance of a level), sizes as sysfs
    # writes them; instruction caches, unreadable entries and odd sizes are left out
    for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "1024K"), ("3", "Unified", "32M"),
                                             ("4", "Unified", "lots")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (d / name).write_text(text + "\n")
    (tmp_path / "index9").mkdir()  # no files: skipped
    sizes = cpu_features.host_cache_bytes(str(tmp_path))
    assert sizes == {1: 48 << 10, 2: 1 << 20, 3: 32 << 20}
    assert cpu_features.host_cache_bytes(str(tmp_path / "missing")) == {}
    assert [cpu_features.parse_cache_size(t) for t in ("512", "2M", "0K", "K", "")] == [
        512, 2 << 20, None, None, None]
