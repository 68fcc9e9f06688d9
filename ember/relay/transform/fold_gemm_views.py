"""FoldGemmViews: the reshape/transpose chains around a batched ``nn.contrib_gemm`` become
strides of the GEMM kernel, so attention reads its heads out of (batch, seq, heads * dim)
tensors and writes them back without a transpose copy per call.

A chain of ``reshape``/``transpose`` (or the other reshapes of ``_LINKS``) only permutes and regroups the elements of its input, so
(when a regrouping does not split a dimension that was permuted away from its neighbours) its
output is a strided view of the input's data: :func:`view_through`. For each batched
``nn.contrib_gemm`` (not packed, no view yet):

- an operand that is such a chain over a tensor X becomes X, read through the view's strides
  (A needs unit stride along K);
- when the product's only consumer starts a chain (every link used once) whose end E is a
  dense relayout of the product, E becomes the product itself, writing through the strides of
  the product's elements inside E (unit stride along N; no residual).

A batch > 1 of (batch, seq, heads * dim) rows gives heads whose (batch, heads) axes do not
merge into one strided batch: such an operand or output keeps a 4-d view, and the kernel
reads its batch b as (b // heads, b % heads) through two strides (the view's heads fields).

The result is one ``nn.contrib_gemm`` with ``view`` / ``out_shape`` (see ``relay/op/nn/gemm.py``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import Call, RelayExpr
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...ir.visitor import children, post_order
from ._helpers import PassMutator, op_name, rewrite_functions

__all__ = ["FoldGemmViews", "View", "view_through"]

# Every link but transpose only regroups its input in row-major order (the importer's MatMul
# of rank > 3 is reverse_reshape -> batch_matmul -> reverse_reshape; rank-1 operands add
# expand_dims/squeeze): with static shapes each is a reshape to its output's shape.
_LINKS = ("reshape", "transpose", "contrib_reverse_reshape", "expand_dims", "squeeze")


@dataclass(frozen=True)
class View:
    """Extents and element strides of a tensor over some base data."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @staticmethod
    def dense(shape: tuple[int, ...]) -> View:
        strides, size = [], 1
        for d in reversed(shape):
            strides.append(size)
            size *= d
        return View(tuple(shape), tuple(reversed(strides)))

    def transpose(self, axes: tuple[int, ...]) -> View:
        return View(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes))

    def untranspose(self, axes: tuple[int, ...]) -> View:
        """The view of X when this is the view of transpose(X, axes)."""
        shape, strides = [0] * len(axes), [0] * len(axes)
        for i, a in enumerate(axes):
            shape[a], strides[a] = self.shape[i], self.strides[i]
        return View(tuple(shape), tuple(strides))

    def reshape(self, shape: tuple[int, ...]) -> View | None:
        """The same elements in row-major order as ``shape``, without a copy; None when a new
        dimension would span old ones that are not laid out contiguously together."""
        old = [(d, s) for d, s in zip(self.shape, self.strides) if d != 1]
        new = [i for i, d in enumerate(shape) if d != 1]
        strides = [0] * len(shape)
        i = j = 0
        while i < len(old) and j < len(new):
            i1, j1 = i + 1, j + 1
            po, pn = old[i][0], shape[new[j]]
            while po != pn:
                if po < pn:
                    po, i1 = po * old[i1][0], i1 + 1
                else:
                    pn, j1 = pn * shape[new[j1]], j1 + 1
            if any(old[k][1] != old[k + 1][1] * old[k + 1][0] for k in range(i, i1 - 1)):
                return None
            stride = old[i1 - 1][1]
            for k in reversed(range(j, j1)):
                strides[new[k]] = stride
                stride *= shape[new[k]]
            i, j = i1, j1
        return View(tuple(shape), tuple(strides))



def _shape(e: Any) -> tuple[int, ...] | None:
    ty = e.checked_type_
    if isinstance(ty, TensorType) and all(isinstance(d, int) for d in ty.shape):
        return tuple(ty.shape)
    return None


def _axes(e: Call) -> tuple[int, ...]:
    rank = len(_shape(e.args[0]))
    axes = e.attrs.axes
    return tuple(range(rank))[::-1] if axes is None else tuple(int(a) % rank for a in axes)


def view_through(e: Any) -> tuple[Any, View] | None:
    """``e`` as a view of the data of the tensor at the bottom of its reshape/transpose chain:
    (that tensor, the view); None when ``e`` is no such chain or a link needs a copy."""
    links = []
    while op_name(e) in _LINKS and _shape(e) is not None:
        links.append(e)
        e = e.args[0]
    if not links or _shape(e) is None:
        return None
    view: View | None = View.dense(_shape(e))
    for link in reversed(links):
        split = len(view.shape) == len(_shape(link.args[0])) + 1  # batch kept as (outer, heads)
        if op_name(link) == "transpose":
            axes = _axes(link)
            if split and axes[0] != 0:
                return None
            view = view.transpose((0, 1, *(a + 1 for a in axes[1:])) if split else axes)
        elif len(_shape(link)) == 3:  # a (batch, rows, cols) operand: it may stay split
            view = _as_batch(view, _shape(link))
        else:
            view = None if split else view.reshape(_shape(link))
        if view is None:
            return None
    return e, view


def _as_batch(view: View, shape: tuple[int, ...]) -> View | None:
    """``view`` reshaped to a GEMM operand's (batch, rows, cols) ``shape``; a 4-d (outer,
    heads, rows, cols) view whose first two axes do not merge into one strided batch (the heads
    of a batch > 1 cut out of (batch, seq, heads * dim) rows) stays 4-d: the kernel reads such
    a batch through two strides."""
    merged = view.reshape(shape)
    if merged is not None or len(view.shape) != 4 or len(shape) != 3:
        return merged
    if view.shape[0] * view.shape[1] != shape[0] or view.shape[2:] != shape[1:]:
        return None
    return view


def _output_chain(gemm: Any, consumers: dict[int, list]) -> tuple[Any, View] | None:
    """The end E of the single-use chain after ``gemm`` and the product's view inside E."""
    links, e = [], gemm
    while len(consumers.get(id(e), ())) == 1 and op_name(consumers[id(e)][0]) in _LINKS:
        e = consumers[id(e)][0]
        if _shape(e) is None:
            return None
        links.append(e)
    if not links:
        return None
    view: View | None = View.dense(_shape(e))
    for link in reversed(links):
        if op_name(link) == "transpose":
            view = view.untranspose(_axes(link))
        elif link is links[0]:  # back to the product's own (batch, M, N)
            view = _as_batch(view, _shape(link.args[0]))
        else:
            view = view.reshape(_shape(link.args[0]))
        if view is None:
            return None
    return e, view


def _consumers(expr: RelayExpr) -> dict[int, list]:
    out: dict[int, list] = {}
    for node in post_order(expr):
        for kid in children(node):
            out.setdefault(id(kid), []).append(node)
    return out


def _candidate(e: Any) -> bool:
    a = e.attrs
    return (op_name(e) == "nn.contrib_gemm" and a.kind == "batch_matmul" and not a.packed_n
            and not a.view and _shape(e) is not None and len(_shape(e)) == 3)


class _Folder(PassMutator):
    def __init__(self, consumers: dict[int, list]) -> None:
        super().__init__()
        self.consumers = consumers
        self.ends: dict[int, tuple[Call, View]] = {}  # chain end -> (gemm, product's view)

    def visit_call(self, orig: Call) -> RelayExpr:
        if id(orig) in self.ends:
            gemm, view = self.ends[id(orig)]
            return self._strided(gemm, view, _shape(orig))
        new: Call = super().visit_call(orig)
        if not _candidate(orig):
            return new
        out = _output_chain(orig, self.consumers) if not orig.attrs.has_residual else None
        if out is not None and out[1].strides[-1] == 1:
            self.ends[id(out[0])] = (orig, out[1])  # written when the chain's end is visited
            return new
        return self._strided(orig, View.dense(_shape(orig)), _shape(orig), keep_if_plain=new)

    def _strided(self, orig: Call, c: View, out_shape: tuple[int, ...],
                 keep_if_plain: Any = None) -> RelayExpr:
        """``orig`` with its operand chains folded and its output written through ``c``."""
        batch, M, N = _shape(orig)
        heads = c.shape[1] if len(c.shape) == 4 else None
        data, weight = orig.args[0], orig.args[1]
        a = view_through(data)
        if a is None or a[1].strides[-1] != 1 or not _same_heads(a[1], heads):
            a = (data, View.dense(_shape(data)))
        heads = heads or (a[1].shape[1] if len(a[1].shape) == 4 else None)
        b = view_through(weight)
        if b is None or not _same_heads(b[1], heads):
            b = (weight, View.dense(_shape(weight)))
        if keep_if_plain is not None and a[0] is data and b[0] is weight:
            return keep_if_plain
        heads = heads or (b[1].shape[1] if len(b[1].shape) == 4 else 1)
        a_bs, a_hs, lda, _ = _batch_strides(a[1], heads)
        b_bs, b_hs, r, s = _batch_strides(b[1], heads)
        c_bs, c_hs, ldc, _ = _batch_strides(c, heads)
        b_ks, b_ns = (s, r) if orig.attrs.transpose_b else (r, s)
        K = a[1].shape[-1]
        view = (batch, M, N, K, a_bs, lda, b_bs, b_ks, b_ns, c_bs, ldc)
        if heads > 1:
            view += (heads, a_hs, b_hs, c_hs)
        attrs = dataclasses.replace(orig.attrs, view=view, out_shape=out_shape)
        args = (self.visit(a[0]), self.visit(b[0]), *(self.visit(x) for x in orig.args[2:]))
        return Call(orig.op, args, attrs)


def _same_heads(v: View, heads: int | None) -> bool:
    """Whether a 4-d (outer, heads, rows, cols) view agrees with the heads chosen so far
    (3-d views agree with any)."""
    return len(v.shape) == 3 or heads is None or v.shape[1] == heads


def _batch_strides(v: View, heads: int) -> tuple[int, int, int, int]:
    """(outer stride, head stride, row stride, column stride) of a 3-d (batch, rows, cols)
    or 4-d (outer, heads, rows, cols) view, batch b being (b // heads, b % heads); a batch of
    one (broadcast) reads with stride 0."""
    if len(v.shape) == 4:
        return ((v.strides[0] if v.shape[0] > 1 else 0), v.strides[1], v.strides[2],
                v.strides[3])
    bs = v.strides[0] if v.shape[0] > 1 else 0
    return bs * heads, bs, v.strides[1], v.strides[2]


@dataclass(frozen=True)
class FoldGemmViews(ModulePass):
    """Fold reshape/transpose chains around batched GEMMs into their strides."""

    name: ClassVar[str] = "FoldGemmViews"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        def rewrite(func: Any) -> Any:
            return _Folder(_consumers(func)).visit(func)

        return rewrite_functions(mod, rewrite)


register_pass("FoldGemmViews", FoldGemmViews)
