"""Which named CPUs this machine runs code for.

Import from any test (``tests/`` is on ``sys.path`` through pyproject's pytest ``pythonpath``)::

    from cpu_targets import cpu_runs_target, runs_vector_target
"""
from __future__ import annotations

from typing import Any

from ember.contrib.cc_toolchain import compiled_features
from ember.runtime.cpu_features import host_features
from ember.target.simd import cpu_choice, host_level


def cpu_runs_target(target: Any) -> bool:
    """Whether this machine's CPU runs code built for ``target`` (say
    ``"llvm -mcpu=sapphirerapids"``): every CPU feature the C compiler enables for the
    target's flags is one the host has. Tests that build for a named CPU run the result only
    then (an AMD EPYC lacks Sapphire Rapids' avx512_fp16)."""
    return set(compiled_features(cpu_choice(target).arch_flags)) <= host_features()


def runs_vector_target(target: str) -> bool:
    """Whether this machine runs ``target``'s code at AVX2 or AVX-512: the host (``"llvm"``)
    at one of those levels, a named CPU as ``cpu_runs_target`` says (no x86-64-v4 code
    without AVX-512). The kernels' planning that the conv tests check needs one of them."""
    if target == "llvm":
        return host_level().name in ("avx512", "avx2")
    return cpu_runs_target(target)
