"""Sizes of FoldGemmViews' views with ``?`` dimensions: each a product of an int and run-time
sizes (:class:`Sym`), so that the view algebra (``fold_gemm_views.View``) runs unchanged on
ints and on these, and the shapes of a reshape/transpose chain follow from its input's.

A run-time size is named by a ``ref``: (id of the tensor at the bottom of a chain, axis).
Two refs are never assumed equal: FoldGemmViews asks the kernel to check the ones it needs
equal (``view_eqs`` of ``nn.contrib_gemm``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...ir.types import TensorType
from ...runtime.errors import TypeInferenceError
from ..op.reshaping import infer_reshape
from ._helpers import op_name

__all__ = ["Incomparable", "Sym", "divide", "encode", "link_shape", "operand_shape", "rank",
           "size_of"]


class Incomparable(Exception):
    """Two sizes whose order depends on the run-time sizes."""


@dataclass(frozen=True)
class Sym:
    """``coef`` times the product of the run-time sizes ``refs`` (sorted, at least one)."""

    coef: int
    refs: tuple[tuple[int, int], ...]

    def __mul__(self, other: Any) -> Any:
        return _make(_coef(self) * _coef(other), _refs(self) + _refs(other))

    __rmul__ = __mul__

    def __lt__(self, other: Any) -> bool:
        return _less(self, other)

    def __gt__(self, other: Any) -> bool:
        return _less(other, self)


Size = int | Sym


def _coef(x: Size) -> int:
    return x.coef if isinstance(x, Sym) else x


def _refs(x: Size) -> tuple[tuple[int, int], ...]:
    return x.refs if isinstance(x, Sym) else ()


def _make(coef: int, refs: tuple[tuple[int, int], ...]) -> Size:
    return coef if coef == 0 or not refs else Sym(coef, tuple(sorted(refs)))


def _less(a: Size, b: Size) -> bool:
    """Whether ``a`` is less than ``b``: with the same refs, a smaller int (for every size);
    with a strict part of b's refs, True, a heuristic (the grouping a reshape makes, wrong
    only where a run-time size is below the ints' ratio); Incomparable else."""
    ra, rb = Counter(_refs(a)), Counter(_refs(b))
    if ra == rb:
        return _coef(a) < _coef(b)
    if ra <= rb:
        return True
    if rb <= ra:
        return False
    raise Incomparable(f"{a} vs {b}")


def divide(a: Size, b: Size) -> Size | None:
    """``a / b`` when it is a product of an int and run-time sizes for every size, else None."""
    ra, rb = Counter(_refs(a)), Counter(_refs(b))
    if _coef(b) == 0 or _coef(a) % _coef(b) or not rb <= ra:
        return None
    return _make(_coef(a) // _coef(b), tuple((ra - rb).elements()))


def rank(e: Any) -> int | None:
    """The rank of a typed tensor expression, None for another type or none yet."""
    ty = getattr(e, "checked_type_", None)
    return len(ty.shape) if isinstance(ty, TensorType) else None


def encode(fields: Any, eqs: Any, index: dict[tuple[int, int], int]) -> tuple | None:
    """(ints, view_syms, view_eqs) of sizes (``fields``: slots of the views and out_shape) and
    ref pairs that must be equal (``eqs``), ``index`` naming each ref's operand dimension;
    None when a ref is not one of them."""
    ints, syms = [], []
    for slot, f in enumerate(fields):
        ints.append(_coef(f))
        for ref in _refs(f):
            if ref not in index:
                return None
            syms += [slot, index[ref]]
    if any(ref not in index for pair in eqs for ref in pair):
        return None
    return tuple(ints), tuple(syms), tuple(index[ref] for pair in eqs for ref in pair)


def size_of(sizes: Any) -> Size:
    out: Size = 1
    for d in sizes:
        out = out * d
    return out


def operand_shape(e: Any) -> tuple[Size, ...] | None:
    """``e``'s shape, each ``?`` a run-time size of its own; None if ``e`` is no tensor."""
    ty = e.checked_type_
    if not isinstance(ty, TensorType):
        return None
    return tuple(d if isinstance(d, int) else Sym(1, ((id(e), k),))
                 for k, d in enumerate(ty.shape))


def _type_shape(e: Any) -> tuple[Any, ...] | None:
    ty = e.checked_type_
    return tuple(ty.shape) if isinstance(ty, TensorType) else None


def _copied(link: Any, shape: tuple[Size, ...]) -> list[Any] | None:
    """The link's output dims that are copies of input dims (other dims ints or ``?``)."""
    name, a = op_name(link), link.attrs
    if name == "reshape":
        return infer_reshape("reshape", shape, a.newshape)
    if name == "contrib_reverse_reshape":
        return infer_reshape("reverse_reshape", shape[::-1], list(a.newshape)[::-1])[::-1]
    if name == "reshape_like":
        like = _type_shape(link.args[1])
        if like is None:
            return None
        n = len(shape)
        lb, le = a.lhs_begin % n if a.lhs_begin < 0 else a.lhs_begin, a.lhs_end
        le = n if le is None else (le % n if le < 0 else le)
        rb, re = a.rhs_begin, a.rhs_end
        rb = rb % len(like) if rb < 0 else rb
        re = len(like) if re is None else (re % len(like) if re < 0 else re)
        return [*shape[:lb], *like[rb:re], *shape[le:]]
    if name == "expand_dims":
        axis = a.axis if a.axis >= 0 else a.axis + len(shape) + 1
        return [*shape[:axis], *(1,) * a.num_newaxis, *shape[axis:]]
    if name == "squeeze":
        axes = ({k % len(shape) for k in a.axis} if a.axis is not None
                else {k for k, d in enumerate(shape) if d == 1})
        return None if any(shape[k] != 1 for k in axes) else [
            d for k, d in enumerate(shape) if k not in axes]
    return None


def link_shape(link: Any, shape: tuple[Size, ...]) -> tuple[Size, ...] | None:
    """The output shape of a reshape-like link (reshape, reverse_reshape, reshape_like,
    expand_dims, squeeze) given its input's ``shape``: the type's static dims, the input's
    run-time sizes it copies, and at most one more size inferred from the element count;
    None when a dimension is no such product."""
    ty = _type_shape(link)
    if ty is None:
        return None
    if all(isinstance(d, int) for d in ty):
        return ty  # static: what the type says (the element counts then match: typed)
    try:
        copied = _copied(link, shape)
    except TypeInferenceError:
        return None
    if copied is None or len(copied) != len(ty):
        return None
    out: list[Any] = [t if isinstance(t, int) else d for d, t in zip(copied, ty)]
    unknown = [k for k, d in enumerate(out) if not isinstance(d, (int, Sym))]
    if len(unknown) > 1:
        return None
    if unknown:
        rest = [d for k, d in enumerate(out) if k != unknown[0]]
        out[unknown[0]] = divide(size_of(shape), size_of(rest))
        if out[unknown[0]] is None:
            return None
    if size_of(out) != size_of(shape):
        return None
    return tuple(out)
