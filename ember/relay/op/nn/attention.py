"""``nn.contrib_attention(q, k, v, bias, mask)``: what FuseAttention rewrites
``contrib_gemm(Q, K) -> [add mask] -> softmax(last axis) -> contrib_gemm(P, V)`` into, for
static shapes:

  ``O[b] = softmax(alpha * Q[b] K[b] + bias + mask[b]) V[b]``

``qk_view`` and ``pv_view`` are the two ``nn.contrib_gemm`` views (15 ints, see
``relay/op/nn/gemm.py``; the same heads): the first reads Q and K (its output part is the
dense (batch, M, N) scores), the second reads V and writes the output of ``out_shape`` (its A
part is the dense probabilities). ``bias`` (when ``has_bias``) is a scalar or one value per key;
``mask`` (when ``mask_strides`` is set: 4 ints, outer, head, row and key strides, 0 where it
broadcasts) is added after the scale, or with ``mask_select`` replaces each score where it
is nonzero (a ``where(cond, scores, fill)``: the fill whatever the score, NaN too). The scores never reach memory: the C kernel
(``topi.nn.attention_kernel``) keeps a block of query rows in L2 between the products.
"""
from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....topi.nn import attention_kernel as ak
from .._attrs_base import OpAttrs, attrs_class
from .._reg import OPAQUE, call, defop
from .._shape import fail, tensor_of
from .gemm import GemmAttrs, _gemm_rel, _span, gemm_ref, view_fields

__all__: list[str] = []
VIEW_LEN = 15
# The default: one 1 x 1 product (every attrs field has a default)
UNIT_VIEW = (1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0)


@attrs_class("AttentionAttrs")
class AttentionAttrs(OpAttrs):
    """nn.contrib_attention: the two products' views, the scale, bias and mask strides."""

    qk_view: tuple[int, ...] = UNIT_VIEW
    pv_view: tuple[int, ...] = UNIT_VIEW
    out_shape: tuple[int, ...] = (1, 1, 1)
    alpha: float = 1.0
    has_bias: bool = False
    mask_strides: tuple[int, ...] = ()
    mask_select: bool = False
    _op: ClassVar[str] = "nn.contrib_attention"

    def __post_init__(self) -> None:
        self._ints("qk_view", length=(VIEW_LEN,), scalar_ok=False)
        self._ints("pv_view", length=(VIEW_LEN,), scalar_ok=False)
        self._ints("out_shape", scalar_ok=False)
        self._ints("mask_strides", length=(0, 4), scalar_ok=False)
        self._positive("qk_view", allow_zero=True)
        self._positive("pv_view", allow_zero=True)
        self._positive("mask_strides", allow_zero=True)
        self._positive("out_shape")
        self._bool("has_bias")
        self._bool("mask_select")
        self._set("alpha", float(self.alpha))
        qk, pv = view_fields(self.qk_view), view_fields(self.pv_view)
        if (qk["batch"], qk["heads"], qk["M"], qk["N"]) != (pv["batch"], pv["heads"], pv["M"],
                                                          pv["K"]):
            raise self._invalid("pv_view", "the same batch, heads and rows as qk_view, reducing "
                                "over its keys")
        if min(qk["batch"], qk["M"], qk["N"], pv["N"]) < 1:
            raise self._invalid("qk_view", "at least one batch item, query row, key and value "
                                "column (a softmax over no keys has no value)")


def scores_attrs(attrs: AttentionAttrs) -> GemmAttrs:
    """The scores product (dense (batch, M, N) output) as an ``nn.contrib_gemm``."""
    v = view_fields(attrs.qk_view)
    b, h, M, N = v["batch"], v["heads"], v["M"], v["N"]
    view = (*attrs.qk_view[:9], h * M * N, N, h, v["a_hs"], v["b_hs"], M * N)
    return GemmAttrs(kind="batch_matmul", transpose_b=False, alpha=attrs.alpha,
                     has_bias=attrs.has_bias, view=view,
                     out_shape=(b, M, N))


def values_attrs(attrs: AttentionAttrs) -> GemmAttrs:
    """The second product (reading dense probabilities) as an ``nn.contrib_gemm``."""
    v = view_fields(attrs.pv_view)
    h, M, K = v["heads"], v["M"], v["K"]
    view = (*attrs.pv_view[:4], h * M * K, K, *attrs.pv_view[6:12], M * K, v["b_hs"],
            v["c_hs"])
    return GemmAttrs(kind="batch_matmul", transpose_b=False, view=view,
                     out_shape=attrs.out_shape)


def _mask_extents(attrs: AttentionAttrs) -> tuple[int, int, int, int]:
    v = view_fields(attrs.qk_view)
    return v["batch"] // v["heads"], v["heads"], v["M"], v["N"]


def _rel(args: list[TensorType], attrs: AttentionAttrs) -> TensorType:
    op = "nn.contrib_attention"
    q, k, v, bias, mask = args
    for t in args[:3]:
        if t.dtype != "float32":
            raise fail(op, f"the fused attention is float32 only, got {t.dtype}")
    scores = _gemm_rel([q, k, bias, tensor_of((), q.dtype)], scores_attrs(attrs))
    out = _gemm_rel([scores, v, tensor_of((), q.dtype), tensor_of((), q.dtype)],
                    values_attrs(attrs))
    if attrs.mask_strides:
        if mask.dtype != "float32" or not all(isinstance(d, int) for d in mask.shape):
            raise fail(op, f"the mask must be float32 of static shape, got {mask.dtype} "
                           f"{tuple(mask.shape)}")
        size = math.prod(mask.shape)
        reach = _span(_mask_extents(attrs), attrs.mask_strides)
        if reach > size:
            raise fail(op, f"the mask strides {attrs.mask_strides} read up to element "
                           f"{reach - 1}, but the mask has {size} elements")
    return out


def _mask_view(mask: np.ndarray, attrs: AttentionAttrs) -> np.ndarray:
    flat = np.ascontiguousarray(mask).reshape(-1)
    ext = _mask_extents(attrs)
    return np.lib.stride_tricks.as_strided(
        flat, ext, tuple(s * flat.itemsize for s in attrs.mask_strides),
        writeable=False).reshape(-1, ext[2], ext[3])


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray,
                  mask: np.ndarray, attrs: AttentionAttrs) -> np.ndarray:
    """numpy: the unfused products and numpy's softmax formula (a row of -inf gives NaN)."""
    zero = np.zeros((), np.float32)
    s = gemm_ref(q, k, bias, zero, scores_attrs(attrs)).astype(np.float64)
    if attrs.mask_strides:
        m = _mask_view(mask, attrs)
        s = np.where(m != 0, m, s) if attrs.mask_select else s + m
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    return gemm_ref(p, v, zero, zero, values_attrs(attrs))


def _operands(attrs: AttentionAttrs) -> ak.AttentionOperands:
    qk, pv = view_fields(attrs.qk_view), view_fields(attrs.pv_view)
    return ak.AttentionOperands(
        qk["batch"], qk["heads"], qk["M"], qk["N"], qk["K"], pv["N"],
        (qk["a_bs"], qk["a_hs"], qk["lda"]), (qk["b_bs"], qk["b_hs"], qk["b_ks"], qk["b_ns"]),
        (pv["b_bs"], pv["b_hs"], pv["b_ks"], pv["b_ns"]), (pv["c_bs"], pv["c_hs"], pv["ldc"]),
        tuple(attrs.mask_strides) or (0, 0, 0, 0))


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    q, k, v, bias, mask = inputs
    return [ak.attention(q, k, v, bias if attrs.has_bias else None,
                         mask if attrs.mask_strides else None, _operands(attrs), attrs.alpha,
                         tuple(attrs.out_shape), mask_select=attrs.mask_select)]


defop("nn.contrib_attention", _rel, attention_ref, OPAQUE,
      args=("q", "k", "v", "bias", "mask"), attrs=AttentionAttrs,
      doc="softmax(alpha * Q K + bias + mask) V in one kernel (heads read through strides).",
      compute=_compute)


def contrib_attention(q: Any, k: Any, v: Any, bias: Any, mask: Any, **attrs: Any) -> Any:
    """A call of ``nn.contrib_attention`` (see the module docstring)."""
    return call("nn.contrib_attention", q, k, v, bias, mask, attrs=AttentionAttrs(**attrs))
