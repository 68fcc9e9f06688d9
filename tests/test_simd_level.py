"""ember.target.simd: the SIMD level a build uses, from target, $EMBER_MARCH or the host."""
from __future__ import annotations

import pytest

from ember.target import Target
from ember.target.simd import LEVELS, host_level, level_of_march, simd_level
from ember.testing import find_c_compiler


@pytest.mark.parametrize("target,level", [
    ("llvm -mcpu=skylake-avx512", "avx512"), ("llvm -mcpu=znver3", "avx2"),
    ("llvm -mcpu=x86-64-v2", "sse"), ("llvm -mattr=+avx2,+fma", "avx2"),
    ("llvm -mattr=+avx512f", "avx512"), ("c", "scalar"), ("c -mcpu=cortex-m4", "scalar"),
    ("llvm -mcpu=cortex-a72", "neon")])
def test_target_decides_first(target, level, monkeypatch):
    monkeypatch.setenv("EMBER_MARCH", "x86-64-v3")
    assert simd_level(Target(target)).name == level
    assert simd_level(target).name == level


def test_env_then_host(monkeypatch):
    monkeypatch.setenv("EMBER_MARCH", "x86-64-v2")
    assert simd_level("llvm").name == "sse"
    assert simd_level().name == "sse"
    monkeypatch.setenv("EMBER_MARCH", "native")
    assert simd_level("llvm") == host_level()
    monkeypatch.delenv("EMBER_MARCH")
    assert simd_level(None) == host_level()


def test_unknown_march_is_portable_and_lanes_follow_width():
    assert level_of_march("some-future-cpu").name == "scalar"
    assert LEVELS["avx512"].lanes() == 16 and LEVELS["avx2"].lanes("float32") == 8
    assert LEVELS["avx2"].lanes("int8") == 32 and LEVELS["scalar"].lanes() == 1


@pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
def test_cpu_runs_target_compares_the_targets_features_with_the_hosts(monkeypatch):
    import cpu_targets

    assert cpu_targets.cpu_runs_target("llvm")  # the host runs its own code
    monkeypatch.setattr(cpu_targets, "host_features", lambda: frozenset({"sse2"}))
    assert not cpu_targets.cpu_runs_target("llvm -mcpu=haswell")  # AVX2, FMA..., which it lacks
