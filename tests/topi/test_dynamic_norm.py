"""softmax / log_softmax / layer_norm with run-time extents: the C kernels of softmax.h and
norm.h take (outer, n, inner) as arguments, so a transformer's ``?`` batch and sequence keep the
one-pass kernels; against numpy over many shapes, against the static build at the same shape."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from dynamic_util import (assert_same_result, build_dynamic, build_static, kernel_names, rand,
                          requires_cc)
from ember.runtime.errors import TVMError

pytestmark = requires_cc
RNG = np.random.default_rng(1)

# layer_norm over a static last axis of 24, softmax along the ? axis 1 (inner = 24) and the
# static last one, log_softmax along the last
NORMS = """#[version = "0.0.5"]
def @main(%x: Tensor[({b}, {s}, 24), float32], %g: Tensor[(24), float32],
          %bt: Tensor[(24), float32]) {{
  %0 = nn.layer_norm(%x, %g, %bt, axis=-1, epsilon=1e-5f);
  (%0, nn.softmax(%x, axis=1), nn.log_softmax(%x, axis=-1))
}}
"""
PARAMS = {"g": rand(RNG, 24), "bt": rand(RNG, 24)}


@pytest.fixture(scope="module")
def norms():
    return build_dynamic(NORMS, PARAMS)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _refs(x: np.ndarray) -> list[np.ndarray]:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ln = (x - mean) / np.sqrt(var + 1e-5) * PARAMS["g"] + PARAMS["bt"]
    return [ln, _softmax(x, 1), np.log(_softmax(x, -1))]


def test_dynamic_norms_run_on_the_c_kernels() -> None:
    names = " ".join(kernel_names(NORMS, PARAMS))
    for op in ("layer_norm", "softmax", "log_softmax"):
        assert op in names, names


@settings(max_examples=20, deadline=None)
@given(b=st.integers(1, 4), s=st.integers(1, 37))
def test_dynamic_norms_match_numpy(norms, b: int, s: int) -> None:
    x = rand(np.random.default_rng(b * 100 + s), b, s, 24)
    for got, want in zip(norms(x), _refs(x)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("b, s", [(1, 1), (2, 13)])
def test_dynamic_norms_agree_with_the_static_build(norms, b: int, s: int) -> None:
    x = rand(RNG, b, s, 24)
    for got, want in zip(norms(x), build_static(NORMS, PARAMS, b=b, s=s)(x)):
        assert_same_result(got, want)


def test_a_gamma_of_another_length_at_run_time_is_an_error() -> None:
    from ember.relay import vm

    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 5), float32], %g: Tensor[(?), float32]) {
  nn.layer_norm(%x, %g, %g, axis=-1)
}
"""
    # kept as one op (SimplifyInference would decompose it around a gamma of unknown length)
    with ember.transform.PassContext(opt_level=3, disabled_pass=["SimplifyInference"]):
        exe = vm.compile(ember.parser.fromtext(text), target="llvm")
    machine = vm.VirtualMachine(exe, ember.cpu(0))
    x = rand(RNG, 3, 5)
    g = rand(RNG, 5)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + g
    np.testing.assert_allclose(machine.run(x, g).numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(TVMError, match="gamma must have as many values as the axis"):
        machine.run(x, rand(RNG, 4))
