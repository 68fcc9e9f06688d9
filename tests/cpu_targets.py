"""Which named CPUs this machine runs code for.

Import from any test (``tests/`` is on ``sys.path`` through its conftest)::

    from cpu_targets import cpu_runs_target
"""
from __future__ import annotations

from typing import Any

from ember.contrib.cc_toolchain import compiled_features
from ember.runtime.cpu_features import host_features
from ember.target.simd import cpu_choice


def cpu_runs_target(target: Any) -> bool:
    """Whether this machine's CPU runs code built for ``target`` (say
    ``"llvm -mcpu=sapphirerapids"``): every CPU feature the C compiler enables for the
    target's flags is one the host has. Tests that build for a named CPU run the result only
    then (an AMD EPYC lacks Sapphire Rapids' avx512_fp16)."""
    return set(compiled_features(cpu_choice(target).arch_flags)) <= host_features()
