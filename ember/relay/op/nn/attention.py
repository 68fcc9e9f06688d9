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

With ``?`` dimensions (as ``nn.contrib_gemm``'s views have them) a slot of ``qk_view``,
``pv_view`` then ``out_shape`` is multiplied by the operand dimensions ``view_syms`` pairs it
with (dims of q, then k, then v), ``view_eqs`` pairs dimensions that must agree, and with
``mask_from_shape`` the mask's strides come from its shape at run time (right-aligned into
the scores of rank ``scores_rank``: (batch, rows, keys) or (outer, heads, rows, keys), 0 along a
dimension of 1; every other dimension must equal the scores'). The kernel checks all of this
at each call.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ....ir.types import TensorType, Type
from ....te import tensor as te
from ....tir import op as tir
from ....topi.nn import attention_kernel as ak
from ....topi.nn.sizes import dims
from .._compute_common import out_dims
from .._attrs_base import OpAttrs, attrs_class
from .._reg import OPAQUE, call, defop
from .._shape import fail, tensor_of
from .gemm import (GemmAttrs, _gemm_rel, _generic_sizes, _span, equal_dims, gemm_ref,
                   int32_fields, narrow, read_axes, reads_inside, sym_slots, sym_type_dim,
                   view_fields, whole_groups, wide)

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
    view_syms: tuple[int, ...] = ()
    view_eqs: tuple[int, ...] = ()
    mask_from_shape: bool = False
    scores_rank: int = 4
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
        self._bool("mask_select", "mask_from_shape")
        self._set("alpha", float(self.alpha))
        self._int("scores_rank")
        self._choice("scores_rank", (3, 4))
        for name in ("view_syms", "view_eqs"):
            self._ints(name, scalar_ok=False)
            self._positive(name, allow_zero=True)
            if len(getattr(self, name)) % 2:
                raise self._invalid(name, "pairs of ints")
        if any(slot >= 2 * VIEW_LEN + len(self.out_shape) for slot in self.view_syms[::2]):
            raise self._invalid("view_syms", "(slot, dim) pairs with slots in the views and "
                                "out_shape")
        if self.mask_from_shape and self.mask_strides:
            raise self._invalid("mask_from_shape", "without mask_strides")
        if self.mask_from_shape and not self.view_syms:
            # static sizes give the mask's strides at build time (mask_strides)
            raise self._invalid("mask_from_shape", "only with view_syms (run-time sizes)")
        qk, pv = view_fields(self.qk_view), view_fields(self.pv_view)
        refs = {s: sorted(d for t, d in zip(self.view_syms[::2], self.view_syms[1::2]) if t == s)
                for s in range(2 * VIEW_LEN)}
        same = [(0, VIEW_LEN), (11, VIEW_LEN + 11), (1, VIEW_LEN + 1), (2, VIEW_LEN + 3)]
        if (qk["batch"], qk["heads"], qk["M"], qk["N"]) != (pv["batch"], pv["heads"], pv["M"],
                                                          pv["K"]) or any(
                refs[x] != refs[y] for x, y in same):
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


def resolve_views(attrs: AttentionAttrs, *shapes: Sequence[Any]) -> tuple[tuple, tuple, tuple]:
    """(qk_view, pv_view, out_shape) with the operand dimensions of ``view_syms`` multiplied
    in (q, k and v's ``shapes``: ints, or te sizes for the kernel)."""
    slots = sym_slots((*attrs.qk_view, *attrs.pv_view, *attrs.out_shape), attrs.view_syms,
                      shapes)
    return (tuple(slots[:VIEW_LEN]), tuple(slots[VIEW_LEN:2 * VIEW_LEN]),
            tuple(slots[2 * VIEW_LEN:]))


def _static(attrs: AttentionAttrs, shapes: Sequence[Sequence[int]],
            mask_shape: Sequence[int] | None) -> AttentionAttrs:
    """``attrs`` at these static sizes of q, k, v (and the mask's, for its strides)."""
    qk, pv, out = resolve_views(attrs, *shapes)
    strides: tuple = ()
    if attrs.mask_from_shape and mask_shape is not None:
        strides, pairs = broadcast_mask_strides(
            mask_shape, _scores_extents(qk, attrs.scores_rank), view_fields(qk)["heads"])
        if any(d not in (1, e) for d, e in pairs):  # as the kernel checks at each call
            raise ValueError(f"nn.contrib_attention: the mask {tuple(mask_shape)} does not "
                             "broadcast into the scores (a dimension is neither 1 nor the "
                             "scores')")
    return dataclasses.replace(attrs, qk_view=qk, pv_view=pv, out_shape=out, view_syms=(),
                               view_eqs=(), mask_from_shape=False,
                               mask_strides=strides or attrs.mask_strides)


def mask_dim_strides(mask_shape: Sequence[Any], extents: Sequence[Any]) -> tuple[list, list]:
    """The strides of a dense mask right-aligned into scores of ``extents``, one per extent (0
    along a dimension of 1: ``Select`` where that is known only at run time), and the pairs
    (mask dim, extent) that must be equal unless the mask dim is 1."""
    shape = [1] * (len(extents) - len(mask_shape)) + list(mask_shape)
    strides: list[Any] = []
    size: Any = 1
    for d in reversed(shape):
        strides.append(0 if isinstance(d, int) and d == 1 else
                       size if isinstance(d, int) else
                       tir.Select_(tir.convert(d).equal(1), 0, size))
        size = size * d
    strides.reverse()
    pairs = [(d, e) for d, e in zip(shape, extents) if not (isinstance(d, int) and d == 1)]
    return strides, pairs


def broadcast_mask_strides(mask_shape: Sequence[Any], extents: Sequence[Any],
                           heads: Any) -> tuple[tuple, list]:
    """(outer, head, row, key) strides of a mask broadcast into scores of ``extents``
    ((batch, rows, keys) or (outer, heads, rows, keys)), and ``mask_dim_strides``' pairs: a
    batch b = outer * heads + head of 3-d scores is read at b * stride."""
    strides, pairs = mask_dim_strides(mask_shape, extents)
    lead = (strides[0] * heads, strides[0]) if len(extents) == 3 else tuple(strides[:2])
    return (*lead, *strides[-2:]), pairs


def _scores_extents(qk_view: Sequence[Any], rank: int) -> tuple:
    """The scores' extents: (batch, rows, keys) or (outer, heads, rows, keys)."""
    v = view_fields(tuple(qk_view))
    if rank == 3:
        return v["batch"], v["M"], v["N"]
    b, h = v["batch"], v["heads"]
    outer = b // h if isinstance(b, int) and isinstance(h, int) else tir.floordiv(b, h)
    return outer, h, v["M"], v["N"]


def _mask_extents(attrs: AttentionAttrs) -> tuple[int, int, int, int]:
    v = view_fields(attrs.qk_view)
    return v["batch"] // v["heads"], v["heads"], v["M"], v["N"]


def _sym_rel(args: list[TensorType], attrs: AttentionAttrs) -> TensorType:
    """The type with ``?`` sizes: the static checks at a generic size of them (as
    ``nn.contrib_gemm``'s), the output's ``?`` where a slot is not one operand dimension."""
    op = "nn.contrib_attention"
    q, k, v, bias, mask = args
    sizes = (*q.shape, *k.shape, *v.shape)
    for dim in (*attrs.view_syms[1::2], *attrs.view_eqs):
        if dim >= len(sizes):
            raise fail(op, f"the views refer to operand dimension {dim}, but q, k and v have "
                           f"{len(sizes)} dimensions together")
    point = _generic_sizes(sizes, attrs.view_eqs)
    ranks = (q.ndim, q.ndim + k.ndim)
    shapes = (point[:ranks[0]], point[ranks[0]:ranks[1]], point[ranks[1]:])
    generic = [tensor_of(s, "float32") for s in shapes]
    _rel([*generic, bias, tensor_of((), "float32")], _static(attrs, shapes, None))
    if attrs.mask_from_shape and (mask.dtype != "float32" or mask.ndim > attrs.scores_rank):
        raise fail(op, f"the mask must be float32 of rank at most {attrs.scores_rank} (the "
                       f"scores'), got {mask.dtype} {tuple(mask.shape)}")
    return tensor_of([sym_type_dim(c, 2 * VIEW_LEN + i, attrs.view_syms, sizes)
                      for i, c in enumerate(attrs.out_shape)], q.dtype)


def _rel(args: list[TensorType], attrs: AttentionAttrs) -> TensorType:
    op = "nn.contrib_attention"
    q, k, v, bias, mask = args
    for t in args[:3]:
        if t.dtype != "float32":
            raise fail(op, f"the fused attention is float32 only, got {t.dtype}")
    if attrs.view_syms:
        return _sym_rel(args, attrs)
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
    if attrs.view_syms:
        attrs = _static(attrs, (q.shape, k.shape, v.shape), mask.shape)
    zero = np.zeros((), np.float32)
    s = gemm_ref(q, k, bias, zero, scores_attrs(attrs)).astype(np.float64)
    if attrs.mask_strides:
        m = _mask_view(mask, attrs)
        s = np.where(m != 0, m, s) if attrs.mask_select else s + m
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    return gemm_ref(p, v, zero, zero, values_attrs(attrs))


def _operands(qk_view: tuple, pv_view: tuple, mask_strides: tuple) -> ak.AttentionOperands:
    qk, pv = view_fields(qk_view), view_fields(pv_view)
    return ak.AttentionOperands(
        qk["batch"], qk["heads"], qk["M"], qk["N"], qk["K"], pv["N"],
        (qk["a_bs"], qk["a_hs"], qk["lda"]), (qk["b_bs"], qk["b_hs"], qk["b_ks"], qk["b_ns"]),
        (pv["b_bs"], pv["b_hs"], pv["b_ks"], pv["b_ns"]), (pv["c_bs"], pv["c_hs"], pv["ldc"]),
        tuple(mask_strides) or (0, 0, 0, 0))


def checked_views(attrs: AttentionAttrs, q: te.Tensor, k: te.Tensor, v: te.Tensor,
                  mask: te.Tensor) -> tuple[tuple, tuple, tuple, list]:
    """With ``?`` sizes: (qk_view, pv_view, mask strides, checks), the views and strides
    formed in int64 (``gemm.wide``) for the checks, then int32 for the kernel."""
    qk, pv, _ = resolve_views(attrs, wide(q.shape), wide(k.shape), wide(v.shape))
    strides, checks = _sym_checks(attrs, qk, pv, q, k, v, mask)
    return narrow(qk), narrow(pv), narrow(strides), checks


def _sym_checks(attrs: AttentionAttrs, qk_view: tuple, pv_view: tuple, q: te.Tensor,
                k: te.Tensor, v: te.Tensor, mask: te.Tensor) -> tuple[tuple, list]:
    """With ``?`` sizes: the mask strides from its shape and what the kernel checks first
    (the dimensions the views share, the mask's, and that Q, K and V are read in bounds),
    over int64 views."""
    op = "nn.contrib_attention"
    where = f"{op}: "
    checks = equal_dims((q, k, v), attrs.view_eqs, where)
    qk, pv = view_fields(qk_view), view_fields(pv_view)
    checks += whole_groups(qk["batch"], qk["heads"], where)
    strides: tuple = ()
    if attrs.mask_from_shape:
        strides, pairs = broadcast_mask_strides(
            wide(mask.shape), _scores_extents(qk_view, attrs.scores_rank), qk["heads"])
        for d, e in pairs:
            checks.append((tir.any(tir.convert(d).equal(1), tir.convert(d).equal(e)),
                           f"{op}: the mask does not broadcast into the scores (a dimension "
                           "is neither 1 nor the scores')"))
    checks.append((tir.convert(qk["N"]) >= 1, f"{op}: a softmax over no keys"))
    checks += [reads_inside(q, read_axes(qk, "a"), where, "Q"),
               reads_inside(k, read_axes(qk, "b"), where, "K"),
               reads_inside(v, read_axes(pv, "b"), where, "V")]
    return strides, checks + int32_fields((*qk_view, *pv_view, *strides), op)


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    q, k, v, bias, mask = inputs
    qk, pv, shape = attrs.qk_view, attrs.pv_view, tuple(attrs.out_shape)
    strides, checks = tuple(attrs.mask_strides), []
    if attrs.view_syms:
        _, _, shape = resolve_views(attrs, dims(q.shape), dims(k.shape), dims(v.shape))
        qk, pv, strides, checks = checked_views(attrs, q, k, v, mask)
        shape = out_dims(out_type, shape)
    has_mask = bool(attrs.mask_strides or attrs.mask_from_shape)
    return [ak.attention(q, k, v, bias if attrs.has_bias else None,
                         mask if has_mask else None, _operands(qk, pv, strides), attrs.alpha,
                         shape, mask_select=attrs.mask_select, checks=checks)]


defop("nn.contrib_attention", _rel, attention_ref, OPAQUE,
      args=("q", "k", "v", "bias", "mask"), attrs=AttentionAttrs,
      doc="softmax(alpha * Q K + bias + mask) V in one kernel (heads read through strides).",
      compute=_compute)


def contrib_attention(q: Any, k: Any, v: Any, bias: Any, mask: Any, **attrs: Any) -> Any:
    """A call of ``nn.contrib_attention`` (see the module docstring)."""
    return call("nn.contrib_attention", q, k, v, bias, mask, attrs=AttentionAttrs(**attrs))
