"""The native runtime refuses a library whose recorded CPU features the host lacks (before
dlopen: nothing of it runs), names them and how to rebuild; libraries without a record load."""
from __future__ import annotations

import pytest
from _native_testlib import require_sanitizers
from test_native_errors import codes, load, make_probe

from ember import relay
from ember.runtime import cpu_features
from ember.target.simd import host_features


@pytest.fixture(scope="module", params=["plain", pytest.param("sanitized",
                                                                 marks=pytest.mark.slow)])
def probe(request, tmp_path_factory):
    if request.param == "sanitized":
        require_sanitizers()
    return make_probe(request.param == "sanitized", tmp_path_factory)


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    x = relay.var("x", shape=(2, 3))
    func = relay.Function([x], relay.nn.relu(x))
    path = tmp_path_factory.mktemp("cpu") / "host.so"
    relay.build(func, "llvm").export_library(path)
    return path


def _copy_with(path, tmp_path, old: bytes, new: bytes):
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    out = tmp_path / "patched.so"
    out.write_bytes(data.replace(old, new))
    return out


def test_host_library_loads(probe, host_library):
    assert load(probe, host_library) == (0, "")


@pytest.mark.skipif("avx512f" in host_features(), reason="the host runs AVX-512 code")
def test_avx512_library_is_refused_with_the_missing_features(probe, tmp_path):
    x = relay.var("x", shape=(2, 3))
    path = tmp_path / "avx512.so"
    relay.build(relay.Function([x], relay.nn.relu(x)),
                "llvm -mcpu=skylake-avx512").export_library(path)
    rc, msg = load(probe, path)
    assert rc == codes()["kTvmErrorModuleLoadFailed"]
    assert str(path) in msg and "avx512f" in msg and "-march=skylake-avx512" in msg
    assert "EMBER_MARCH=x86-64-v3" in msg and "illegal instruction" in msg


def test_unknown_feature_is_refused(probe, host_library, tmp_path):
    first = cpu_features.read_record(str(host_library))["features"].split(",")[0].encode()
    bad = _copy_with(host_library, tmp_path, b"features=" + first,
                     b"features=" + b"q" * len(first))
    rc, msg = load(probe, bad)
    assert rc == codes()["kTvmErrorModuleLoadFailed"] and "q" * len(first) in msg


def test_library_without_record_loads(probe, host_library, tmp_path):
    old = _copy_with(host_library, tmp_path, cpu_features.RECORD_MAGIC, b"EMBER-OLD/1 ")
    assert load(probe, old) == (0, "")
