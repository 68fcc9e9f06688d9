"""The activations exporters write as several ops, as one op each: nn.hardswish,
nn.hardsigmoid, nn.silu, nn.gelu, nn.mish.

ONNX exporters spell these out (hardswish as ``x * clip(x + 3, 0, 6) / 6``, SiLU as
``x * sigmoid(x)``, GELU through ``erf``); ``relay.transform.RecogniseActivations`` turns the
spelled-out forms back into these ops, so that fusion puts them in a convolution's or a GEMM's
epilogue as one activation. Each is elementwise on a float tensor:

    nn.hardswish(x)                   x * min(max(x + 3, 0), 6) / 6
    nn.hardsigmoid(x, alpha, beta)    min(max(alpha * x + beta, 0), 1)   (1/6, 1/2 by default)
    nn.silu(x)                        x * sigmoid(x)  (swish)
    nn.gelu(x, approximate)           x / 2 * (1 + erf(x / sqrt(2)))     ("none")
                                      x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
                                                                         ("tanh")
    nn.mish(x)                        x * tanh(softplus(x)), softplus(x) = log(1 + exp(x))
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call
from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....tir.expr import PrimExpr
from .._attrs_base import OpAttrs, attrs_class
from .._compute_common import cast_to
from .._reg import ELEMWISE, call, defop
from .._shape import fail, fmt_type, is_float
from ..tensor import _erf

__all__ = ["gelu", "hardsigmoid", "hardswish", "mish", "silu"]

GELU_TANH_CUBIC = 0.044715
GELU_MODES = ("none", "tanh")


@attrs_class("HardSigmoidAttrs")
class HardSigmoidAttrs(OpAttrs):
    """nn.hardsigmoid: ``min(max(alpha * x + beta, 0), 1)``; torch's 1/6 and 1/2 by default
    (ONNX's HardSigmoid defaults to 0.2 and 0.5)."""

    alpha: float = 1.0 / 6.0
    beta: float = 0.5
    _op: ClassVar[str] = "nn.hardsigmoid"

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating,
                                                                 np.integer)):
                raise self._invalid(name, "a number")
            if not math.isfinite(float(value)):
                raise self._invalid(name, "a finite number")
            self._set(name, float(value))


@attrs_class("GeluAttrs")
class GeluAttrs(OpAttrs):
    """nn.gelu: ``approximate`` is "none" (the exact erf form) or "tanh" (as ONNX's Gelu)."""

    approximate: str = "none"
    _op: ClassVar[str] = "nn.gelu"

    def __post_init__(self) -> None:
        self._choice("approximate", GELU_MODES)


def _float_rel(name: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        if not is_float(args[0].dtype):
            raise fail(name, f"requires a floating-point tensor, got {fmt_type(args[0])}")
        return args[0]

    return rel


# ---------------------------------------------------------------- numpy references
def _softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _hardswish_ref(x: np.ndarray, attrs: Any) -> np.ndarray:
    return (x * np.clip(x + 3, 0, 6) / 6).astype(x.dtype)


def _hardsigmoid_ref(x: np.ndarray, attrs: HardSigmoidAttrs) -> np.ndarray:
    return np.clip(x * attrs.alpha + attrs.beta, 0, 1).astype(x.dtype)


def _silu_ref(x: np.ndarray, attrs: Any) -> np.ndarray:
    w = x.astype(np.float64)
    return (w / (1 + np.exp(-w))).astype(x.dtype)


def _gelu_ref(x: np.ndarray, attrs: GeluAttrs) -> np.ndarray:
    w = x.astype(np.float64)
    if attrs.approximate == "tanh":
        inner = np.tanh(math.sqrt(2 / math.pi) * (w + GELU_TANH_CUBIC * w ** 3))
    else:
        inner = _erf(w / math.sqrt(2))
    return (0.5 * w * (1 + inner)).astype(x.dtype)


def _mish_ref(x: np.ndarray, attrs: Any) -> np.ndarray:
    w = x.astype(np.float64)
    return (w * np.tanh(_softplus(w))).astype(x.dtype)


# ---------------------------------------------------------------- compute rules
Scalar = Callable[[PrimExpr, Any], PrimExpr]


def _elementwise(name: str, fn: Scalar) -> Callable[..., list[te.Tensor]]:
    """The compute rule of an activation whose element formula is ``fn(x, attrs)``."""
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        out = te.compute(x.shape, lambda *i: fn(x(*i), attrs), name=f"T_{name}", tag="elemwise")
        return [cast_to(out, out_type.dtype)]  # type: ignore[attr-defined]

    return rule


def _c(value: float, x: PrimExpr) -> PrimExpr:
    return tir.const(value, x.dtype)


def _clip(v: PrimExpr, lo: float, hi: float) -> PrimExpr:
    return tir.min(tir.max(v, _c(lo, v)), _c(hi, v))


def _hardswish(x: PrimExpr, attrs: Any) -> PrimExpr:
    return x * _clip(x + _c(3.0, x), 0.0, 6.0) * _c(1 / 6, x)


def _hardsigmoid(x: PrimExpr, attrs: HardSigmoidAttrs) -> PrimExpr:
    return _clip(x * _c(attrs.alpha, x) + _c(attrs.beta, x), 0.0, 1.0)


def _silu(x: PrimExpr, attrs: Any) -> PrimExpr:
    return x / (_c(1.0, x) + tir.exp(_c(0.0, x) - x))


def _gelu(x: PrimExpr, attrs: GeluAttrs) -> PrimExpr:
    if attrs.approximate == "tanh":
        cubic = x + _c(GELU_TANH_CUBIC, x) * x * x * x
        inner = tir.tanh(_c(math.sqrt(2 / math.pi), x) * cubic)
    else:
        inner = tir.erf(x * _c(1 / math.sqrt(2), x))
    return _c(0.5, x) * x * (_c(1.0, x) + inner)


def _mish(x: PrimExpr, attrs: Any) -> PrimExpr:
    zero = _c(0.0, x)
    softplus = tir.max(x, zero) + tir.log1p(tir.exp(zero - tir.abs(x)))
    return x * tir.tanh(softplus)


_DOCS = {
    "nn.hardswish": "x * min(max(x + 3, 0), 6) / 6.",
    "nn.hardsigmoid": "min(max(alpha * x + beta, 0), 1).",
    "nn.silu": "x * sigmoid(x) (SiLU, swish).",
    "nn.gelu": "x / 2 * (1 + erf(x / sqrt(2))), or its tanh approximation.",
    "nn.mish": "x * tanh(log(1 + exp(x))).",
}
for _name, _ref, _fn, _attrs in (
        ("nn.hardswish", _hardswish_ref, _hardswish, None),
        ("nn.hardsigmoid", _hardsigmoid_ref, _hardsigmoid, HardSigmoidAttrs),
        ("nn.silu", _silu_ref, _silu, None),
        ("nn.gelu", _gelu_ref, _gelu, GeluAttrs),
        ("nn.mish", _mish_ref, _mish, None)):
    defop(_name, _float_rel(_name), _ref, ELEMWISE, attrs=_attrs, doc=_DOCS[_name],
          compute=_elementwise(_name.removeprefix("nn."), _fn))


# ---------------------------------------------------------------- Python API
def hardswish(data: Any) -> Call:
    """``data * min(max(data + 3, 0), 6) / 6``."""
    return call("nn.hardswish", data)


def hardsigmoid(data: Any, alpha: float = 1.0 / 6.0, beta: float = 0.5) -> Call:
    """``min(max(alpha * data + beta, 0), 1)``."""
    return call("nn.hardsigmoid", data, attrs=HardSigmoidAttrs(alpha, beta))


def silu(data: Any) -> Call:
    """``data * sigmoid(data)`` (SiLU, also called swish)."""
    return call("nn.silu", data)


def gelu(data: Any, approximate: str = "none") -> Call:
    """GELU: exact (``approximate="none"``, through erf) or its tanh approximation."""
    return call("nn.gelu", data, attrs=GeluAttrs(approximate))


def mish(data: Any) -> Call:
    """``data * tanh(softplus(data))``."""
    return call("nn.mish", data)
