"""FuseLayerNorm: the decomposed layer normalisation that SimplifyInference and ONNX exporters
leave behind becomes one ``nn.layer_norm``, whose C kernel computes it in one pass over the
data (``ember/include/ember/kernels/norm.h``) instead of three kernels.

Recognised, over one axis ``a`` of a float32 ``x`` whose dimensions may be ``?`` (a
transformer's batch and sequence, or the frames that wav2vec2's GroupNorm normalises; the
kernel takes them at run time; gamma and beta join only along a static axis), in either
operand order where the op commutes, every intermediate node used only inside the pattern:

- ``mu = mean(x, axis=[a], keepdims=True)``, ``c = x - mu``;
- ``var`` = ``variance(x, mu, axis=[a], keepdims=True)`` (biased), or ``mean(c * c)`` /
  ``mean(c ** 2)`` over the same axis;
- ``c / sqrt(var + eps)`` or ``c * rsqrt(var + eps)``, ``eps`` a scalar constant;

then, bottom-up, ``* gamma`` and ``+ beta`` where gamma/beta hold one value per element of
axis ``a`` (shape ``(n,)``, or broadcasting only along ``a``) and the product/sum keeps x's
shape: they become the op's scale and centre.

The RMS norm (T5, LLaMA) the same way becomes one ``nn.rms_norm`` (and its ``* gamma``):
``x / sqrt(ms + eps)``, ``x * rsqrt(ms + eps)`` or ``x * (1 / sqrt(ms + eps))`` (ONNX's
Reciprocal), ``ms = mean(x * x)`` or ``mean(x ** 2)`` over one axis; spelled out it was three
kernels (the mean of squares, the reciprocal root, the two products).
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...ir.visitor import children
from ._helpers import UsesMutator, op_call, op_name, rewrite_functions, use_counts

__all__ = ["FuseLayerNorm"]



def _scalar(e: Any) -> float | None:
    if isinstance(e, Constant) and e.data.numpy().size == 1 and e.data.dtype.startswith("float"):
        return float(e.data.numpy().reshape(()))
    return None


def _shape(e: Any) -> tuple | None:
    ty = e.checked_type_
    return tuple(ty.shape) if isinstance(ty, TensorType) else None


def _f32(e: Any) -> bool:
    ty = e.checked_type_
    return isinstance(ty, TensorType) and ty.dtype == "float32"


def _static_f32(e: Any) -> bool:
    return _f32(e) and all(isinstance(d, int) for d in e.checked_type_.shape)


def _operands(e: Call) -> list[tuple[Any, Any]]:
    """(a, b) and, for a commutative op, (b, a)."""
    a, b = e.args
    return [(a, b), (b, a)] if op_name(e) in ("add", "multiply") else [(a, b)]


def _one_axis(e: Call, rank: int) -> int | None:
    """The single reduction axis of a keepdims mean/variance, normalised; else None."""
    attrs = e.attrs
    axis = getattr(attrs, "axis", None)
    if not getattr(attrs, "keepdims", False) or getattr(attrs, "exclude", False) or \
            axis is None or len(axis) != 1 or getattr(attrs, "unbiased", False):
        return None
    return int(axis[0]) % rank


@dataclass
class _Normalised:
    """A matched ``(x - mean) / sqrt(var + eps)``: its input, axis, eps, interior nodes."""

    x: Any
    axis: int
    eps: float
    interior: list


def _match_mean(mu: Any, x: Any, rank: int) -> int | None:
    if op_name(mu) != "mean" or mu.args[0] is not x:
        return None
    return _one_axis(mu, rank)


def _match_var(var: Any, x: Any, mu: Any, c: Any, axis: int, rank: int) -> list | None:
    """The interior nodes of a variance of x around mu (or of centred c), else None."""
    if op_name(var) == "variance":
        if var.args[0] is x and var.args[1] is mu and _one_axis(var, rank) == axis:
            return [var]
        return None
    if op_name(var) != "mean" or _one_axis(var, rank) != axis:
        return None
    sq = var.args[0]
    if op_name(sq) == "multiply" and sq.args[0] is c and sq.args[1] is c:
        return [var, sq]
    if op_name(sq) == "power" and sq.args[0] is c and _scalar(sq.args[1]) == 2.0:
        return [var, sq]
    return None


def _match_denominator(d: Any, root: str) -> tuple[Any, float, list] | None:
    """sqrt(var + eps) for a divide, rsqrt(var + eps) for a multiply: (var, eps, nodes)."""
    want = "sqrt" if root == "divide" else "rsqrt"
    if op_name(d) != want or op_name(d.args[0]) != "add":
        return None
    for var, eps in _operands(d.args[0]):
        value = _scalar(eps)
        if value is not None and value >= 0.0:
            return var, value, [d, d.args[0]]
    return None


def match_normalised(e: Any) -> _Normalised | None:
    """``e`` as ``(x - mean(x)) / sqrt(var(x) + eps)`` over one axis, else None."""
    root = op_name(e)
    if root not in ("divide", "multiply") or not _f32(e):
        return None
    for c, d in _operands(e):
        if op_name(c) != "subtract":
            continue
        x, mu = c.args
        if not _f32(x) or _shape(x) != _shape(e):
            continue
        rank = len(_shape(x))
        axis = _match_mean(mu, x, rank)
        if axis is None:
            continue
        den = _match_denominator(d, root)
        if den is None:
            continue
        var_nodes = _match_var(den[0], x, mu, c, axis, rank)
        if var_nodes is not None:
            return _Normalised(x, axis, den[1], [c, mu, *den[2], *var_nodes])
    return None


def match_rms(e: Any) -> _Normalised | None:
    """``e`` as ``x / sqrt(mean(x ** 2) + eps)`` over one axis (or the forms of the module
    doc), else None."""
    root = op_name(e)
    if root not in ("divide", "multiply") or not _f32(e):
        return None
    for x, d in _operands(e):
        nodes = []
        if root == "multiply" and op_name(d) == "divide" and _scalar(d.args[0]) == 1.0:
            nodes, d, root_of = [d], d.args[1], "divide"  # x * (1 / sqrt(.))
        else:
            root_of = root
        den = _match_denominator(d, root_of)
        if den is None or not _f32(x) or _shape(x) != _shape(e):
            continue
        ms, rank = den[0], len(_shape(x))
        axis = _one_axis(ms, rank) if op_name(ms) == "mean" else None
        sq = ms.args[0] if axis is not None else None
        if sq is None or not ((op_name(sq) == "multiply" and sq.args[0] is x and sq.args[1] is x)
                              or (op_name(sq) == "power" and sq.args[0] is x
                                  and _scalar(sq.args[1]) == 2.0)):
            continue
        return _Normalised(x, axis, den[1], [*nodes, *den[2], ms, sq])
    return None


def _only_inside(root: Any, interior: list, uses: dict[int, int]) -> bool:
    """Every interior node is used only by the root and the other interior nodes."""
    inside = {id(n) for n in interior}
    internal = Counter(id(k) for n in [root, *interior] for k in children(n) if id(k) in inside)
    return all(uses.get(i, 0) == internal[i] for i in inside)


def _per_axis_vector(v: Any, x_shape: tuple, axis: int) -> int | None:
    """Number of values when ``v`` runs along ``axis`` only (its broadcast keeps x's shape)."""
    shape = _shape(v)
    if shape is None or not _static_f32(v) or len(shape) > len(x_shape):
        return None
    padded = (1,) * (len(x_shape) - len(shape)) + shape
    n = x_shape[axis]
    ok = all(d == (n if i == axis else 1) for i, d in enumerate(padded))
    return n if ok else None


class _Fuser(UsesMutator):
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        name = op_name(new)
        if name in ("divide", "multiply"):
            found = match_normalised(orig)
            if found is not None and _only_inside(orig, found.interior, self.uses):
                return self._layer_norm(found)
            found = match_rms(orig)
            if found is not None and _only_inside(orig, found.interior, self.uses):
                return self._layer_norm(found, rms=True)
        if name in ("multiply", "add"):
            out = self._epilogue(orig, new, name)
            if out is not None:
                return out
        return new

    def _layer_norm(self, m: _Normalised, rms: bool = False) -> Call:
        n = _shape(m.x)[m.axis]
        n = n if isinstance(n, int) else 1  # a ? axis (a GroupNorm over a 1-D conv's ? frames):
        # the kernel takes its length at run time; these unused vectors only type-check
        ones = const(np.ones(n, "float32"))
        if rms:
            return op_call("nn.rms_norm", self.visit(m.x), ones, axis=m.axis, epsilon=m.eps,
                           scale=False)
        zeros = const(np.zeros(n, "float32"))
        return op_call("nn.layer_norm", self.visit(m.x), ones, zeros, axis=m.axis,
                       epsilon=m.eps, center=False, scale=False)

    def _epilogue(self, orig: Call, new: Call, name: str) -> Call | None:
        """multiply by gamma / add beta into a layer_norm used only here."""
        for i in (0, 1):
            src, other = orig.args[i], orig.args[1 - i]
            if self.uses.get(id(src), 0) != 1 or _shape(orig) != _shape(src):
                continue
            ln = self.visit(src)
            rms = op_name(ln) == "nn.rms_norm"
            if not (rms and name == "multiply") and (op_name(ln) != "nn.layer_norm"
                                                      or ln.attrs.center):
                continue
            if name == "multiply" and ln.attrs.scale:
                continue
            n = _per_axis_vector(other, _shape(src), ln.attrs.axis % len(_shape(src)))
            if n is None:
                continue
            vec = op_call("reshape", new.args[1 - i], newshape=[n])
            if rms:
                args, changes = (ln.args[0], vec), {"scale": True}
            elif name == "multiply":
                args, changes = (ln.args[0], vec, ln.args[2]), {"scale": True}
            else:
                args, changes = (ln.args[0], ln.args[1], vec), {"center": True}
            return Call(ln.op, args, dataclasses.replace(ln.attrs, **changes))
        return None


@dataclass(frozen=True)
class FuseLayerNorm(ModulePass):
    """Rewrite decomposed layer normalisations into ``nn.layer_norm`` (see the module doc)."""

    name: ClassVar[str] = "FuseLayerNorm"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        def rewrite(func: Any) -> Any:
            return _Fuser(use_counts(func)).visit(func)

        return rewrite_functions(mod, rewrite)


register_pass("FuseLayerNorm", FuseLayerNorm)
