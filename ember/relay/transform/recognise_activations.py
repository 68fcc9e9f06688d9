"""RecogniseActivations: the activations ONNX exporters write as several ops become one op, so
that fusion and the kernels see what the model means (a conv or GEMM epilogue applies
``nn.hardswish`` in registers; the spelled-out form is a diamond of four kernels' worth of
elementwise ops reading the conv's output twice).

Each rewrite is a named function of one call, rebuilt on already-rewritten arguments, so the
forms nest (``clip(x * (1/6) + 1/2, 0, 1)`` becomes ``nn.hardsigmoid``, then
``x * nn.hardsigmoid(x)`` becomes ``nn.hardswish``). A product is read as its factors: a tree
of ``multiply`` and ``divide``-by-a-constant nodes, in any order and association, is a list of
leaves times one constant (``x * clip(x + 3, 0, 6) / 6``, ``(x * 0.5) * (1 + erf(x / 1.414))``
and ``x * (0.5 * (erf(x * 0.7071) + 1))`` all read the same). Inner constants must be the
activation's own (to 16 units of the dtype's precision); a product's constant may differ (a
pass such as FoldScaleAxis may have moved GELU's 0.5 into the next layer), and then the result
is the activation times what remains. Every node inside a pattern must have no other user; the
activation's input may have any number. Recognised, on float tensors:

- ``min_max_to_clip``: ``minimum(maximum(x, lo), hi)`` (either nesting), scalar lo <= hi, is
  ``clip(x, lo, hi)``; ``maximum(x, 0)`` is ``nn.relu(x)``;
- ``clip_to_hardsigmoid``: ``clip(x * a + b, 0, 1)`` (``x / k + b``, ``x + b``) is
  ``nn.hardsigmoid(x, a, b)``;
- ``product_to_activation``:
  ``x * sigmoid(x)`` is ``nn.silu``;
  ``x * clip(x + 3, 0, 6) / 6`` (``relu6``, ``min/max``), ``x * hardsigmoid(x)`` (1/6, 1/2)
  is ``nn.hardswish``, and ``clip(x + 3, 0, 6) / 6`` alone ``nn.hardsigmoid``;
  ``x * (1 + erf(x / sqrt(2))) / 2`` is ``nn.gelu``;
  ``x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) / 2`` (``x^3`` as ``power(x, 3)`` or
  products) is ``nn.gelu(approximate="tanh")``;
  ``x * tanh(softplus(x))`` with softplus ``log(1 + exp(x))`` or the overflow-free
  ``relu(x) + log(1 + exp(-abs(x)))`` is ``nn.mish``;
- ``exp_ratio_to_softmax``: ``e / sum(e, axis=a, keepdims=True)`` with ``e = exp(x - max(x,
  axis=a, keepdims=True))`` or ``exp(x)`` is ``nn.softmax(x, axis=a)``.

Layer norms are FuseLayerNorm's (``fuse_layer_norm.py``).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...ir.base import merge_spans
from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...ir.visitor import set_type
from ._helpers import PassMutator, op_call, op_name, rewrite_functions, rewrite_span, use_counts

__all__ = ["RULES", "RecogniseActivations"]



def _float_type(e: Any) -> TensorType | None:
    ty = e.checked_type_
    return ty if isinstance(ty, TensorType) and ty.dtype.startswith("float") else None


def _scalar(e: Any) -> float | None:
    """The value of a float constant with one element (shape (), (1,), (1, 1), ...)."""
    if isinstance(e, Constant) and e.data.numpy().size == 1 and e.data.dtype.startswith("float"):
        return float(e.data.numpy().reshape(()))
    return None


def _close(value: float | None, want: float, dtype: str) -> bool:
    """``value`` is ``want`` as an exporter writes it in ``dtype`` (16 units of precision)."""
    if value is None:
        return False
    eps = float(np.finfo(np.dtype(dtype)).eps)
    return abs(value - want) <= 16 * eps * abs(want)


class Matcher(PassMutator):
    """Rebuilds a function bottom-up and offers each rule the rebuilt call; ``single(node)``
    tells whether a rebuilt node had exactly one user in the original function."""

    def __init__(self, uses: dict[int, int], rules: dict[str, list[Rule]]) -> None:
        super().__init__()
        self.orig_uses, self.rules = uses, rules
        self.uses: dict[int, int] = {}
        self.keep: list[RelayExpr] = []  # rebuilt nodes stay alive: their ids stay unique

    def single(self, node: Any) -> bool:
        return self.uses.get(id(node), 0) == 1

    def visit_call(self, orig: Call) -> RelayExpr:
        new: RelayExpr = super().visit_call(orig)
        self.keep.append(new)
        self.uses[id(new)] = self.orig_uses.get(id(orig), 0)
        for rule in self.rules.get(op_name(new) or "", ()):
            out = set_type(rule(self, new), orig.checked_type_)  # type: ignore[arg-type]
            if out is not None:
                out = self.keep_span(orig, out)
                self.keep.append(out)
                self.uses[id(out)] = self.uses[id(new)]
                return out
        return new


Rule = Callable[[Matcher, Call], "RelayExpr | None"]


# ---------------------------------------------------------------- products
@dataclass
class Product:
    """A tree of multiply / divide-by-constant nodes as leaves times ``scale``."""

    leaves: list[Any] = field(default_factory=list)
    scale: float = 1.0


def factors(m: Matcher, root: Any) -> Product | None:
    """``root`` read as a product; inner product nodes count only when single-use (else they
    are leaves). None when ``root`` is not a multiply or a divide by a scalar constant."""
    prod, stack = Product(), [(root, True)]
    while stack:
        node, top = stack.pop()
        name = op_name(node)
        if (top or m.single(node)) and name == "multiply":
            stack.extend((a, False) for a in node.args)
        elif (top or m.single(node)) and name == "divide" and _scalar(node.args[1]):
            prod.scale /= _scalar(node.args[1])  # type: ignore[operator]
            stack.append((node.args[0], False))
        elif top:
            return None
        elif (value := _scalar(node)) is not None:
            prod.scale *= value
        else:
            prod.leaves.append(node)
    return prod


def _scaled_input(m: Matcher, e: Any) -> tuple[Any, float]:
    """``e`` as ``x * s`` (a single-use product with one leaf), else ``(e, 1)``."""
    if m.single(e) and op_name(e) in ("multiply", "divide"):
        p = factors(m, e)
        if p is not None and len(p.leaves) == 1:
            return p.leaves[0], p.scale
    return e, 1.0


def _plus_one(m: Matcher, e: Any, inner: str) -> Any:
    """The argument z of ``1 + inner(z)`` (either order; both nodes single-use), else None."""
    if not (m.single(e) and op_name(e) == "add"):
        return None
    for one, f in (e.args, e.args[::-1]):
        if _scalar(one) == 1.0 and m.single(f) and op_name(f) == inner:
            return f.args[0]
    return None


# Gates g(x) of ``x * g(x) * scale``: each returns (x, the activation, the scale it needs).
Gate = Callable[[Matcher, Any, str], "tuple[Any, Call, float] | None"]


def sigmoid_gate(m: Matcher, g: Any, dtype: str) -> tuple[Any, Call, float] | None:
    """``sigmoid(x)`` (also ``sigmoid(x * 1)``, as a swish with beta 1 is imported)."""
    if op_name(g) != "sigmoid":
        return None
    x, s = _scaled_input(m, g.args[0])
    return (x, op_call("nn.silu", x), 1.0) if _close(s, 1.0, dtype) else None


def _relu6_of_plus3(m: Matcher, g: Any, dtype: str) -> Any:
    """x of ``clip(x + 3, 0, 6)`` (the add single-use), else None."""
    if op_name(g) != "clip" or (g.attrs.a_min, g.attrs.a_max) != (0.0, 6.0) or not m.single(
            g.args[0]) or op_name(g.args[0]) != "add":
        return None
    for x, three in (g.args[0].args, g.args[0].args[::-1]):
        if _close(_scalar(three), 3.0, dtype):
            return x
    return None


def hardsigmoid_gate(m: Matcher, g: Any, dtype: str) -> tuple[Any, Call, float] | None:
    """``nn.hardsigmoid(x)`` (1/6, 1/2), or ``clip(x + 3, 0, 6)``, which is 6 of it."""
    if op_name(g) == "nn.hardsigmoid" and _close(g.attrs.alpha, 1 / 6, dtype) and _close(
            g.attrs.beta, 0.5, dtype):
        return g.args[0], op_call("nn.hardswish", g.args[0]), 1.0
    x = _relu6_of_plus3(m, g, dtype)
    return None if x is None else (x, op_call("nn.hardswish", x), 1 / 6)


def erf_gate(m: Matcher, g: Any, dtype: str) -> tuple[Any, Call, float] | None:
    """``1 + erf(x / sqrt(2))``: 2 * Phi(x)."""
    z = _plus_one(m, g, "erf")
    if z is None:
        return None
    x, s = _scaled_input(m, z)
    if not _close(s, 1 / math.sqrt(2), dtype):
        return None
    return x, op_call("nn.gelu", x, approximate="none"), 0.5


def _cubic(m: Matcher, e: Any, x: Any) -> float | None:
    """The c of ``c * x^3`` (``power(x, 3)`` or a product of three x), else None."""
    p = factors(m, e) if m.single(e) else None
    if p is None:
        return None
    if p.leaves == [x] * 3:
        return p.scale
    if len(p.leaves) == 1 and op_name(p.leaves[0]) == "power" and m.single(p.leaves[0]) and \
            p.leaves[0].args[0] is x and _scalar(p.leaves[0].args[1]) == 3.0:
        return p.scale
    return None


def tanh_gate(m: Matcher, g: Any, dtype: str) -> tuple[Any, Call, float] | None:
    """``1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))``."""
    w = _plus_one(m, g, "tanh")
    if w is None:
        return None
    poly, s = _scaled_input(m, w)
    if not (_close(s, math.sqrt(2 / math.pi), dtype) and m.single(poly) and
            op_name(poly) == "add"):
        return None
    for x, cube in (poly.args, poly.args[::-1]):
        if _close(_cubic(m, cube, x), 0.044715, dtype):
            return x, op_call("nn.gelu", x, approximate="tanh"), 0.5
    return None


def _softplus_input(m: Matcher, s: Any) -> Any:
    """x of ``log(1 + exp(x))`` or ``relu(x) + log(1 + exp(-abs(x)))``, else None."""
    if op_name(s) == "log" and m.single(s):
        z = _plus_one(m, s.args[0], "exp")
        return z
    if op_name(s) != "add" or not m.single(s):
        return None
    for r, tail in (s.args, s.args[::-1]):
        if op_name(r) != "nn.relu" or not m.single(r) or op_name(tail) != "log" or not m.single(tail):
            continue
        z = _plus_one(m, tail.args[0], "exp")
        neg = z.args[0] if op_name(z) == "negative" and m.single(z) else None
        if op_name(neg) == "abs" and m.single(neg) and neg.args[0] is r.args[0]:
            return r.args[0]
    return None


def mish_gate(m: Matcher, g: Any, dtype: str) -> tuple[Any, Call, float] | None:
    if op_name(g) != "tanh":
        return None
    x = _softplus_input(m, g.args[0])
    return None if x is None else (x, op_call("nn.mish", x), 1.0)


ACTIVATION_OPS = ("nn.silu", "nn.hardswish", "nn.hardsigmoid", "nn.gelu", "nn.mish")
GATES: tuple[Gate, ...] = (sigmoid_gate, hardsigmoid_gate, erf_gate, tanh_gate, mish_gate)


def _keeps_type(x: Any, call: Call) -> bool:
    """The op replacing ``call`` computes on ``x``'s type: it must be the call's own (a
    constant of shape (1, 1) in a pattern may broadcast x to a higher rank)."""
    return x.checked_type_ is not None and x.checked_type_ == call.checked_type_


def _scaled(act: Call, scale: float, dtype: str) -> RelayExpr:
    """``act * scale``, or ``act`` when the scale is 1 (to the dtype's precision)."""
    if _close(scale, 1.0, dtype):
        return act
    act = set_type(act, act.args[0].checked_type_)  # typed, for the rules of its users
    return op_call("multiply", act, const(np.array(scale, dtype=dtype)))


def product_to_activation(m: Matcher, call: Call) -> RelayExpr | None:
    """``c * x * g(x)`` for a gate g of ``GATES`` is ``act(x) * (c / the gate's c)``, the
    product being ``act(x)`` alone for the activation's own constant (a scale elsewhere, as
    FoldScaleAxis leaves GELU's 0.5 in the next layer's weights, stays a multiply);
    ``c * clip(x + 3, 0, 6)`` is ``nn.hardsigmoid(x) * 6c``."""
    ty = _float_type(call)
    prod = factors(m, call) if ty is not None else None
    if prod is None:
        return None
    dtype = ty.dtype  # type: ignore[union-attr]
    if len(prod.leaves) == 1 and op_name(prod.leaves[0]) in ACTIVATION_OPS and _close(
            prod.scale, 1.0, dtype) and _keeps_type(prod.leaves[0], call):
        # the scale an inner match left cancels: (act * 6) / 6; an act the inner match made
        # (no other user) takes the spans of the product it replaces too
        act = prod.leaves[0]
        if id(act) in m.uses and not m.single(act):
            return act
        return dataclasses.replace(act, span=merge_spans(act.span, rewrite_span(call, act)))
    if len(prod.leaves) == 1 and m.single(prod.leaves[0]):
        x = _relu6_of_plus3(m, prod.leaves[0], dtype)
        if x is not None and _keeps_type(x, call):
            gate = op_call("nn.hardsigmoid", x, alpha=1 / 6, beta=0.5)
            return _scaled(gate, prod.scale * 6, dtype)
    if len(prod.leaves) != 2:
        return None
    for x, g in (prod.leaves, prod.leaves[::-1]):
        if not m.single(g) or not _keeps_type(x, call):
            continue
        for gate in GATES:
            found = gate(m, g, dtype)
            if found is not None and found[0] is x:
                return _scaled(found[1], prod.scale / found[2], dtype)
    return None


# ---------------------------------------------------------------- clip, hardsigmoid
def min_max_to_clip(m: Matcher, call: Call) -> RelayExpr | None:
    outer, (a, b) = op_name(call), call.args
    if _float_type(call) is None:
        return None
    inner_name = "maximum" if outer == "minimum" else "minimum"
    for inner, c in ((a, b), (b, a)):
        bound = _scalar(c)
        if bound is None:
            continue
        if outer == "maximum" and bound == 0.0 and op_name(inner) != "minimum":
            return op_call("nn.relu", inner) if _keeps_type(inner, call) else None
        if not m.single(inner):
            continue
        if outer == "minimum" and op_name(inner) == "nn.relu" and bound >= 0.0 and _keeps_type(
                inner, call):
            return op_call("clip", inner.args[0], a_min=0.0, a_max=bound)  # max(x, 0) was seen
        if op_name(inner) != inner_name:
            continue
        for x, c2 in (inner.args, inner.args[::-1]):
            other = _scalar(c2)
            lo, hi = (other, bound) if outer == "minimum" else (bound, other)
            if other is not None and lo <= hi and _keeps_type(x, call):  # type: ignore[operator]
                return op_call("clip", x, a_min=lo, a_max=hi)
    return None


def clip_to_hardsigmoid(m: Matcher, call: Call) -> RelayExpr | None:
    ty, (arg,) = _float_type(call), call.args
    if ty is None or (call.attrs.a_min, call.attrs.a_max) != (0.0, 1.0):
        return None
    if op_name(arg) != "add" or not m.single(arg):
        return None
    for t, b in (arg.args, arg.args[::-1]):
        beta = _scalar(b)
        if beta is None:
            continue
        x, alpha = _scaled_input(m, t)
        if _scalar(x) is None and _keeps_type(x, call):
            return op_call("nn.hardsigmoid", x, alpha=alpha, beta=beta)
    return None


# ---------------------------------------------------------------- softmax
def _one_keepdims_axis(e: Any, rank: int) -> int | None:
    a = e.attrs
    if not a.keepdims or a.exclude or a.axis is None or len(a.axis) != 1:
        return None
    return int(a.axis[0]) % rank


def exp_ratio_to_softmax(m: Matcher, call: Call) -> RelayExpr | None:
    ty = _float_type(call)
    e, s = call.args
    if ty is None or op_name(e) != "exp" or op_name(s) != "sum" or s.args[0] is not e or \
            m.uses.get(id(e)) != 2 or not m.single(s):
        return None
    axis = _one_keepdims_axis(s, ty.ndim)
    if axis is None:
        return None
    x = e.args[0]
    if op_name(x) == "subtract" and m.single(x) and op_name(x.args[1]) == "max" and \
            x.args[1].args[0] is x.args[0] and m.single(x.args[1]) and \
            _one_keepdims_axis(x.args[1], ty.ndim) == axis:
        x = x.args[0]
    return op_call("nn.softmax", x, axis=axis) if _keeps_type(x, call) else None


RULES: list[tuple[str, Rule]] = [
    ("minimum", min_max_to_clip), ("maximum", min_max_to_clip),
    ("clip", clip_to_hardsigmoid),
    ("multiply", product_to_activation), ("divide", product_to_activation),
    ("divide", exp_ratio_to_softmax),
]


@dataclass(frozen=True)
class RecogniseActivations(ModulePass):
    """Rewrite exporters' decomposed activations and softmax into ops (module docstring)."""

    name: ClassVar[str] = "RecogniseActivations"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        table: dict[str, list[Rule]] = {}
        for name, rule in RULES:
            table.setdefault(name, []).append(rule)

        def rewrite(func: Any) -> Any:
            return Matcher(use_counts(func), table).visit(func)

        return rewrite_functions(mod, rewrite)


register_pass("RecogniseActivations", RecogniseActivations)
