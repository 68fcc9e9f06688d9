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

  With ``view`` (11 ints: batch, M, N, K, a_bs, lda, b_bs, b_ks, b_ns, c_bs, ldc, in elements)
  the operands are read, and the output written, through those strides instead of their
  shapes: ``C[b*c_bs + m*ldc + n] = sum_k A[b*a_bs + m*lda + k] * B[b*b_bs + k*b_ks + n*b_ns]``
  over the data of ``data``, ``weight`` and an output of shape ``out_shape``, which the view
  must cover exactly once (FoldGemmViews uses it to read heads out of (batch, seq, heads *
  dim) tensors and write them back without transpose copies). 15 ints add heads, a_hs, b_hs,
  c_hs: batch b is (b // heads, b % heads), each operand's offset ``outer * bs + head * hs``
  in place of ``b * bs`` (the heads of a batch > 1, which no single batch stride reaches).

  With ``?`` dimensions a view's fields and ``out_shape`` are products of an int and some
  operand dimensions: ``view_syms`` lists (slot, dim) pairs, each multiplying slot ``slot``
  (an index into ``view`` then ``out_shape``) by dimension ``dim`` of the operands' shapes
  taken together (data's dims, then weight's); ``view_eqs`` lists (dim, dim) pairs that must
  be equal at run time (the batch of two heads' chains). The kernel checks them, and that the
  view reads inside its operands, at each call.

Both compute to ``topi.nn.gemm_kernel`` (the C kernel ``ember_sgemm`` and its panel packing).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from ....ir.types import TensorType, Type
from ....runtime.errors import OpError
from ....te import tensor as te
from ....tir import op as tir
from ....topi.nn import gemm_kernel as gk
from .._attrs_base import OpAttrs, attrs_class
from .._compute_common import out_dims
from .._reg import OPAQUE, OUT_ELEMWISE_FUSABLE, call, defop
from .epilogue_activation import activation_ref
from .._shape import broadcast_dim, fail, fmt_shape, known, may_equal, tensor_of
from ....topi.nn.sizes import Check, dims, i64, must_equal, prod

__all__: list[str] = []

ACTIVATIONS = ("none", "relu", "clip", "gelu_erf", "gelu_tanh", "sigmoid", "hardswish", "tanh",
               "leaky_relu", "silu", "hardsigmoid", "mish")
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
    view: tuple[int, ...] = ()
    out_shape: tuple[int, ...] = ()
    view_syms: tuple[int, ...] = ()
    view_eqs: tuple[int, ...] = ()
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
        self._ints("view", length=(0, len(VIEW_FIELDS), len(VIEW_FIELDS) + len(HEAD_FIELDS)),
                   scalar_ok=False)
        self._ints("out_shape", scalar_ok=False)
        self._positive("view", allow_zero=True)
        self._positive("out_shape")
        if bool(self.view) != bool(self.out_shape) or (self.view and self.packed_n):
            raise self._invalid("view", "set together with out_shape, without packed_n")
        for name in ("view_syms", "view_eqs"):
            self._ints(name, scalar_ok=False)
            self._positive(name, allow_zero=True)
            if len(getattr(self, name)) % 2 or (getattr(self, name) and not self.view):
                raise self._invalid(name, "pairs of ints, with a view")
        slots = len(self.view) + len(self.out_shape)
        if any(slot >= slots for slot in self.view_syms[::2]):
            raise self._invalid("view_syms", f"(slot, dim) pairs with slots below {slots}")


VIEW_FIELDS = ("batch", "M", "N", "K", "a_bs", "lda", "b_bs", "b_ks", "b_ns", "c_bs", "ldc")
HEAD_FIELDS = ("heads", "a_hs", "b_hs", "c_hs")


def view_fields(view: tuple[int, ...]) -> dict[str, int]:
    """A view's fields by name, heads 1 (and head strides 0) when it has none."""
    return dict(zip(VIEW_FIELDS + HEAD_FIELDS, (*view, 1, 0, 0, 0)[:15]))


def sym_slots(slots: Sequence[int], view_syms: Sequence[int],
              shapes: Sequence[Sequence[Any]]) -> list[Any]:
    """``slots`` (views then out_shape) with the operand dimensions of ``view_syms`` (counted
    across ``shapes``) multiplied in: ints from ints, expressions from te sizes, None where a
    dimension is None (unknown)."""
    out: list[Any] = list(slots)
    sizes = [d for shape in shapes for d in shape]
    for slot, dim in zip(view_syms[::2], view_syms[1::2]):
        d = sizes[dim]
        out[slot] = None if d is None or out[slot] is None else out[slot] * d
    return out


def sym_type_dim(coef: int, slot: int, view_syms: Sequence[int], sizes: Sequence[Any]) -> Any:
    """The type's dimension of an out_shape slot (``coef`` times the operand dimensions that
    ``view_syms`` pairs with ``slot``, ``sizes`` the operands' type dims): an int when they are
    known, the operand's own dimension when the slot is exactly one of them, else ``?``."""
    refs = [sizes[d] for s, d in zip(view_syms[::2], view_syms[1::2]) if s == slot]
    if all(known(d) for d in refs):
        return coef * math.prod(refs)
    return refs[0] if len(refs) == 1 and coef == 1 else None


def resolve_view(attrs: GemmAttrs, data_shape: Sequence[Any],
                 weight_shape: Sequence[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(view, out_shape) with the operand dimensions of ``view_syms`` multiplied in
    (``sym_slots``)."""
    slots = sym_slots((*attrs.view, *attrs.out_shape), attrs.view_syms, (data_shape,
                                                                          weight_shape))
    return tuple(slots[:len(attrs.view)]), tuple(slots[len(attrs.view):])


def _batch_axes(v: dict[str, int], bs: str, hs: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """(extents, strides) of a view's batch as (outer, heads)."""
    return (v["batch"] // v["heads"], v["heads"]), (v[bs], v[hs])


def read_axes(v: dict[str, Any], part: str) -> tuple[tuple, tuple]:
    """(extents, strides) of (outer, heads, rows, columns) at which a view reads its A
    (``part`` "a": M x K) or B ("b": K x N) operand."""
    (outer, heads), (bs, hs) = _batch_axes(v, f"{part}_bs", f"{part}_hs")
    if part == "a":
        return (outer, heads, v["M"], v["K"]), (bs, hs, v["lda"], 1)
    return (outer, heads, v["K"], v["N"]), (bs, hs, v["b_ks"], v["b_ns"])


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


def _gemm_pack_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [gk.pack_weight(inputs[0], attrs.nr, attrs.transpose)]


defop("nn.contrib_gemm_pack", _pack_rel,
      lambda w, attrs: gk.pack_weight_np(w, attrs.nr, attrs.transpose), OPAQUE,
      args=("weight",), attrs=GemmPackAttrs,
      doc="A weight packed into the GEMM kernel's column panels.", compute=_gemm_pack_compute)


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


def _span(extents: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """One past the largest offset a strided view reaches."""
    return 1 + sum((e - 1) * s for e, s in zip(extents, strides))


def _covers_once(extents: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """True when the view maps onto 0 .. prod(extents) - 1 one to one (a permuted dense
    layout): sorted by stride, each stride is the product of the extents inside it."""
    size = 1
    for s, e in sorted((s, e) for s, e in zip(strides, extents) if e > 1):
        if s != size:
            return False
        size *= e
    return True


# A ``?`` dimension's stand-in when a symbolic view is checked at compile time: a large prime,
# distinct (equal only where ``view_eqs`` says so), so a view that is right at this point
# is right as products of those dimensions (no heads divide a batch by chance). The kernel
# checks the bounds and the heads again at each call.
_GENERIC = 1_000_003


@functools.cache
def _stand_ins(count: int) -> tuple[int, ...]:
    """The first ``count`` primes from _GENERIC."""
    out: list[int] = []
    n = _GENERIC
    while len(out) < count:
        if all(n % p for p in range(3, math.isqrt(n) + 1, 2)):
            out.append(n)
        n += 2
    return tuple(out)


def _generic_sizes(sizes: Sequence[Any], eqs: Sequence[int]) -> list[int]:
    """The operand dimensions with each ``?`` given a distinct large prime, equal ones the
    same."""
    rep = list(range(len(sizes)))
    for x, y in zip(eqs[::2], eqs[1::2]):
        rx, ry = rep[x], rep[y]
        rep = [rx if r == ry else r for r in rep]
    primes = _stand_ins(len(sizes))
    return [d if known(d) else primes[rep[i]] for i, d in enumerate(sizes)]


def _view_rel(args: list[TensorType], attrs: GemmAttrs) -> TensorType:
    op = "nn.contrib_gemm"
    data, w, bias, res = args
    sizes = (*data.shape, *w.shape)
    if not attrs.view_syms:
        for t, name in ((data, "data"), (w, "weight")):
            if not all(known(d) for d in t.shape):
                raise fail(op, f"a strided view needs a static {name} shape")
    for dim in (*attrs.view_syms[1::2], *attrs.view_eqs):
        if dim >= len(sizes):
            raise fail(op, f"the view refers to operand dimension {dim}, but data and weight "
                           f"have {len(sizes)} dimensions together")
    for x, y in zip(attrs.view_eqs[::2], attrs.view_eqs[1::2]):
        if not may_equal(sizes[x], sizes[y]):
            raise fail(op, f"the view needs operand dimensions {x} and {y} equal, got "
                           f"{sizes[x]} and {sizes[y]}")
    static = [d if known(d) else None for d in sizes]
    view, out_shape = resolve_view(attrs, static[:data.ndim], static[data.ndim:])
    # the checks below at the sizes if known, else at a generic point (see _GENERIC)
    point = _generic_sizes(sizes, attrs.view_eqs)
    at = "" if None not in (*view, *out_shape) else " (at a generic size of its ? dimensions)"
    gview, gout = resolve_view(attrs, point[:data.ndim], point[data.ndim:])
    v = view_fields(gview)
    if v["heads"] < 1 or v["batch"] % v["heads"]:
        raise fail(op, f"the view's batch {v['batch']} is not a whole number of groups of "
                       f"{v['heads']} heads{at}")
    c_b, c_s = _batch_axes(v, "c_bs", "c_hs")
    size = {"data": math.prod(point[:data.ndim]), "weight": math.prod(point[data.ndim:])}
    reach = {"data": _span(*read_axes(v, "a")), "weight": _span(*read_axes(v, "b"))}
    for name in ("data", "weight"):
        if reach[name] > size[name]:
            raise fail(op, f"the view reads {name} up to element {reach[name] - 1}, but it has "
                           f"{size[name]} elements{at}")
    c = ((*c_b, v["M"], v["N"]), (*c_s, v["ldc"], 1))
    if math.prod(gout) != math.prod(c[0]) or not _covers_once(*c):
        raise fail(op, f"the output view {c} does not cover out_shape "
                       f"{fmt_shape(gout)} exactly once{at}")
    out = tensor_of([sym_type_dim(c, len(view) + i, attrs.view_syms, sizes)
                     for i, c in enumerate(attrs.out_shape)], data.dtype)
    n = view_fields(view)["N"]
    if attrs.has_bias and bias.ndim > 0 and not (bias.ndim == 1 and
                                                 may_equal(bias.shape[0], n)):
        raise fail(op, f"bias must be a scalar or ({'?' if n is None else n},), got "
                       f"{fmt_shape(bias.shape)}")
    if attrs.has_residual and res.ndim > 0 and (res.ndim != out.ndim or not all(
            may_equal(a, b) for a, b in zip(res.shape, out.shape))):
        raise fail(op, f"residual must be a scalar or {fmt_shape(out.shape)}, got "
                       f"{fmt_shape(res.shape)}")
    return out


def _gemm_rel(args: list[TensorType], attrs: GemmAttrs) -> TensorType:
    op = "nn.contrib_gemm"
    if attrs.view:
        return _view_rel(args, attrs)
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
    if act == "hardswish":
        # gemm's hardswish carries an output scale p0 (1/6 is plain hardswish) into which
        # FuseGemmEpilogue folds a following scalar multiply: p0 * x * relu6(x + 3)
        return 6 * p[0] * activation_ref(x, act)
    return activation_ref(x, act, *p)


def gemm_ref(data: np.ndarray, w: np.ndarray, bias: np.ndarray, res: np.ndarray,
             attrs: GemmAttrs) -> np.ndarray:
    """numpy: what nn.contrib_gemm computes (in float64, cast to data's dtype)."""
    if attrs.view:
        return _view_ref(data, w, bias, res, attrs)
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


def _view_ref(data: np.ndarray, w: np.ndarray, bias: np.ndarray, res: np.ndarray,
              attrs: GemmAttrs) -> np.ndarray:
    if attrs.view_syms:
        view, out_shape = resolve_view(attrs, data.shape, w.shape)
        attrs = dataclasses.replace(attrs, view=view, out_shape=out_shape, view_syms=(),
                                    view_eqs=())
    v = view_fields(attrs.view)
    (a_b, a_s), (b_b, b_s), (c_b, c_s) = (_batch_axes(v, f"{x}_bs", f"{x}_hs") for x in "abc")

    def view(x: np.ndarray, shape: tuple, strides: tuple) -> np.ndarray:
        flat = np.ascontiguousarray(x).reshape(-1)
        return np.lib.stride_tricks.as_strided(
            flat, shape, tuple(s * flat.itemsize for s in strides),
            writeable=False).reshape(v["batch"], *shape[2:])

    a = view(data, (*a_b, v["M"], v["K"]), (*a_s, v["lda"], 1))
    b = view(w, (*b_b, v["K"], v["N"]), (*b_s, v["b_ks"], v["b_ns"]))
    c_strides = (*c_s, v["ldc"], 1)
    if attrs.has_residual and res.ndim > 0:  # the residual is laid out like the output
        res = view(res, (*c_b, v["M"], v["N"]), c_strides)
    plain = dataclasses.replace(attrs, view=(), out_shape=(), kind="batch_matmul",
                                transpose_b=False)
    y = gemm_ref(a, b, bias, res, plain)  # (batch, M, N)
    out = np.empty(math.prod(attrs.out_shape), dtype=data.dtype)
    target = np.lib.stride_tricks.as_strided(
        out, (*c_b, *y.shape[1:]), tuple(s * out.itemsize for s in c_strides))
    target[...] = y.reshape(target.shape)
    return out.reshape(attrs.out_shape)


def checked_view(attrs: GemmAttrs, data: te.Tensor,
                 weight: te.Tensor) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Check, ...]]:
    """(view, out_shape, checks) of a view over these operands: the view's run-time fields
    are formed in int64 (``wide``: products of int32 sizes would wrap) for the checks, and
    passed to the kernel as int32 only once the checks have bounded them."""
    _, out_shape = resolve_view(attrs, dims(data.shape), dims(weight.shape))
    view, _ = resolve_view(attrs, wide(data.shape), wide(weight.shape))
    return narrow(view), out_shape, _view_checks(attrs, view_fields(view), data, weight)


def wide(shape: Iterable[Any]) -> list[Any]:
    """Sizes, the run-time ones as int64 (their products then cannot wrap)."""
    return [d if isinstance(d, int) else i64(d) for d in dims(shape)]


def narrow(values: Iterable[Any]) -> tuple[Any, ...]:
    """Checked sizes and strides as the kernels take them (int32)."""
    return tuple(x if isinstance(x, int) else tir.cast(x, "int32") for x in values)


def _view_checks(attrs: GemmAttrs, v: dict[str, Any], data: te.Tensor,
                 weight: te.Tensor) -> tuple[Check, ...]:
    """What the kernel of a view with ``?`` dimensions checks at each call (``v``'s fields in
    int64): the dimensions ``view_eqs`` pairs agree, and the view reads inside data and
    weight."""
    if not attrs.view_syms:
        return ()
    checks = equal_dims((data, weight), attrs.view_eqs, "")
    checks += whole_groups(v["batch"], v["heads"], "")
    checks += [reads_inside(data, read_axes(v, "a"), "", "data"),
               reads_inside(weight, read_axes(v, "b"), "", "weight")]
    return (*checks, *int32_fields(v.values(), "nn.contrib_gemm"))


# The run-time checks of the ? views of nn.contrib_gemm and nn.contrib_attention; ``where``
# starts their messages (the op's name where the kernel does not add it)
def equal_dims(operands: Sequence[te.Tensor], eqs: Sequence[int], where: str) -> list[Check]:
    """The operand dimensions (counted across ``operands``) that ``view_eqs`` pairs agree."""
    sizes = [d for t in operands for d in dims(t.shape)]
    return [check for x, y in zip(eqs[::2], eqs[1::2]) for check in must_equal(
        sizes[x], sizes[y], f"{where}the operands' dimensions {x} and {y} of its views differ "
                            "(their batches and sequences must be equal)")]


def whole_groups(batch: Any, heads: Any, where: str) -> list[Check]:
    """A run-time batch must be whole groups of heads (else the last group's heads reach past
    the operands): the checks, none when both are static (the type checked them). A run-time
    head count is checked positive first: the checks after this one divide by it."""
    if isinstance(batch, int) and isinstance(heads, int):
        return []
    positive = [] if isinstance(heads, int) else [
        (tir.convert(heads) >= 1, f"{where}its views' head count is less than 1")]
    return [*positive, (tir.floormod(batch, heads).equal(0),
                        f"{where}its views' batch is not a whole number of groups of its heads")]


def reads_inside(t: te.Tensor, axes: tuple[tuple, tuple], where: str, name: str) -> Check:
    """That a view reading ``t`` at ``axes`` (``read_axes``, int64 fields) stays inside it."""
    return (i64(_span(*axes)) <= i64(prod(wide(t.shape))),
            f"{where}its view reads past the end of {name}")


def int32_fields(values: Iterable[Any], op: str) -> list[Check]:
    """The C kernels take sizes and strides as int32: those known only at run time (int64
    expressions, ``wide``) must stay below 2^31 (one check of them all)."""
    limit = tir.const(2 ** 31, "int64")
    run_time = [i64(x) < limit for x in values if not isinstance(x, int)]
    if not run_time:
        return []
    return [(tir.all(*run_time), f"{op}: a size or stride of its view is 2^31 or more (the "
                                 "kernel's are 32-bit)")]


def _gemm_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """One ``ember_sgemm`` call with the epilogue of the attrs."""
    data, weight, bias, residual = inputs
    out_shape: tuple[Any, ...] = tuple(attrs.out_shape)
    if attrs.view:
        view, out_shape, checks = checked_view(attrs, data, weight)
        v = view_fields(view)
        ops = gk.GemmOperands(*view[:9], 0, *view[9:11], require=checks,
                              **{f: v[f] for f in HEAD_FIELDS})
    elif attrs.packed_n:
        if attrs.kind == "batch_matmul":
            raise OpError("nn.contrib_gemm: a packed weight is 2-d; batch_matmul cannot use it")
        ops = gk.dense_operands(data, weight, attrs.packed_n)
    elif attrs.kind == "batch_matmul":
        ops = gk.batch_matmul_operands(data, weight, attrs.transpose_b)
    else:
        ops = gk.matmul_operands(data, weight, attrs.transpose_b)
    epilogue = gk.Epilogue(attrs.alpha, attrs.act1, attrs.p1, attrs.act2, attrs.p2)
    fallback = out_shape or gk.output_shape(data, ops, attrs.kind == "batch_matmul")
    shape = out_dims(out_type, fallback)  # type: ignore[arg-type]
    return [gk.sgemm(data, weight, ops, shape, epilogue, bias if attrs.has_bias else None,
                     residual if attrs.has_residual else None, name="T_gemm")]


defop("nn.contrib_gemm", _gemm_rel, lambda d, w, b, r, attrs: gemm_ref(d, w, b, r, attrs),
      OUT_ELEMWISE_FUSABLE, args=("data", "weight", "bias", "residual"), attrs=GemmAttrs,
      doc="A dense/matmul/batch_matmul with its epilogue (bias, activations, residual).",
      compute=_gemm_compute)


def contrib_gemm(data: Any, weight: Any, bias: Any, residual: Any, **attrs: Any) -> Any:
    """A call of ``nn.contrib_gemm`` (see the module docstring)."""
    return call("nn.contrib_gemm", data, weight, bias, residual, attrs=GemmAttrs(**attrs))


def contrib_gemm_pack(weight: Any, nr: int, transpose: bool = True) -> Any:
    """A call of ``nn.contrib_gemm_pack``."""
    return call("nn.contrib_gemm_pack", weight, attrs=GemmPackAttrs(nr, transpose))
