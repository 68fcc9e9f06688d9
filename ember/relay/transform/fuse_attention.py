"""FuseAttention: ``contrib_gemm(Q, K) -> [add mask] -> softmax(last axis) -> contrib_gemm(P,
V)`` becomes one ``nn.contrib_attention`` (``relay/op/nn/attention.py``), whose kernel keeps
each block of score rows in cache between the two products instead of writing the whole
(batch, heads, seq_q, seq_k) scores and probabilities to memory and reading them back.

Runs after FoldGemmViews (the heads are then strides of the GEMMs' views). Taken when:

- the scores GEMM is a float32 ``batch_matmul`` with no activation (its scale, a bias of one
  value or one per key, and a residual of its output's shape, which is a mask, are kept),
  writing dense (batch, M, N) scores, used (directly or through reshapes, each used once)
  only by the softmax, or by an ``add`` of a float32 mask that broadcasts into the scores
  without widening them, or by a causal ``where(constant cond, scores, lowest float)``, used
  only by the softmax;
- the softmax is over the last axis and used only by the second GEMM, a plain product (no
  scale, bias, activation or residual) reading the probabilities as its dense A;
- both views agree on the heads, and the keys fit the kernel's buffers
  (``MAX_KEYS``; longer sequences keep the three kernels).

With ``?`` dimensions (views with ``view_syms``) the same, less the ``where`` and the
reshapes between the scores and the softmax, plus a scale by a scalar constant there (which
FuseGemmEpilogue takes only through static reshapes; the scores' bias is scaled with it); the
mask's strides then come from its shape at run time, and the kernel checks that it does not
widen the scores. The number of keys is known only at run time: past ``MAX_KEYS`` the kernel's row blocks shrink to one
register tile (its buffers are sized at run time: correct, slower than three kernels).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ..op.nn.attention import mask_dim_strides
from ..op.nn.gemm import HEAD_FIELDS, VIEW_FIELDS, view_fields
from ._helpers import UsesMutator, fusion_bounded, op_call, op_name, rewrite_functions, use_counts
from ._view_dims import Sym, divide, encode, rank, size_of
from .fuse_gemm_epilogue import _RESHAPES

# A where's fill the kernel takes (mask_select): nonzero, and as low as a causal mask's (the
# lowest float32 or -inf), so that no score it replaces could have mattered.
FILL_LIMIT = -1e37
# Beyond this many keys even one register tile of score rows outgrows L2: three kernels.
MAX_KEYS = 8192



def _shape(e: Any) -> tuple[int, ...] | None:
    t = getattr(e, "checked_type", None)
    shape = getattr(t, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape)


def _dtype(e: Any) -> str | None:
    return getattr(getattr(e, "checked_type", None), "dtype", None)


def gemm_view(g: Call) -> tuple[int, ...] | None:
    """A batched contrib_gemm's view as 15 ints (a plain one's from its shapes), or None."""
    a = g.attrs
    if a.kind != "batch_matmul" or a.packed_n:
        return None
    if a.view_syms:  # sizes known at run time: _Fuser._fuse_symbolic's
        return None
    if a.view:
        return tuple(a.view) + ((1, 0, 0, 0) if len(a.view) == 11 else ())
    x, w, out = _shape(g.args[0]), _shape(g.args[1]), _shape(g)
    if x is None or w is None or out is None or len(x) != 3 or len(w) != 3:
        return None
    (bx, M, K), (bw, r, c) = x, w
    N = r if a.transpose_b else c
    b_ks, b_ns = (1, K) if a.transpose_b else (N, 1)
    return (out[0], M, N, K, 0 if bx == 1 else M * K, K, 0 if bw == 1 else r * c, b_ks, b_ns,
            M * N, N, 1, 0, 0, 0)


def with_heads(view: tuple[int, ...], heads: int) -> tuple[int, ...] | None:
    """``view`` with its batch split as (batch // heads, heads): a view of one head group reads
    batch b at b * bs = (b // heads) * (heads * bs) + (b % heads) * bs."""
    v = view_fields(view)
    if v["heads"] == heads:
        return view
    if v["heads"] != 1 or v["batch"] % heads:
        return None
    return (*view[:4], v["a_bs"] * heads, view[5], v["b_bs"] * heads, *view[7:9],
            v["c_bs"] * heads, view[10], heads, v["a_bs"], v["b_bs"], v["c_bs"])


def _dense(view: tuple[int, ...], bs: str, hs: str, rows: int, cols: int) -> bool:
    """Whether an operand of the view lies as a dense (batch, rows, cols) array."""
    v = view_fields(view)
    h = v["heads"]
    return all((b // h) * v[bs] + (b % h) * v[hs] == b * rows * cols for b in range(v["batch"]))


def _float32_shape(e: Any) -> tuple[int, ...] | None:
    """The static shape of a float32 value (a constant this pass made has no type yet)."""
    if isinstance(e, Constant):
        return tuple(e.data.shape) if e.data.dtype == "float32" else None
    return _shape(e) if _dtype(e) == "float32" else None


def _plain(attrs: Any) -> bool:
    return (attrs.alpha == 1.0 and not attrs.has_bias and not attrs.has_residual
            and attrs.act1 == "none" and attrs.act2 == "none")


def mask_strides(shape: tuple[int, ...] | None, scores: tuple[int, ...], batch: int,
                 heads: int) -> tuple[int, ...] | None:
    """(outer, head, row, key) strides of a float32 mask of ``shape`` that broadcasts into
    scores of shape ``scores`` (whose leading dims hold the batch of ``batch`` = outer x
    ``heads`` in row-major order), 0 where it broadcasts; None when it does not fit."""
    if shape is None or len(shape) > len(scores) or math.prod(scores[:-2]) != batch:
        return None
    strides, pairs = mask_dim_strides(shape, scores)
    if any(m != s for m, s in pairs):
        return None
    lead = scores[:-2]
    offsets = [sum(int(i) * st for i, st in zip(np.unravel_index(b, lead), strides))
               for b in range(batch)] if lead else [0]
    hs = offsets[1] - offsets[0] if heads > 1 else 0
    bs = offsets[heads] if batch > heads else 0
    if any(off != b // heads * bs + b % heads * hs for b, off in enumerate(offsets)):
        return None
    return (bs, hs, *strides[-2:])


class _Fuser(UsesMutator):
    def _once(self, e: Any) -> bool:
        return self.uses.get(id(e), 0) == 1

    def visit_call(self, orig: Call) -> RelayExpr:
        fused = self._fuse(orig) if op_name(orig) == "nn.contrib_gemm" else None
        return fused if fused is not None else super().visit_call(orig)

    def _selected(self, w: Call, scores: tuple[int, ...]) -> tuple[Any, Any]:
        """(scores, additive mask) of ``where(cond, scores, fill)`` with a constant boolean
        cond (a causal mask) and a fill at or below FILL_LIMIT (or -inf): the mask is 0 where
        cond holds, else the fill, which the kernel puts in place of the score
        (``mask_select``: a NaN or infinite score where cond is false is dropped, as where
        drops it)."""
        cond, x, fill = w.args
        if (not isinstance(cond, Constant) or cond.data.dtype != "bool"
                or not isinstance(fill, Constant) or fill.data.shape != ()
                or fill.data.dtype != "float32" or _shape(x) != scores):
            return None, None
        value = float(fill.data.numpy())
        if not value <= FILL_LIMIT:
            return None, None
        keep = cond.data.numpy()
        return x, const(np.where(keep, np.float32(0), np.float32(value)).astype(np.float32))

    def _fuse(self, g2: Call) -> RelayExpr | None:
        if g2.attrs.view_syms:
            return self._fuse_symbolic(g2)
        sm = g2.args[0]
        if not _plain(g2.attrs) or op_name(sm) != "nn.softmax" or not self._once(sm):
            return None
        scores = _shape(sm)
        if scores is None or sm.attrs.axis not in (-1, len(scores) - 1):
            return None
        x, mask = sm.args[0], None
        select = op_name(x) == "where"
        if select and self._once(x):
            x, mask = self._selected(x, scores)
            if x is None:
                return None
        elif op_name(x) == "add" and self._once(x):
            lhs, rhs = x.args
            x, mask = (lhs, rhs) if op_name(lhs) == "nn.contrib_gemm" else (rhs, lhs)
            if _shape(x) != scores:
                return None
        while op_name(x) in _RESHAPES and self._once(x):  # the dense scores, reshaped
            x = x.args[0]
        g1 = x
        if op_name(g1) != "nn.contrib_gemm" or not self._once(g1) or _dtype(g1) != "float32":
            return None
        a1 = g1.attrs
        if a1.act1 != "none" or a1.act2 != "none":
            return None
        if a1.has_residual:  # a mask FuseGemmEpilogue took in (T5's position bias)
            if mask is not None or _shape(g1.args[3]) != _shape(g1):
                return None
            mask = g1.args[3]
        if a1.has_bias and len(_shape(g1.args[2]) or (0, 0)) > 1:
            return None
        v1, v2, out = gemm_view(g1), gemm_view(g2), _shape(g2)
        if v1 is None or v2 is None or out is None:
            return None
        heads = max(view_fields(v1)["heads"], view_fields(v2)["heads"])
        v1, v2 = with_heads(v1, heads), with_heads(v2, heads)
        if v1 is None or v2 is None:
            return None
        f1, f2 = view_fields(v1), view_fields(v2)
        batch, M, N = f1["batch"], f1["M"], f1["N"]
        if ((f2["batch"], f2["M"], f2["K"]) != (batch, M, N) or N > MAX_KEYS
                or min(batch, M, N, f2["N"]) < 1
                or f1["ldc"] != N or f2["lda"] != N or math.prod(scores) != batch * M * N
                or scores[-2:] != (M, N) or not _dense(v1, "c_bs", "c_hs", M, N)
                or not _dense(v2, "a_bs", "a_hs", M, N)):
            return None
        strides: tuple[int, ...] = ()
        if mask is not None:
            shape = _float32_shape(mask)
            if a1.has_residual:  # laid out like the dense scores
                shape = scores if shape is not None else None
            strides = mask_strides(shape, scores, batch, heads) or ()
            if not strides:
                return None
        zero = const(0.0)
        return op_call("nn.contrib_attention", self.visit(g1.args[0]), self.visit(g1.args[1]),
                       self.visit(g2.args[1]),
                       self.visit(g1.args[2]) if a1.has_bias else zero,
                       self.visit(mask) if mask is not None else zero,
                       qk_view=v1, pv_view=v2, out_shape=out, alpha=a1.alpha,
                       has_bias=a1.has_bias, mask_strides=strides,
                       mask_select=select)


    def _fuse_symbolic(self, g2: Call) -> RelayExpr | None:
        """``_fuse`` for views with ``?`` sizes (``_sym_views``): an add of a mask (its
        strides from its shape at run time) and a scale by a scalar constant between the
        scores and the softmax; no reshapes, no ``where``."""
        sm = g2.args[0]
        if (not _plain(g2.attrs) or op_name(sm) != "nn.softmax" or not self._once(sm)
                or sm.attrs.axis not in (-1, rank(sm) - 1)):
            return None
        x, mask, scale = sm.args[0], None, 1.0
        if op_name(x) == "add" and self._once(x):
            lhs, rhs = x.args
            x, mask = (lhs, rhs) if op_name(lhs) in _SCORES else (rhs, lhs)
        if op_name(x) in ("divide", "multiply") and self._once(x):
            c = _scalar(x.args[1])
            if c is None or c == 0.0:
                return None
            x, scale = x.args[0], (1.0 / c if op_name(x) == "divide" else c)
        g1 = x
        if (op_name(g1) != "nn.contrib_gemm" or not self._once(g1) or _dtype(g1) != "float32"
                or g1.attrs.act1 != "none" or g1.attrs.act2 != "none"
                or g1.attrs.has_residual
                or (g1.attrs.has_bias and (rank(g1.args[2]) or 0) > 1)):
            return None
        views = _sym_views(g1, g2)
        if views is None:
            return None
        qk, pv, out, eqs, scores = views
        if len(scores) != rank(sm) or (mask is not None and not _mask_fits(mask, scores)):
            return None
        q, k, v = g1.args[0], g1.args[1], g2.args[1]
        encoded = _encode_sym((*qk, *pv, *out), eqs, (rank(q), rank(k), rank(v)))
        ints, syms, eq_dims = encoded
        zero = const(0.0)
        bias = self.visit(g1.args[2]) if g1.attrs.has_bias else zero
        if scale != 1.0 and g1.attrs.has_bias:  # the kernel scales Q K, not the bias: (QK + b) s
            bias = op_call("multiply", bias, const(np.float32(scale)))  # FoldConstant folds it
        return op_call("nn.contrib_attention", self.visit(q), self.visit(k), self.visit(v),
                       bias, self.visit(mask) if mask is not None else zero,
                       qk_view=ints[:15], pv_view=ints[15:30], out_shape=ints[30:],
                       alpha=g1.attrs.alpha * scale, has_bias=g1.attrs.has_bias,
                       mask_from_shape=mask is not None, scores_rank=len(scores),
                       view_syms=syms, view_eqs=eq_dims)


# ---------------------------------------------------------------- views with ? sizes
_SCORES = ("nn.contrib_gemm", "divide", "multiply")
_Q, _K, _V, _P = range(4)  # whose dimension a run-time size is: q, k, v or the probabilities
_FIELDS = VIEW_FIELDS + HEAD_FIELDS


def _scalar(e: Any) -> float | None:
    if isinstance(e, Constant) and e.data.shape == () and e.data.dtype == "float32":
        return float(e.data.numpy())
    return None


def _fields(g: Call, data: int, weight: int) -> tuple[list, list, list] | None:
    """A batched gemm's 15 view fields and out_shape as sizes (``_view_dims.Sym``) over
    (``data`` or ``weight``, dim) refs, and the ref pairs its kernel checks equal."""
    a = g.attrs
    if not a.view or a.kind != "batch_matmul" or a.packed_n:
        return None
    n, data_rank = len(a.view), rank(g.args[0])

    def ref(d: int) -> tuple[int, int]:
        return (data, d) if d < data_rank else (weight, d - data_rank)

    slots: list[Any] = [*a.view, *((1, 0, 0, 0) if n == 11 else ()), *a.out_shape]
    for slot, d in zip(a.view_syms[::2], a.view_syms[1::2]):
        at = slot if slot < n else slot + 15 - n
        slots[at] = slots[at] * Sym(1, (ref(d),))
    eqs = [(ref(x), ref(y)) for x, y in zip(a.view_eqs[::2], a.view_eqs[1::2])]
    return slots[:15], slots[15:], eqs


def _subst(x: Any, mapping: dict) -> Any:
    if not isinstance(x, Sym):
        return x
    out: Any = x.coef
    for r in x.refs:
        out = out * Sym(1, (mapping.get(r, r),))
    return out


def _match(x2: Any, x1: Any, mapping: dict) -> bool:
    """Whether ``x2`` (a size of the probabilities) is ``x1`` (the scores'), extending
    ``mapping`` (a probabilities dimension -> the q/k dimension it equals)."""
    x2 = _subst(x2, mapping)
    if x2 == x1:
        return True
    if not (isinstance(x1, Sym) and isinstance(x2, Sym)) or x1.coef != x2.coef:
        return False
    r2, r1 = Counter(x2.refs) - Counter(x1.refs), Counter(x1.refs) - Counter(x2.refs)
    if sum(r2.values()) != 1 or sum(r1.values()) != 1 or next(iter(r2))[0] != _P:
        return False
    mapping[next(iter(r2))] = next(iter(r1))
    return True


def _sym_views(g1: Call, g2: Call) -> tuple | None:
    """(qk fields, pv fields, output shape, ref pairs to check equal, scores shape) of the
    two products over q, k and v's dimensions: the probabilities' sizes are the scores'
    (the mask is checked not to widen them), so their refs map onto q's and k's."""
    f1, f2 = _fields(g1, _Q, _K), _fields(g2, _P, _V)
    if f1 is None or f2 is None:
        return None
    (v1, scores, e1), (v2, out, e2) = f1, f2
    a, b = dict(zip(_FIELDS, v1)), dict(zip(_FIELDS, v2))
    if not isinstance(a["heads"], int) or a["heads"] != b["heads"]:
        return None
    mapping: dict = {}
    if not all(_match(b[x2], a[x1], mapping) for x2, x1 in (("batch", "batch"), ("M", "M"),
                                                             ("K", "N"))):
        return None
    v2, out = [_subst(f, mapping) for f in v2], [_subst(d, mapping) for d in out]
    e2 = [(mapping.get(x, x), mapping.get(y, y)) for x, y in e2]
    if any(r[0] == _P for f in (*v2, *out) if isinstance(f, Sym) for r in f.refs) or any(
            r[0] == _P for pair in e2 for r in pair):
        return None
    b = dict(zip(_FIELDS, v2))
    batch, heads, M, N = a["batch"], a["heads"], a["M"], a["N"]
    if (a["ldc"] != N or b["lda"] != N or size_of(scores) != batch * M * N
            or tuple(scores[-2:]) != (M, N) or not _sym_dense(a, "c_bs", "c_hs", M * N)
            or not _sym_dense(b, "a_bs", "a_hs", M * N)
            or (len(scores) == 4 and scores[1] != heads) or len(scores) not in (3, 4)
            or (len(scores) == 3 and heads != 1)):
        return None
    return v1, v2, out, e1 + e2, scores


def _sym_dense(f: dict, bs: str, hs: str, item: Any) -> bool:
    """Whether an operand of a view lies as a dense (batch, rows, cols) array of ``item``
    elements per batch."""
    heads = f["heads"]
    outer = divide(f["batch"], heads)
    return (heads == 1 or f[hs] == item) and (outer == 1 or f[bs] == heads * item)


def _mask_fits(mask: Any, scores: list) -> bool:
    """A float32 mask that may broadcast into the scores (its static dims 1 or the scores'; the
    others are checked at run time)."""
    ty = getattr(mask, "checked_type", None)
    if not isinstance(ty, TensorType) or ty.dtype != "float32" or len(ty.shape) > len(scores):
        return False
    return all(not isinstance(d, int) or d == 1 or d == s
               for d, s in zip(ty.shape[::-1], scores[::-1]))


def _encode_sym(slots: tuple, eqs: list, ranks: tuple[int, int, int]) -> tuple:
    """(ints, view_syms, view_eqs) of nn.contrib_attention over q, k and v's dimensions."""
    offsets = (0, ranks[0], ranks[0] + ranks[1])
    index = {(t, d): offsets[t] + d for t in (_Q, _K, _V) for d in range(ranks[t])}
    encoded = encode(slots, eqs, index)
    assert encoded is not None, "_sym_views maps every ref onto q, k or v"
    return encoded


@dataclass(frozen=True)
class FuseAttention(ModulePass):
    """Fuse scores, mask, softmax and the second product of attention into one kernel."""

    name: ClassVar[str] = "FuseAttention"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if fusion_bounded(ctx):  # fusion groups bounded to one op: the three kernels stay
            return mod

        def rewrite(func: Any) -> Any:
            return _Fuser(use_counts(func)).visit(func)

        return rewrite_functions(mod, rewrite)


register_pass("FuseAttention", FuseAttention)
