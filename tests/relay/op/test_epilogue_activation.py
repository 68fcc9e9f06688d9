"""The one activation table of the fused conv and gemm epilogues, against numpy formulas
written here, and both ops' references reading it (hardswish is x * relu6(x + 3) / 6 in
both)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ember.relay.op.nn import conv_nchwc, gemm
from ember.relay.op.nn.epilogue_activation import ACTIVATION_REFS, activation_ref

Y = np.linspace(-7, 7, 57)
_erf = np.vectorize(math.erf)
NUMPY = {  # name -> (p0, p1, numpy formula)
    "none": (0, 0, lambda y: y),
    "relu": (0, 0, lambda y: np.maximum(y, 0)),
    "clip": (-1, 2, lambda y: np.minimum(np.maximum(y, -1), 2)),
    "gelu_erf": (0.5, 1 / math.sqrt(2), lambda y: 0.5 * y * (1 + _erf(y / math.sqrt(2)))),
    "gelu_tanh": (0.5, math.sqrt(2 / math.pi), lambda y: 0.5 * y * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))),
    "sigmoid": (0, 0, lambda y: 1 / (1 + np.exp(-y))),
    "hardswish": (0, 0, lambda y: y * np.minimum(np.maximum(y + 3, 0), 6) / 6),
    "tanh": (0, 0, np.tanh),
    "leaky_relu": (0.1, 0, lambda y: np.where(y > 0, y, 0.1 * y)),
    "silu": (0, 0, lambda y: y / (1 + np.exp(-y))),
    "hardsigmoid": (0.2, 0.5, lambda y: np.minimum(np.maximum(0.2 * y + 0.5, 0), 1)),
    "mish": (0, 0, lambda y: y * np.tanh(np.log1p(np.exp(y)))),
}


@pytest.mark.parametrize("act", list(ACTIVATION_REFS))
def test_table_matches_numpy(act):
    p0, p1, want = NUMPY[act]
    np.testing.assert_allclose(activation_ref(Y, act, p0, p1), want(Y), rtol=1e-12, atol=1e-12)


def test_every_epilogue_activation_is_in_the_table():
    assert set(conv_nchwc.ACTIVATIONS) <= set(ACTIVATION_REFS)
    assert set(gemm.ACTIVATIONS) == set(ACTIVATION_REFS) == set(NUMPY)


def test_conv_and_gemm_references_agree_with_numpy_on_hardswish():
    want = NUMPY["hardswish"][2](Y)
    # conv's epilogue carries no hardswish parameters (AlterOpLayout writes (0, 0))
    attrs = conv_nchwc.Conv2DNCHWcFusedAttrs(activation="hardswish")
    np.testing.assert_allclose(conv_nchwc._act(Y, attrs), want, rtol=1e-12)
    # gemm's carries an output scale, 1/6 for plain hardswish (FuseGemmEpilogue's default)
    np.testing.assert_allclose(gemm._act_ref(Y, "hardswish", (1 / 6, 0)), want, rtol=1e-12)
    np.testing.assert_allclose(gemm._act_ref(Y, "hardswish", (0.5, 0)), 3 * want, rtol=1e-12)


@pytest.mark.parametrize("act", list(conv_nchwc.ACTIVATIONS))
def test_conv_and_gemm_references_agree_on_shared_activations(act):
    p0, p1, want = NUMPY[act]
    attrs = conv_nchwc.Conv2DNCHWcFusedAttrs(activation=act, clip_min=p0, clip_max=p1)
    gemm_p = (1 / 6, 0) if act == "hardswish" else (p0, p1)
    np.testing.assert_allclose(conv_nchwc._act(Y, attrs), want(Y), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gemm._act_ref(Y, act, gemm_p), want(Y), rtol=1e-12, atol=1e-12)


def test_unknown_activation_is_named():
    with pytest.raises(ValueError, match="unknown 'swish'.*hardswish"):
        activation_ref(Y, "swish")
