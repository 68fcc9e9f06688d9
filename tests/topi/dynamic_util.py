"""Builds of one Relay text with ``?`` dimensions (the VM) and with those dimensions fixed
(the graph executor), for the tests of kernels with run-time extents.

A model is a text template whose symbolic dimensions are written ``{name}``::

    TEXT = "def @main(%x: Tensor[({m}, 37), float32], %w: Tensor[(19, 37), float32]) {...}"
    dynamic = build_dynamic(TEXT, params)            # every {name} becomes ?
    static = build_static(TEXT, params, m=5)         # the same model at m = 5

Kernels with run-time extents keep the blocking a static build of the same shape gets, so both
builds sum in the same order and agree up to the rounding the C compiler may change when it
knows a size (``assert_same_result``: the GEMM and conv results are bit-identical in practice,
layer_norm differs in the last bit where constant sizes let the compiler fuse a multiply-add).
"""
from __future__ import annotations

import string
from functools import lru_cache
from typing import Any

import numpy as np
import pytest

import ember
from ember.contrib import cc

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _names(text: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(text) if f]


def build_dynamic(text: str, params: dict[str, np.ndarray]) -> Any:
    """The model with every ``{name}`` a ``?`` dimension, compiled for the VM (one thread, so
    results do not depend on the machine's core count)."""
    return ember.compile(text.format(**{n: "?" for n in _names(text)}), executor="vm",
                         params=params, threads=1)


@lru_cache(maxsize=32)
def _static(text: str, items: tuple[tuple[str, int], ...], key: int) -> Any:
    return ember.compile(text.format(**dict(items)), executor="graph",
                         params=_PARAMS[key], threads=1)


_PARAMS: dict[int, dict[str, np.ndarray]] = {}


def build_static(text: str, params: dict[str, np.ndarray], **sizes: int) -> Any:
    """The model at the given sizes, compiled for the graph executor (cached per shape)."""
    _PARAMS[id(params)] = params
    return _static(text, tuple(sorted(sizes.items())), id(params))


def _vm_executable(text: str, params: dict[str, np.ndarray]) -> Any:
    from ember.ir.transform import PassContext
    from ember.relay import vm

    mod = ember.parser.fromtext(text.format(**{n: "?" for n in _names(text)}))
    with PassContext(opt_level=3, config=PassContext.current().config):
        return vm.compile(mod, target="llvm", params=params)


def kernel_names(text: str, params: dict[str, np.ndarray]) -> list[str]:
    """The names of the fused kernels of the dynamic build (to check which ops it used)."""
    return list(_vm_executable(text, params).primitive_ops)


def kernel_source(text: str, params: dict[str, np.ndarray]) -> str:
    """The C source of the dynamic build's kernels (to check which C kernels they call)."""
    return _vm_executable(text, params).lib.get_source()


def assert_same_result(got: Any, want: Any) -> None:
    """Equal shapes and float32 values equal up to rounding: the two builds may sum a conv's
    taps in different orders (register tiles chosen for the static size), so 1e-5 relative."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype("float32")
