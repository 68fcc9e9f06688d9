"""Reshaping operators: reshape (Relay's special values 0, -1, -2, -3, -4), its reverse form
(contrib_reverse_reshape) and reshape_like. Re-exported by ``transform.py``, as in Relay."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.expr import Call
from ...ir.types import Any as AnyDim
from ...ir.types import Dim, TensorType, Type
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr
from ._compute_common import prod, reshape_to
from ._dispatch import dyn_op, numbers, run_time
from ._reg import INJECTIVE, call, defop
from ._shape import dim_mul, dim_prod, fail, fmt_dim, fmt_shape, known, tensor_of
from .attrs import ReshapeAttrs, ReshapeLikeAttrs

__all__ = ["reshape", "reshape_like", "reverse_reshape"]


def _split_dim(op: str, d: Dim, a: int, b: int) -> list[Dim]:
    """-4: split input dim ``d`` into (a, b), one of which may be -1."""
    if a == -1 and b == -1:
        raise fail(op, "-4 cannot be followed by two -1")
    if -1 in (a, b):
        other = b if a == -1 else a
        inferred: Dim = d // other if known(d) else AnyDim()  # type: ignore[operator]
        a, b = (inferred, b) if a == -1 else (a, inferred)  # type: ignore[assignment]
    if known(d, a, b) and a * b != d:
        raise fail(op, f"-4 splits a dimension of {d} into {a} x {b}")
    return [a, b]


def _cancel_symbols(shape: Sequence[Dim], rest: Sequence[Dim]) -> tuple[int, int] | None:
    """Static (input, output) element counts once identical symbolic sizes on both sides
    cancel (the same ShapeVar, or the same ``?`` that a type relation carried through).

    ``(n, 3, 4)`` into ``(0, -1)`` keeps ``n`` and infers 12. None if anything stays unknown.
    """
    sym_in = [d for d in shape if not isinstance(d, int)]
    for d in (d for d in rest if not isinstance(d, int)):
        match = next((i for i, s in enumerate(sym_in) if s is d), None)
        if match is None:
            return None
        sym_in.pop(match)
    if sym_in:
        return None
    return (dim_prod(d for d in shape if isinstance(d, int)),  # type: ignore[return-value]
            dim_prod(d for d in rest if isinstance(d, int)))


def infer_reshape(op: str, shape: Sequence[Dim], newshape: Sequence[int]) -> list[Dim]:
    """The output shape of reshape, applying TVM's special values 0, -1, -2, -3, -4."""
    out: list[Dim] = []
    src, i, infer_at = 0, 0, -1

    def need(n: int, what: str) -> None:
        if src + n > len(shape):
            raise fail(op, f"newshape {tuple(newshape)}: {what} has no input dimension left "
                           f"(input shape {fmt_shape(shape)})")

    while i < len(newshape):
        v = newshape[i]
        if v > 0:
            out.append(v)
        elif v == 0:
            need(1, "0 (copy a dimension)")
            out.append(shape[src])
        elif v == -1:
            if infer_at >= 0:
                raise fail(op, f"newshape {tuple(newshape)} has more than one -1")
            infer_at = len(out)
            out.append(1)
        elif v == -2:
            out.extend(shape[src:])
            src = len(shape)
        elif v == -3:
            need(2, "-3 (merge two dimensions)")
            out.append(dim_mul(shape[src], shape[src + 1]))
            src += 1
        elif v == -4:
            if i + 2 >= len(newshape):
                raise fail(op, f"newshape {tuple(newshape)}: -4 must be followed by two sizes")
            need(1, "-4 (split a dimension)")
            out.extend(_split_dim(op, shape[src], newshape[i + 1], newshape[i + 2]))
            i += 2
        src += 1 if v != -2 else 0
        i += 1
    if infer_at >= 0:
        out[infer_at] = _inferred_dim(op, shape, newshape, out[:infer_at] + out[infer_at + 1:])
    total, new_total = dim_prod(shape), dim_prod(out)
    if known(total, new_total) and total != new_total:
        raise fail(op, f"cannot reshape {fmt_shape(shape)} into {fmt_shape(out)}: "
                       f"{total} elements vs {new_total}")
    return out


def _inferred_dim(op: str, shape: Sequence[Dim], newshape: Sequence[int],
                  rest_dims: list[Dim]) -> Dim:
    """The size a -1 stands for: the input's element count over the other output dims."""
    total = dim_prod(shape)
    total_k, rest = _cancel_symbols(shape, rest_dims) or (total, dim_prod(rest_dims))
    if not known(total_k, rest):
        return AnyDim()
    if rest == 0 or total_k % rest:  # type: ignore[operator]
        raise fail(op, f"cannot reshape {fmt_shape(shape)} into {tuple(newshape)}: "
                       f"{fmt_dim(total)} elements do not divide by {fmt_dim(rest)}")
    return total_k // rest  # type: ignore[operator]


def _reshape_rel(args: list[TensorType], attrs: ReshapeAttrs) -> TensorType:
    return tensor_of(infer_reshape("reshape", args[0].shape, attrs.newshape), args[0].dtype)


def _reshape_ref(x: np.ndarray, attrs: ReshapeAttrs) -> np.ndarray:
    return x.reshape(infer_reshape("reshape", x.shape, attrs.newshape))


def _reshape_dims(shape: Sequence[PrimExpr], newshape: Sequence[int]) -> list[PrimExpr]:
    """Relay's reshape special values (0, -1, -2, -3, -4) over te dimensions."""
    out: list[PrimExpr] = []
    src, i, infer_at = 0, 0, -1
    while i < len(newshape):
        v = newshape[i]
        if v > 0:
            out.append(tir.const(v))
        elif v == 0:
            out.append(shape[src])
        elif v == -1:
            infer_at = len(out)
            out.append(tir.const(1))
        elif v == -2:
            out.extend(shape[src:])
            src = len(shape)
        elif v == -3:
            out.append(shape[src] * shape[src + 1])
            src += 1
        elif v == -4:
            a, b = newshape[i + 1], newshape[i + 2]
            d = shape[src]
            out += [tir.floordiv(d, b) if a == -1 else tir.const(a),
                    tir.floordiv(d, a) if b == -1 else tir.const(b)]
            i += 2
        src += 1 if v != -2 else 0
        i += 1
    if infer_at >= 0:
        rest = out[:infer_at] + out[infer_at + 1:]
        out[infer_at] = tir.floordiv(prod(shape), prod(rest))
    return out


def _reshape_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    return [reshape_to(x, out_type, _reshape_dims(x.shape, attrs.newshape))]  # type: ignore


defop("reshape", _reshape_rel, _reshape_ref, INJECTIVE, attrs=ReshapeAttrs,
      doc="Same data, new shape (special values 0, -1, -2, -3, -4 as in Relay).",
      compute=_reshape_compute)


def reshape(data: Any, newshape: Sequence[int] | int) -> Call:
    """``data`` with a new shape. In ``newshape``: 0 copies the input dim, -1 infers one dim,
    -2 copies the remaining dims, -3 merges two input dims, -4 splits one into the next two."""
    if run_time(newshape):  # a shape known at run time: dyn.reshape
        return dyn_op("reshape")(data, newshape)
    return call("reshape", data, attrs=ReshapeAttrs(numbers(newshape)))


def _reverse_infer(op: str, shape: Sequence[Dim], newshape: Sequence[int]) -> list[Dim]:
    return infer_reshape(op, list(shape)[::-1], list(newshape)[::-1])[::-1]


def _reverse_reshape_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x = inputs[0]
    dims = _reshape_dims(list(x.shape)[::-1], list(attrs.newshape)[::-1])[::-1]
    return [reshape_to(x, out_type, dims)]  # type: ignore[arg-type]


defop("contrib_reverse_reshape",
      lambda args, attrs: tensor_of(_reverse_infer("reverse_reshape", args[0].shape,
                                                   attrs.newshape), args[0].dtype),
      lambda x, attrs: x.reshape(_reverse_infer("reverse_reshape", x.shape, attrs.newshape)),
      INJECTIVE, attrs=ReshapeAttrs, doc="reshape with special values applied right to left.",
      compute=_reverse_reshape_compute)


def reverse_reshape(data: Any, newshape: Sequence[int] | int) -> Call:
    """Like ``reshape``, but special values are matched from the right
    (``(10, 5, 4)`` with ``(-1, 0)`` gives ``(50, 4)``)."""
    return call("contrib_reverse_reshape", data, attrs=ReshapeAttrs(newshape))


def _like_shape(op: str, data: Sequence[Dim], like: Sequence[Dim],
                attrs: ReshapeLikeAttrs) -> list[Dim]:
    lhs_end = len(data) if attrs.lhs_end is None else attrs.lhs_end
    rhs_end = len(like) if attrs.rhs_end is None else attrs.rhs_end
    out = [*data[:attrs.lhs_begin], *like[attrs.rhs_begin:rhs_end], *data[lhs_end:]]
    total, new_total = dim_prod(data), dim_prod(out)
    if known(total, new_total) and total != new_total:
        raise fail(op, f"cannot reshape {fmt_shape(data)} like {fmt_shape(like)}: "
                       f"{total} elements vs {new_total}")
    return out


def _reshape_like_compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    x, like = inputs
    lhs_end = x.ndim if attrs.lhs_end is None else attrs.lhs_end
    rhs_end = like.ndim if attrs.rhs_end is None else attrs.rhs_end
    dims = [*x.shape[:attrs.lhs_begin], *like.shape[attrs.rhs_begin:rhs_end], *x.shape[lhs_end:]]
    return [reshape_to(x, out_type, dims)]  # type: ignore[arg-type]


defop("reshape_like",
      lambda args, attrs: tensor_of(_like_shape("reshape_like", args[0].shape, args[1].shape,
                                                attrs), args[0].dtype),
      lambda x, like, attrs: x.reshape(_like_shape("reshape_like", x.shape, like.shape, attrs)),
      INJECTIVE, args=("data", "shape_like"), attrs=ReshapeLikeAttrs,
      doc="Reshape data to the shape of another tensor.", compute=_reshape_like_compute)


def reshape_like(data: Any, shape_like: Any, lhs_begin: int = 0, lhs_end: int | None = None,
                 rhs_begin: int = 0, rhs_end: int | None = None) -> Call:
    """``data`` reshaped so dims [lhs_begin, lhs_end) become shape_like's [rhs_begin, rhs_end)."""
    attrs = ReshapeLikeAttrs(lhs_begin, lhs_end, rhs_begin, rhs_end)
    return call("reshape_like", data, shape_like, attrs=attrs)
