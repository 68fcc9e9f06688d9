"""The fused GEMM ops that ``FuseGemmEpilogue`` rewrites dense/matmul/batch_matmul chains into:

- ``nn.contrib_gemm_pack(weight)``: a (N, K) (``transpose``) or (K, N) weight packed into the
  C kernel's panels, (ceil(N / nr), K, nr), zero past N. On a constant weight FoldConstant
  folds it, so the packed weight is a constant of the model.
- ``nn.contrib_gemm(data, weight, bias, residual)``:
  ``act2(act1(alpha * (data @ B) + bias) + residual)`` where B is the weight as ``kind``
  reads it (dense: (N, K) transposed; matmul: (K, N), or (N, K) with ``transpose_b``;
  batch_matmul: (B, K, N) or (B, N, K)), or the packed weight when ``packed_n`` > 0 (its N).
  ``bias`` is a scalar or (N,), ``residual`` a scalar or the output's shape; each is ignored
  (pass a scalar 0) unless ``has_bias`` / ``has_residual``. Activations by name, as in
  ``topi.nn.gemm_kernel.ACTIVATIONS``, each with two parameters.
"""
from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ....ir.types import TensorType
from ....topi.nn.gemm_kernel import pack_weight_np
from .._attrs_base import OpAttrs, attrs_class
from .._reg import OPAQUE, OUT_ELEMWISE_FUSABLE, call, defop
from .._shape import broadcast_dim, fail, fmt_shape, known, may_equal, tensor_of

__all__: list[str] = []

ACTIVATIONS = ("none", "relu", "clip", "gelu_erf", "gelu_tanh", "sigmoid", "hardswish", "tanh",
               "leaky_relu")
KINDS = ("dense", "matmul", "batch_matmul")


@attrs_class("GemmPackAttrs")
class GemmPackAttrs(OpAttrs):
    """nn.contrib_gemm_pack: panel width and whether the weight is (N, K)."""

    nr: int = 16
    transpose: bool = True
    _op: ClassVar[str] = "nn.contrib_gemm_pack"

    def __post_init__(self) -> None:
        self._int("nr")
        self._positive("nr")
        self._bool("transpose")


@attrs_class("GemmAttrs")
class GemmAttrs(OpAttrs):
    """nn.contrib_gemm: the product (kind, transpose_b, packed_n) and its epilogue."""

    kind: str = "dense"
    transpose_b: bool = True
    packed_n: int = 0
    alpha: float = 1.0
    has_bias: bool = False
    has_residual: bool = False
    act1: str = "none"
    p1: tuple[float, float] = (0.0, 0.0)
    act2: str = "none"
    p2: tuple[float, float] = (0.0, 0.0)
    _op: ClassVar[str] = "nn.contrib_gemm"

    def __post_init__(self) -> None:
        self._choice("kind", KINDS)
        self._choice("act1", ACTIVATIONS)
        self._choice("act2", ACTIVATIONS)
        self._bool("transpose_b", "has_bias", "has_residual")
        self._int("packed_n")
        self._positive("packed_n", allow_zero=True)
        self._set("alpha", float(self.alpha))
        for name in ("p1", "p2"):
            value = tuple(float(v) for v in getattr(self, name))
            if len(value) != 2:
                raise self._invalid(name, "two floats")
            self._set(name, value)


# ---------------------------------------------------------------- contrib_gemm_pack
def _pack_rel(args: list[TensorType], attrs: GemmPackAttrs) -> TensorType:
    (w,) = args
    if w.ndim != 2:
        raise fail("nn.contrib_gemm_pack", f"weight must have rank 2, got {fmt_shape(w.shape)}")
    n, k = (w.shape[0], w.shape[1]) if attrs.transpose else (w.shape[1], w.shape[0])
    if not known(n):
        raise fail("nn.contrib_gemm_pack", f"needs a static N, got shape {fmt_shape(w.shape)}")
    return tensor_of((-(-n // attrs.nr), k, attrs.nr), w.dtype)


def unpack_ref(p: np.ndarray, n: int) -> np.ndarray:
    """numpy: the (K, N) matrix a packed weight holds."""
    return p.transpose(1, 0, 2).reshape(p.shape[1], -1)[:, :n]


defop("nn.contrib_gemm_pack", _pack_rel,
      lambda w, attrs: pack_weight_np(w, attrs.nr, attrs.transpose), OPAQUE, args=("weight",),
      attrs=GemmPackAttrs, doc="A weight packed into the GEMM kernel's column panels.")


# ---------------------------------------------------------------- contrib_gemm
def _b_shape(op: str, w: TensorType, attrs: GemmAttrs) -> tuple[Any, Any, Any]:
    """(batch or None, K, N) of the weight as the product reads it."""
    if attrs.packed_n:
        if w.ndim != 3 or not may_equal(w.shape[0], -(-attrs.packed_n // w.shape[2])):
            raise fail(op, f"a packed weight must be (ceil(N / nr), K, nr) for N = "
                           f"{attrs.packed_n}, got {fmt_shape(w.shape)}")
        return None, w.shape[1], attrs.packed_n
    batched = attrs.kind == "batch_matmul"
    if w.ndim != (3 if batched else 2):
        raise fail(op, f"weight must have rank {3 if batched else 2} for {attrs.kind}, got "
                       f"{fmt_shape(w.shape)}")
    rows, cols = w.shape[-2], w.shape[-1]
    k, n = (cols, rows) if attrs.transpose_b else (rows, cols)
    return (w.shape[0] if batched else None), k, n


def _gemm_rel(args: list[TensorType], attrs: GemmAttrs) -> TensorType:
    op = "nn.contrib_gemm"
    data, w, bias, res = args
    batch, k, n = _b_shape(op, w, attrs)
    if data.ndim < (3 if attrs.kind == "batch_matmul" else 1):
        raise fail(op, f"data has too few dimensions: {fmt_shape(data.shape)}")
    if not may_equal(data.shape[-1], k):
        raise fail(op, f"data has {data.shape[-1]} features but the weight reduces over {k} "
                       f"(data {fmt_shape(data.shape)}, weight {fmt_shape(w.shape)})")
    lead = list(data.shape[:-1])
    if batch is not None:
        b = broadcast_dim(data.shape[0], batch)
        if b is None:
            raise fail(op, f"batch sizes {data.shape[0]} and {batch} do not broadcast")
        lead[0] = b
    out = tensor_of((*lead, n), data.dtype)
    if attrs.has_bias and bias.ndim > 0 and not (bias.ndim == 1 and may_equal(bias.shape[0], n)):
        raise fail(op, f"bias must be a scalar or ({n},), got {fmt_shape(bias.shape)}")
    if attrs.has_residual and res.ndim > 0 and (res.ndim != out.ndim or not all(
            may_equal(a, b) for a, b in zip(res.shape, out.shape))):
        raise fail(op, f"residual must be a scalar or {fmt_shape(out.shape)}, got "
                       f"{fmt_shape(res.shape)}")
    return out


def _act_ref(x: np.ndarray, act: str, p: tuple[float, float]) -> np.ndarray:
    erf = np.vectorize(math.erf, otypes=[np.float64])
    table = {
        "none": lambda: x, "relu": lambda: np.maximum(x, 0), "clip": lambda: np.clip(x, *p),
        "gelu_erf": lambda: p[0] * x * (1 + erf(p[1] * x)),
        "gelu_tanh": lambda: p[0] * x * (1 + np.tanh(p[1] * (x + 0.044715 * x ** 3))),
        "sigmoid": lambda: 1 / (1 + np.exp(-x)),
        "hardswish": lambda: p[0] * x * np.clip(x + 3, 0, 6), "tanh": lambda: np.tanh(x),
        "leaky_relu": lambda: np.where(x > 0, x, p[0] * x),
    }
    return table[act]()


def gemm_ref(data: np.ndarray, w: np.ndarray, bias: np.ndarray, res: np.ndarray,
             attrs: GemmAttrs) -> np.ndarray:
    """numpy: what nn.contrib_gemm computes (in float64, cast to data's dtype)."""
    if attrs.packed_n:
        b = unpack_ref(w, attrs.packed_n)
    elif attrs.kind == "batch_matmul":
        b = w.swapaxes(1, 2) if attrs.transpose_b else w
    else:
        b = w.T if attrs.transpose_b else w
    y = attrs.alpha * np.matmul(data.astype(np.float64), b.astype(np.float64))
    if attrs.has_bias:
        y = y + bias
    y = _act_ref(y, attrs.act1, attrs.p1)
    if attrs.has_residual:
        y = y + res
    return _act_ref(y, attrs.act2, attrs.p2).astype(data.dtype)


defop("nn.contrib_gemm", _gemm_rel, lambda d, w, b, r, attrs: gemm_ref(d, w, b, r, attrs),
      OUT_ELEMWISE_FUSABLE, args=("data", "weight", "bias", "residual"), attrs=GemmAttrs,
      doc="A dense/matmul/batch_matmul with its epilogue (bias, activations, residual).")


def contrib_gemm(data: Any, weight: Any, bias: Any, residual: Any, **attrs: Any) -> Any:
    """A call of ``nn.contrib_gemm`` (see the module docstring)."""
    return call("nn.contrib_gemm", data, weight, bias, residual, attrs=GemmAttrs(**attrs))


def contrib_gemm_pack(weight: Any, nr: int, transpose: bool = True) -> Any:
    """A call of ``nn.contrib_gemm_pack``."""
    return call("nn.contrib_gemm_pack", weight, attrs=GemmPackAttrs(nr, transpose))
