"""What the passes share besides the traversal framework (``ember.ir.visitor``): the mutator
configuration they all use, typing a module, mapping over its functions, building op calls.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.expr import Call, Function, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import Any as AnyDim
from ...ir.visitor import ExprMutator, children, is_primitive, post_order
from .type_infer import InferType


class PassMutator(ExprMutator):
    """An ExprMutator as the passes use it: every node keeps its type (a replacement without
    one takes the type of the node it replaces), and fused functions are left alone."""

    keep_types = True

    def skip(self, expr: RelayExpr) -> bool:
        return is_primitive(expr)


def infer(mod: IRModule) -> IRModule:
    """Run InferType (passes start with it when they read types, and end with it)."""
    return InferType()(mod)


def map_functions(mod: IRModule, fn: Callable[[Function], Function],
                  skip_primitive: bool = True) -> IRModule:
    """A copy of ``mod`` with ``fn`` applied to each Relay function (fused ones left alone)."""
    out = mod.copy()
    for gv, func in mod.functions.items():
        if not isinstance(func, Function) or (skip_primitive and is_primitive(func)):
            continue
        if func.get_attr("Compiler"):
            continue
        new = fn(func)
        if new is not func:
            out.add(gv, new)
    return out


def rewrite_functions(mod: IRModule, rewrite: Callable[[Function], RelayExpr]) -> IRModule:
    """The body of most rewriting passes: type ``mod``, ``rewrite`` each Relay function
    (fused ones left alone, see ``map_functions``), and type the result."""
    return infer(map_functions(infer(mod), rewrite))  # type: ignore[arg-type]


def use_counts(expr: RelayExpr) -> dict[int, int]:
    """How many parents each node under ``expr`` has (by id): a rewrite may absorb a value
    into its consumer only when that consumer is its one user."""
    counts: dict[int, int] = {}
    for node in post_order(expr):
        for kid in children(node):
            counts[id(kid)] = counts.get(id(kid), 0) + 1
    return counts


def op_call(name: str, *args: RelayExpr, **attrs: Any) -> Call:
    """``name(*args, **attrs)`` as a Call of the registered op (attrs built by the op)."""
    op = Op.get(name)
    return Call(op, args, op.make_attrs(**attrs) if attrs else None)


def expand_to_axis(vec: RelayExpr, ndim: int, axis: int) -> RelayExpr:
    """A 1-D ``vec`` running along ``axis`` of an ``ndim``-D tensor, shaped to broadcast
    against it: (C,) -> (C, 1, 1) for axis 1 of 4-D (nothing to do for the last axis)."""
    trailing = ndim - 1 - axis
    return vec if trailing == 0 else op_call("expand_dims", vec, axis=1, num_newaxis=trailing)


def same_shape(a: Any, b: Any) -> bool:
    """Whether two tensor types have one shape as far as the types tell: equal static sizes,
    and where a size is symbolic, the same shape variable, or a ``?`` on either side (a
    ``?`` that a reshape made from the batch is the batch). A static 1 against a symbolic
    size is not the same (it broadcasts). A fused epilogue that reads an operand of the
    result's shape checks at run time that the symbolic sizes agree."""
    if a.ndim != b.ndim:
        return False
    return all(x == y if isinstance(x, int) or isinstance(y, int)
               else x is y or isinstance(x, AnyDim) or isinstance(y, AnyDim)
               for x, y in zip(a.shape, b.shape))
