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

With ``?`` dimensions (a model exported with a symbolic batch or sequence) the same algebra
runs on sizes that are an int times run-time sizes (``_view_dims.Sym``): each link's shape
follows from its input's (a reshape's 0 copies a dimension, its -1 divides the element
count), and the view's fields become ``view_syms`` of the folded operands' dimensions. The
two operands' batches (and K) are separate ``?`` of separate tensors: where they must agree
the kernel checks them at each call (``view_eqs``), which refuses only what the unfolded
product refuses (a batch of heads never broadcasts; one of a single head might, and is not
folded).
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import Call, RelayExpr
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.visitor import children, post_order
from ._helpers import PassMutator, op_name, rewrite_functions
from ._view_dims import Incomparable, Size, Sym, encode, link_shape, operand_shape, rank

__all__ = ["FoldGemmViews", "View", "view_through"]

# Every link but transpose only regroups its input in row-major order (the importer's MatMul
# of rank > 3 is reverse_reshape -> batch_matmul -> reverse_reshape; rank-1 operands add
# expand_dims/squeeze): with static shapes each is a reshape to its output's shape.
_LINKS = ("reshape", "transpose", "contrib_reverse_reshape", "expand_dims", "squeeze",
          "reshape_like")


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
        try:
            return self._reshape(shape)
        except (IndexError, Incomparable):  # sizes whose grouping depends on run-time sizes
            return None

    def _reshape(self, shape: tuple[Any, ...]) -> View | None:
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



def _axes(e: Call) -> tuple[int, ...]:
    n = rank(e.args[0])
    axes = e.attrs.axes
    return tuple(range(n))[::-1] if axes is None else tuple(int(a) % n for a in axes)


def _link_out(link: Call, shape: tuple[Size, ...]) -> tuple[Size, ...] | None:
    """The shape of a chain link's output from its input's."""
    if op_name(link) == "transpose":
        return tuple(shape[a] for a in _axes(link))
    return link_shape(link, shape)


def view_through(e: Any) -> tuple[Any, View] | None:
    """``e`` as a view of the data of the tensor at the bottom of its reshape/transpose chain:
    (that tensor, the view); None when ``e`` is no such chain or a link needs a copy. With
    ``?`` dimensions the view's sizes are products of that tensor's (``_view_dims.Sym``)."""
    links = []
    while op_name(e) in _LINKS and rank(e) is not None:
        links.append(e)
        e = e.args[0]
    shape = operand_shape(e) if links else None
    if shape is None:
        return None
    view: View | None = View.dense(shape)
    for link in reversed(links):
        out = _link_out(link, shape)
        if out is None:
            return None
        split = len(view.shape) == len(shape) + 1  # batch kept as (outer, heads)
        if op_name(link) == "transpose":
            axes = _axes(link)
            if split and axes[0] != 0:
                return None
            view = view.transpose((0, 1, *(a + 1 for a in axes[1:])) if split else axes)
        elif len(out) == 3:  # a (batch, rows, cols) operand: it may stay split
            view = _as_batch(view, out)
        else:
            view = None if split else view.reshape(out)
        if view is None:
            return None
        shape = out
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


def _output_chain(gemm: Any, product: tuple[Size, ...],
                  consumers: dict[int, list]) -> tuple[Any, View, tuple[Size, ...]] | None:
    """The end E of the single-use chain after ``gemm`` (whose output has shape ``product``),
    the product's view inside E and E's shape."""
    links, e = [], gemm
    while len(consumers.get(id(e), ())) == 1 and op_name(consumers[id(e)][0]) in _LINKS:
        if consumers[id(e)][0].args[0] is not e:  # the shape operand of a reshape_like
            return None
        e = consumers[id(e)][0]
        links.append(e)
    if not links:
        return None
    shapes = [product]
    for link in links:
        out = _link_out(link, shapes[-1])
        if out is None:
            return None
        shapes.append(out)
    view: View | None = View.dense(shapes[-1])
    for k in reversed(range(len(links))):
        if op_name(links[k]) == "transpose":
            view = view.untranspose(_axes(links[k]))
        elif k == 0:  # back to the product's own (batch, M, N)
            view = _as_batch(view, shapes[0])
        else:
            view = view.reshape(shapes[k])
        if view is None:
            return None
    return e, view, shapes[-1]


def _consumers(expr: RelayExpr) -> dict[int, list]:
    out: dict[int, list] = {}
    for node in post_order(expr):
        for kid in children(node):
            out.setdefault(id(kid), []).append(node)
    return out


def _candidate(e: Any) -> bool:
    a = e.attrs
    return (op_name(e) == "nn.contrib_gemm" and a.kind == "batch_matmul" and not a.packed_n
            and not a.view and rank(e) == 3)


def _operand(e: Any, unit_k: bool) -> tuple[Any, View]:
    """``e`` through its chain when that is a view (unit stride along K for A), else ``e``."""
    v = view_through(e)
    if v is None or (unit_k and v[1].strides[-1] != 1):
        return e, View.dense(operand_shape(e))
    return v


def _unify(x: Size, y: Size, broadcast: bool) -> tuple[Size, tuple] | None:
    """The size two operands agree on (``broadcast``: or where one is 1), with the pair of
    run-time sizes the kernel must check equal; None when they need more than that. Batches
    of heads (a multiple of heads > 1) are never 1, so they cannot broadcast: the check
    refuses only what the unfolded product refuses too."""
    if x == y:
        return x, ()
    if broadcast and (x == 1 or y == 1):
        return (y if x == 1 else x), ()
    if not (isinstance(x, Sym) and isinstance(y, Sym)) or x.coef != y.coef:
        return None
    if broadcast and x.coef == 1:  # either batch may be 1 at run time and broadcast
        return None
    rx, ry = Counter(x.refs) - Counter(y.refs), Counter(y.refs) - Counter(x.refs)
    if sum(rx.values()) != 1 or sum(ry.values()) != 1:
        return None
    return x, ((next(iter(rx)), next(iter(ry))),)


def _product(orig: Call, a: View, b: View) -> tuple[tuple[Size, ...], tuple] | None:
    """The product's (batch, M, N) from the operands' views, with the run-time sizes the
    kernel must check equal (each operand has its own; static: the type's)."""
    ty = orig.checked_type_.shape
    if all(isinstance(d, int) for d in ty):
        return tuple(ty), ()

    def batch(v: View) -> Size:
        return v.shape[0] * v.shape[1] if len(v.shape) == 4 else v.shape[0]

    r, c = b.shape[-2:]
    k_b, n = (c, r) if orig.attrs.transpose_b else (r, c)
    bat, k = _unify(batch(a), batch(b), True), _unify(a.shape[-1], k_b, False)
    if bat is None or k is None:
        return None
    return (bat[0], a.shape[-2], n), bat[1] + k[1]


def _encode(fields: tuple[Size, ...], eqs: tuple, data: Any,
            weight: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(ints, view_syms, view_eqs) of nn.contrib_gemm for sizes that are products of the
    dimensions of ``data`` and ``weight`` (see relay/op/nn/gemm.py); None when one is not."""
    index: dict[tuple[int, int], int] = {}
    for base, offset in ((data, 0), (weight, rank(data))):
        for k in range(rank(base)):
            index.setdefault((id(base), k), offset + k)
    return encode(fields, eqs, index)


class _Folder(PassMutator):
    def __init__(self, consumers: dict[int, list]) -> None:
        super().__init__()
        self.consumers = consumers
        # chain end -> (gemm, product's shape, the sizes to check equal, product's view, the
        # end's shape)
        self.ends: dict[int, tuple[Call, tuple, tuple, View, tuple]] = {}

    def visit_call(self, orig: Call) -> RelayExpr:
        if id(orig) in self.ends:
            folded = self._strided(*self.ends[id(orig)])
            return folded if folded is not None else super().visit_call(orig)
        new: Call = super().visit_call(orig)
        if not _candidate(orig):
            return new
        a, b = _operand(orig.args[0], True), _operand(orig.args[1], False)
        found = _product(orig, a[1], b[1])
        if found is None:
            return new
        product, eqs = found
        out = (_output_chain(orig, product, self.consumers) if not orig.attrs.has_residual
               else None)
        if out is not None and out[1].strides[-1] == 1:
            # written when the chain's end is visited
            self.ends[id(out[0])] = (orig, product, eqs, out[1], out[2])
            return new
        folded = self._strided(orig, product, eqs, View.dense(product), product,
                               keep_if_plain=new)
        return new if folded is None else folded

    def _strided(self, orig: Call, product: tuple[Size, ...], eqs: tuple, c: View,
                 out_shape: tuple[Size, ...], keep_if_plain: Any = None) -> RelayExpr | None:
        """``orig`` with its operand chains folded and its output written through ``c``;
        None when a size is no product of the folded operands' dimensions."""
        batch, M, N = product
        heads = c.shape[1] if len(c.shape) == 4 else None
        data, weight = orig.args[0], orig.args[1]
        a = _operand(data, True)
        if not _same_heads(a[1], heads):
            a = (data, View.dense(operand_shape(data)))
        heads = heads or (a[1].shape[1] if len(a[1].shape) == 4 else None)
        b = _operand(weight, False)
        if not _same_heads(b[1], heads):
            b = (weight, View.dense(operand_shape(weight)))
        if keep_if_plain is not None and a[0] is data and b[0] is weight:
            return keep_if_plain
        heads = heads or (b[1].shape[1] if len(b[1].shape) == 4 else 1)
        a_bs, a_hs, lda, _ = _batch_strides(a[1], heads)
        b_bs, b_hs, r, s = _batch_strides(b[1], heads)
        c_bs, c_hs, ldc, _ = _batch_strides(c, heads)
        b_ks, b_ns = (s, r) if orig.attrs.transpose_b else (r, s)
        K = a[1].shape[-1]
        view = (batch, M, N, K, a_bs, lda, b_bs, b_ks, b_ns, c_bs, ldc)
        if heads != 1:
            view += (heads, a_hs, b_hs, c_hs)
        encoded = _encode((*view, *out_shape), eqs, a[0], b[0])
        if encoded is None:
            return None
        ints, syms, eq_dims = encoded
        attrs = dataclasses.replace(orig.attrs, view=ints[:len(view)],
                                    out_shape=ints[len(view):], view_syms=syms,
                                    view_eqs=eq_dims)
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
