"""fast_exp, fast_tanh, fast_erf: cheap float32 approximations (the ops FastMath swaps in).

Each formula is written once, against a small math backend, and serves both as the numpy
reference and as the compute rule, so the interpreter and the compiled kernel evaluate the
same arithmetic (up to the C compiler contracting a multiply-add):

- ``fast_exp(x)``: x is clamped to [-87, 88] (the result stays a normal float: exp(88) is
  1.65e38 instead of inf, exp(-87) 1.6e-38 instead of a denormal or 0); n = round(x / ln 2),
  r = x - n ln 2 (ln 2 in two parts, so r is exact to float32), |r| <= ln(2)/2, e**r by its
  Taylor polynomial of degree 7 (truncation error 3e-9) and the result scaled by 2**n.
  Relative error about 2e-7.
- ``fast_tanh(x)``: |x| clamped to 9 (tanh(9) rounds to 1 in float32), then
  sign(x) * (1 - e) / (1 + e) with e = fast_exp(-2|x|). Absolute error about 2e-7.
- ``fast_erf(x)``: Abramowitz and Stegun 7.1.26 for |x| clamped to 4:
  1 - (a1 t + ... + a5 t**5) exp(-x**2), t = 1 / (1 + p|x|), with the sign of x. Absolute
  error under 6e-7 (1.5e-7 for the formula, the rest float32 rounding).

Only float32 is approximated; other float dtypes compute exp, tanh and erf exactly, as TVM's
fast ops do.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import topi
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ._reg import ELEMWISE, call, defop
from ._shape import fail, is_float
from .tensor import _erf as exact_erf

__all__ = ["fast_erf", "fast_exp", "fast_tanh"]

HEADER = "ember/kernels/fast_math.h"
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # ln 2 = _LN2_HI + _LN2_LO; n * _LN2_HI is exact for |n| < 256
_LN2_LO = 1.4286068203094172e-06
_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(7, -1, -1))  # r**7 ... r**0
_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)  # a5 ... a1


class _Numpy:
    """The formulas' operations on float32 numpy arrays."""

    @staticmethod
    def c(v: float) -> Any:
        return np.float32(v)

    floor, exp2 = staticmethod(np.floor), staticmethod(np.exp2)
    minimum, maximum = staticmethod(np.minimum), staticmethod(np.maximum)

    @staticmethod
    def where_neg(x: Any, neg: Any, pos: Any) -> Any:
        return np.where(x < 0, neg, pos).astype(np.float32)


class _Tir:
    """The same operations on float32 tir expressions (2**n from its bits, in C)."""

    @staticmethod
    def c(v: float) -> Any:
        return tir.const(v, "float32")

    @staticmethod
    def exp2(n: Any) -> Any:
        return tir.call_extern("float32", "ember_pow2i", tir.cast(n, "int32"), header=HEADER)

    floor = staticmethod(tir.floor)
    minimum, maximum = staticmethod(tir.min), staticmethod(tir.max)

    @staticmethod
    def where_neg(x: Any, neg: Any, pos: Any) -> Any:
        return tir.Select_(x < tir.const(0.0, "float32"), neg, pos)


def _horner(m: Any, x: Any, coeffs: tuple[float, ...]) -> Any:
    acc = m.c(coeffs[0])
    for c in coeffs[1:]:
        acc = acc * x + m.c(c)
    return acc


def exp_formula(m: Any, x: Any) -> Any:
    x = m.minimum(m.maximum(x, m.c(-87.0)), m.c(88.0))
    n = m.floor(x * m.c(_LOG2E) + m.c(0.5))
    r = (x - n * m.c(_LN2_HI)) - n * m.c(_LN2_LO)
    return _horner(m, r, _EXP_TAYLOR) * m.exp2(n)


def _signed(m: Any, x: Any, y: Any) -> Any:
    """``y`` with the sign of ``x``: a select between constants, so that the C emitter can
    compute ``y`` once (a select between -y and y would repeat all of it)."""
    return m.where_neg(x, m.c(-1.0), m.c(1.0)) * y


def tanh_formula(m: Any, x: Any) -> Any:
    a = m.minimum(m.maximum(x, -x), m.c(9.0))
    e = exp_formula(m, a * m.c(-2.0))
    t = (m.c(1.0) - e) / (m.c(1.0) + e)
    return _signed(m, x, t)


def erf_formula(m: Any, x: Any) -> Any:
    a = m.minimum(m.maximum(x, -x), m.c(4.0))
    t = m.c(1.0) / (m.c(1.0) + m.c(_ERF_P) * a)
    y = m.c(1.0) - _horner(m, t, _ERF_A) * t * exp_formula(m, -(a * a))
    return _signed(m, x, y)


_OPS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any], str]] = {
    # name: (formula, exact numpy, exact topi, doc)
    "fast_exp": (exp_formula, np.exp, topi.exp, "Approximate e**x (float32; see fast_math)."),
    "fast_tanh": (tanh_formula, np.tanh, topi.tanh, "Approximate tanh (float32)."),
    "fast_erf": (erf_formula, exact_erf, topi.erf, "Approximate erf (float32)."),
}


def _rel(name: str) -> Callable[..., TensorType]:
    def rel(args: list[TensorType], attrs: Any) -> TensorType:
        if not is_float(args[0].dtype):
            raise fail(name, f"requires a floating-point tensor, got {args[0].dtype}")
        return args[0]
    return rel


def _ref(formula: Callable[..., Any], exact: Callable[..., Any]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: Any) -> np.ndarray:
        if x.dtype != np.float32:
            return np.asarray(exact(x)).astype(x.dtype)
        return np.asarray(formula(_Numpy, x), dtype=np.float32)
    return ref


def _compute(name: str, formula: Callable[..., Any], exact: Callable[..., Any]) -> Callable:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x = inputs[0]
        if x.dtype != "float32":
            return [exact(x)]
        return [te.compute(x.shape, lambda *i: formula(_Tir, x(*i)), name=f"T_{name}",
                           tag="elemwise")]
    return rule


def _api(name: str, doc: str) -> Callable[[Any], Any]:
    def api(data: Any) -> Any:
        return call(name, data)
    api.__name__ = api.__qualname__ = name
    api.__doc__ = f"{doc}\n\n``relay.{name}(data)``"
    return api


for _name, (_formula, _exact, _topi, _doc) in _OPS.items():
    defop(_name, _rel(_name), _ref(_formula, _exact), ELEMWISE, doc=_doc,
          compute=_compute(_name, _formula, _topi))

fast_exp = _api("fast_exp", _OPS["fast_exp"][3])
fast_tanh = _api("fast_tanh", _OPS["fast_tanh"][3])
fast_erf = _api("fast_erf", _OPS["fast_erf"][3])
