"""SimplifyExpr: small algebraic clean-ups, each a named rewrite in one table.

- ``reshape_of_reshape``: a reshape-like op (reshape, reverse_reshape, squeeze, expand_dims,
  batch_flatten) of another becomes one ``reshape`` to the final static shape (or, with one
  ``?`` dimension, that shape with -1 for it: the element count fixes it);
- ``noop_reshape``: a reshape-like op that keeps the shape goes (with one ``?`` dimension:
  in the same place, the static sizes equal);
- ``transpose_of_transpose``: composed into one transpose (none if the identity);
- ``noop_transpose``: an identity permutation goes;
- ``transpose_of_unit_axes``: a transpose that moves only axes of size 1 is a reshape;
- ``cast_to_same_dtype``: a cast to the dtype the value has goes;
- ``cast_of_widening_cast``: ``cast(cast(x, wide), t)`` is ``cast(x, t)`` when ``wide``
  holds every value of x's dtype exactly;
- ``identity_arith``: ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1`` go
  when the constant (or ``zeros``/``ones``/``*_like`` call) does not change x's type;
- ``consecutive_add``: ``(x + c1) + c2`` is ``x + (c1 + c2)`` for constants c1, c2;
- ``shape_of_transpose``: ``shape_of(transpose(x, p))`` is ``take(shape_of(x), p)``, so a
  transpose read only for its shape (torch's ``k.size(-2)``) is not computed at all;
- ``shape_of_conv``: ``shape_of`` of a one-input elementwise op is its input's, and of an
  NCHW ``nn.conv2d`` the input's with the conv's channels and window sizes (arithmetic on
  the shape vector), so a conv read for its shape too can fuse with its one real reader;
- ``reduce_of_transpose``: a reduction of an elementwise op of ``transpose(x)`` (alone or
  with a scalar constant: ``transpose(x) ** 2``) reduces the op of ``x`` on the matching
  axes and transposes the smaller result (torch.stft's magnitude: transpose, square, sum
  over the (re, im) axis). A reduction of the transpose itself is left: decomposed norms
  read ``mean(t)`` and ``t - mean(t)`` of one ``t``, and their recognition wants both;
- ``transpose_of_elementwise_of_transpose``: ``transpose(u(transpose(x)))`` for a one-input
  elementwise ``u`` (or one with a scalar constant) is ``u`` of the composed transpose, which
  the transpose rules then fold (a transpose there and back around a ``sqrt``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, Constant, RelayExpr, Tuple, const
from ...ir.module import IRModule
from ...ir.op import Op, OpPattern
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ._helpers import op_call, op_name
from ._pattern_rewrite import Rule, rewrite_module

__all__ = ["RULES", "SimplifyExpr"]

_RESHAPES = ("reshape", "contrib_reverse_reshape", "squeeze", "expand_dims", "nn.batch_flatten")



def _call_of(e: RelayExpr, *names: str) -> Any:
    """``e`` if it is a call of one of ``names`` (typed loosely: rules read its attrs)."""
    return e if op_name(e) in names else None


def _static(ty: Any) -> bool:
    return isinstance(ty, TensorType) and all(isinstance(d, int) for d in ty.shape)


def _one_unknown(ty: Any) -> bool:
    """A tensor type with exactly one ``?`` dimension, the others static and positive: the
    element count fixes that one (a symbolic batch or sequence)."""
    if not isinstance(ty, TensorType):
        return False
    static = [d for d in ty.shape if isinstance(d, int)]
    return len(static) == len(ty.shape) - 1 and all(d > 0 for d in static)


def reshape_of_reshape(call: Call) -> RelayExpr | None:
    inner, ty = _call_of(call.args[0], *_RESHAPES), call.checked_type_
    if inner is None or not isinstance(ty, TensorType):
        return None
    if _static(ty):
        return op_call("reshape", inner.args[0], newshape=tuple(ty.shape))
    if _one_unknown(ty):  # the same element count gives the ? its size: -1 there
        return op_call("reshape", inner.args[0],
                       newshape=tuple(d if isinstance(d, int) else -1 for d in ty.shape))
    return None


def noop_reshape(call: Call) -> RelayExpr | None:
    ty, data = call.checked_type_, call.args[0]
    if ty is None or not isinstance(data.checked_type_, TensorType):
        return None
    if _static(ty):
        return data if data.checked_type_ == ty else None
    dty = data.checked_type_
    # one ? in the same place and equal static sizes: the same element count, the same shape
    same = _one_unknown(ty) and _one_unknown(dty) and ty.dtype == dty.dtype and \
        len(ty.shape) == len(dty.shape) and all(
            a == b if isinstance(a, int) else not isinstance(b, int)
            for a, b in zip(ty.shape, dty.shape))
    return data if same else None


def _perm(call: Any) -> list[int] | None:
    ty = call.args[0].checked_type_
    if not isinstance(ty, TensorType):
        return None
    n, axes = len(ty.shape), call.attrs.axes
    return list(range(n))[::-1] if axes is None else [a % n for a in axes]


def transpose_of_transpose(call: Call) -> RelayExpr | None:
    inner = _call_of(call.args[0], "transpose")
    if inner is None:
        return None
    outer_p, inner_p = _perm(call), _perm(inner)
    if outer_p is None or inner_p is None:
        return None
    composed = [inner_p[a] for a in outer_p]
    data = inner.args[0]
    if composed == sorted(composed):
        return data
    return op_call("transpose", data, axes=tuple(composed))


def noop_transpose(call: Call) -> RelayExpr | None:
    p = _perm(call)
    return call.args[0] if p is not None and p == sorted(p) else None


def transpose_of_unit_axes(call: Call) -> RelayExpr | None:
    """A transpose that keeps the order of every axis but those of size 1 moves no element:
    a reshape (attention's (B, S, 1, D) -> (B, 1, S, D) of one head, under a ``?`` batch too,
    which the reshape rules then fold)."""
    p, ty = _perm(call), call.checked_type_
    if p is None or p == sorted(p) or not (_static(ty) or _one_unknown(ty)):
        return None
    src = call.args[0].checked_type_.shape  # type: ignore[union-attr]
    moved = [a for a in p if src[a] != 1]
    if moved != sorted(moved):
        return None
    return op_call("reshape", call.args[0],
                   newshape=tuple(d if isinstance(d, int) else -1 for d in ty.shape))


def cast_to_same_dtype(call: Any) -> RelayExpr | None:
    ty = call.args[0].checked_type_
    ok = isinstance(ty, TensorType) and ty.dtype == call.attrs.dtype
    return call.args[0] if ok else None


def cast_of_widening_cast(call: Any) -> RelayExpr | None:
    inner = _call_of(call.args[0], "cast")
    if inner is None:
        return None
    data, wide = inner.args[0], inner.attrs.dtype
    src = data.checked_type_
    if not isinstance(src, TensorType) or not np.can_cast(src.dtype, wide, "safe"):
        return None
    target = call.attrs.dtype
    return data if target == src.dtype else op_call("cast", data, dtype=target)


def _all_equal(e: RelayExpr, value: float) -> bool:
    name = op_name(e)
    if isinstance(e, Constant):
        return bool(np.all(e.data.numpy() == value))
    return name in ({"zeros", "zeros_like"} if value == 0 else {"ones", "ones_like"})


_IDENTITY = {"add": (0.0, (0, 1)), "subtract": (0.0, (1,)), "multiply": (1.0, (0, 1)),
             "divide": (1.0, (1,))}


def identity_arith(call: Call) -> RelayExpr | None:
    value, sides = _IDENTITY[op_name(call) or ""]
    for k in sides:
        other = call.args[1 - k]
        if _all_equal(call.args[k], value) and other.checked_type_ == call.checked_type_ \
                and call.checked_type_ is not None:
            return other
    return None


def consecutive_add(call: Call) -> RelayExpr | None:
    inner, c2 = _call_of(call.args[0], "add"), call.args[1]
    if inner is None or not isinstance(c2, Constant):
        return None
    x, c1 = inner.args
    if not isinstance(c1, Constant) or str(c1.data.dtype) != str(c2.data.dtype):
        return None
    total = (c1.data.numpy() + c2.data.numpy()).astype(str(c1.data.dtype))
    return op_call("add", x, const(total))


def shape_of_transpose(call: Any) -> RelayExpr | None:
    inner = _call_of(call.args[0], "transpose")
    p = None if inner is None else _perm(inner)
    if p is None:
        return None
    dims = op_call("shape_of", inner.args[0], dtype=call.attrs.dtype)
    return op_call("take", dims, const(np.array(p, "int64")), axis=0)


def _keeps_shape(e: RelayExpr) -> bool:
    """A call of a one-input elementwise op (its result has its input's shape)."""
    return isinstance(e, Call) and isinstance(e.op, Op) and len(e.args) == 1 and \
        OpPattern(e.op.op_def.pattern) == OpPattern.ELEMWISE


def shape_of_conv(call: Any) -> RelayExpr | None:
    """``shape_of`` of a one-input elementwise op is that of its input, and of an NCHW
    ``nn.conv2d`` with a static weight the input's, its channels replaced and its height and
    width through the window: the conv's result then feeds only its real readers, and FuseOps
    can fuse what follows into it (a detector's FPN merge ``conv + resize(.., Shape(conv))``:
    the ``add`` ran alone in the dynamic build, fused with the conv in the static one)."""
    x = call.args[0]
    if _keeps_shape(x):
        return op_call("shape_of", x.args[0], dtype=call.attrs.dtype)
    conv = _call_of(x, "nn.conv2d")
    if conv is None or conv.attrs.data_layout != "NCHW" or conv.attrs.kernel_layout != "OIHW" \
            or conv.attrs.out_layout not in ("", "NCHW") or not _static(conv.args[1].checked_type_):
        return None
    a, dtype = conv.attrs, call.attrs.dtype
    o, _, kh, kw = conv.args[1].checked_type_.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a.strides, a.dilation, a.padding
    # out = (dims * keep + shift) // stride + base: N kept, C set to o, H and W windowed
    shift = [0, 0, pt + pb - (kh - 1) * dh - 1, pl + pr - (kw - 1) * dw - 1]
    vec = lambda v: const(np.array(v, dtype))  # noqa: E731
    dims = op_call("multiply", op_call("shape_of", conv.args[0], dtype=dtype), vec([1, 0, 1, 1]))
    if shift[2:] == [-1, -1] and (sh, sw) == (1, 1):  # the same height and width
        return op_call("add", dims, vec([0, o, 0, 0]))
    dims = op_call("floor_divide", op_call("add", dims, vec(shift)), vec([1, 1, sh, sw]))
    return op_call("add", dims, vec([0, o, 1, 1]))


def _vector_length(e: RelayExpr) -> int | None:
    ty = e.checked_type_
    if not (isinstance(ty, TensorType) and ty.ndim == 1 and isinstance(ty.shape[0], int)):
        return None
    return ty.shape[0]


def slice_of_slice(call: Any) -> RelayExpr | None:
    inner = _call_of(call.args[0], "dyn.strided_slice")
    if inner is None or call.attrs.slice_mode != inner.attrs.slice_mode or \
            call.attrs.axes is None or inner.attrs.axes is None:
        return None
    ndim = inner.args[0].checked_type_.ndim
    axes = [a % ndim for a in (*inner.attrs.axes, *call.attrs.axes)]
    if len(set(axes)) != len(axes):
        return None
    bounds: list[RelayExpr] = []
    for k in (1, 2, 3):  # begin, end, strides: one value per axis, one dtype
        pair = (inner.args[k], call.args[k])
        counts = [_vector_length(e) for e in pair]
        if counts != [len(inner.attrs.axes), len(call.attrs.axes)] or \
                pair[0].checked_type_.dtype != pair[1].checked_type_.dtype:
            return None
        bounds.append(op_call("concatenate", Tuple(pair), axis=0))
    return op_call("dyn.strided_slice", inner.args[0], *bounds, axes=tuple(axes),
                   slice_mode=call.attrs.slice_mode, where=call.attrs.where)


_REDUCES = ("sum", "mean", "max", "min", "prod")
_UNARY = frozenset({"sqrt", "rsqrt", "exp", "log", "abs", "negative", "sigmoid", "tanh",
                    "nn.relu", "erf", "floor", "ceil", "round", "sign"})
_WITH_SCALAR = frozenset({"power", "multiply", "add", "subtract", "divide", "maximum",
                          "minimum"})


def _elementwise_of(e: RelayExpr) -> tuple[Any, RelayExpr] | None:
    """``(call, its tensor operand)`` if ``e`` is a one-input elementwise op, or an op of
    ``_WITH_SCALAR`` whose second operand is a one-element constant of the same dtype."""
    name = op_name(e)
    if name in _UNARY:
        return e, e.args[0]  # type: ignore[union-attr]
    if name in _WITH_SCALAR:
        c = e.args[1]  # type: ignore[union-attr]
        ty, cty = e.args[0].checked_type_, getattr(c, "checked_type_", None)  # type: ignore
        if isinstance(c, Constant) and c.data.numpy().size == 1 and isinstance(ty, TensorType) \
                and isinstance(cty, TensorType) and cty.dtype == ty.dtype and len(cty.shape) <= 1:
            return e, e.args[0]  # type: ignore[union-attr]
    return None


def _with_operand(call: Any, operand: RelayExpr) -> RelayExpr:
    """``call`` (from ``_elementwise_of``) applied to ``operand`` instead."""
    return Call(call.op, (operand, *call.args[1:]), call.attrs)


def reduce_of_transpose(call: Any) -> RelayExpr | None:
    if call.attrs.exclude:
        return None
    found = _elementwise_of(call.args[0])
    if found is None or _call_of(found[1], "transpose") is None:
        return None
    lifted, inner = found
    p = _perm(inner)
    if p is None:
        return None
    n = len(p)
    axes = range(n) if call.attrs.axis is None else [int(a) % n for a in call.attrs.axis]
    source = sorted(p[a] for a in axes)
    x = _with_operand(lifted, inner.args[0])
    reduced = op_call(call.op.name, x, axis=tuple(source), keepdims=call.attrs.keepdims,
                      exclude=False)
    if call.attrs.keepdims:
        return op_call("transpose", reduced, axes=tuple(p))
    kept = [a for a in range(n) if a not in source]  # the result's axes, in x's order
    order = [kept.index(p[a]) for a in range(n) if a not in axes]
    if order == sorted(order):
        return reduced
    return op_call("transpose", reduced, axes=tuple(order))


def transpose_of_elementwise_of_transpose(call: Call) -> RelayExpr | None:
    found = _elementwise_of(call.args[0])
    if found is None:
        return None
    inner = _call_of(found[1], "transpose")
    if inner is None:
        return None
    moved = op_call("transpose", inner, axes=call.attrs.axes)  # folded by the rules above
    return _with_operand(found[0], moved)


RULES: list[Rule] = [
    *((name, reshape_of_reshape) for name in _RESHAPES),
    *((name, noop_reshape) for name in _RESHAPES),
    ("transpose", transpose_of_transpose), ("transpose", noop_transpose),
    ("transpose", transpose_of_unit_axes),
    ("cast", cast_to_same_dtype), ("cast", cast_of_widening_cast),
    *((name, identity_arith) for name in _IDENTITY),
    ("add", consecutive_add),
    ("shape_of", shape_of_transpose), ("shape_of", shape_of_conv),
    *((name, reduce_of_transpose) for name in _REDUCES),
    ("transpose", transpose_of_elementwise_of_transpose),
    ("dyn.strided_slice", slice_of_slice),
]


@dataclass(frozen=True)
class SimplifyExpr(ModulePass):
    """Apply the rewrites of ``RULES`` until none fires (see the module docstring)."""

    name: ClassVar[str] = "SimplifyExpr"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return rewrite_module(mod, RULES)


register_pass("SimplifyExpr", SimplifyExpr)
