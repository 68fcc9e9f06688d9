"""The activations that fused conv (``nn.contrib_conv2d_nchwc_fused``) and gemm
(``nn.contrib_gemm``) epilogues apply, in numpy: one table that both ops' references read, so
the two cannot drift apart.

    activation_ref(y, "hardswish")              y * relu6(y + 3) / 6
    activation_ref(y, "clip", lo, hi)           min(max(y, lo), hi)

``p0``/``p1`` are the two parameters an epilogue carries: the bounds of clip, the slope and
offset of hardsigmoid, the slope of leaky_relu, the output scale and inner scale of the GELUs;
the other activations take none. Computed in float64 (callers cast back).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["ACTIVATION_REFS", "activation_ref"]

_erf = np.vectorize(math.erf, otypes=[np.float64])

ACTIVATION_REFS: dict[str, Callable[[np.ndarray, float, float], np.ndarray]] = {
    "none": lambda y, p0, p1: y,
    "relu": lambda y, p0, p1: np.maximum(y, 0),
    "clip": lambda y, p0, p1: np.clip(y, p0, p1),
    "gelu_erf": lambda y, p0, p1: p0 * y * (1 + _erf(p1 * y)),
    "gelu_tanh": lambda y, p0, p1: p0 * y * (1 + np.tanh(p1 * (y + 0.044715 * y ** 3))),
    "sigmoid": lambda y, p0, p1: 1 / (1 + np.exp(-y)),
    "hardswish": lambda y, p0, p1: y * np.clip(y + 3, 0, 6) / 6,
    "tanh": lambda y, p0, p1: np.tanh(y),
    "leaky_relu": lambda y, p0, p1: np.where(y > 0, y, p0 * y),
    "silu": lambda y, p0, p1: y / (1 + np.exp(-y)),
    "hardsigmoid": lambda y, p0, p1: np.clip(p0 * y + p1, 0, 1),
    "mish": lambda y, p0, p1: y * np.tanh(np.logaddexp(0, y)),
}


def activation_ref(y: np.ndarray, act: str, p0: float = 0.0, p1: float = 0.0) -> np.ndarray:
    """``act`` applied to ``y`` (float64 inside); ValueError naming the known activations for
    an unknown ``act``."""
    fn = ACTIVATION_REFS.get(act)
    if fn is None:
        raise ValueError(f"epilogue activation: unknown {act!r}; known: "
                         f"{', '.join(ACTIVATION_REFS)}")
    return fn(np.asarray(y, np.float64), p0, p1)
