"""Patterns printed as the builder calls that make them:
``is_op("nn.relu")(is_op("add")(wildcard(), is_constant()))``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.op import Op
from ...ir.printer import short_text
from . import pattern as P


def _expr(p: P.ExprPattern, k: list[str]) -> str:
    if isinstance(p.expr, Op):
        return f'is_op("{p.expr.name}")'
    return f"is_expr({short_text(p.expr)})"


def _list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


_SHOW: dict[type, Callable[[Any, list[str]], str]] = {
    P.ExprPattern: _expr,
    P.VarPattern: lambda p, k: f'is_var("{p.name}")' if p.name else "is_var()",
    P.ConstantPattern: lambda p, k: "is_constant()",
    P.WildcardPattern: lambda p, k: "wildcard()",
    P.CallPattern: lambda p, k: f"{k[0]}({', '.join(k[1:])})" if p.args is not None
    else f"CallPattern({k[0]}, None)",
    P.FunctionPattern: lambda p, k: f"FunctionPattern("
    f"{_list(k[:-1]) if p.params is not None else 'None'}, {k[-1]})",
    P.TuplePattern: lambda p, k: f"is_tuple({_list(k) if p.fields is not None else 'None'})",
    P.TupleGetItemPattern: lambda p, k: f"is_tuple_get_item({k[0]}"
    + (f", {p.index})" if p.index >= 0 else ")"),
    P.IfPattern: lambda p, k: f"is_if({', '.join(k)})",
    P.LetPattern: lambda p, k: f"is_let({', '.join(k)})",
    P.AltPattern: lambda p, k: f"({k[0]} | {k[1]})",
    P.AttrPattern: lambda p, k: f"{k[0]}.has_attr({p.attrs!r})",
    P.TypePattern: lambda p, k: f"{k[0]}.has_type({p.type})",
    P.DataTypePattern: lambda p, k: f'{k[0]}.has_dtype("{p.dtype}")',
    P.ShapePattern: lambda p, k: f"{k[0]}.has_shape({list(p.shape)})",
    P.DominatorPattern: lambda p, k: f"{k[2]}.dominates({k[0]}, {k[1]})",
}


def show(pattern: P.DFPattern) -> str:
    """The text of ``pattern`` (sub-patterns first, from a list: no recursion)."""
    text: dict[int, str] = {}
    for node in P.post_order(pattern):
        kids = [text[id(c)] for c in P.inputs(node)]
        rule = next((_SHOW[k] for k in type(node).__mro__ if k in _SHOW), None)
        text[id(node)] = rule(node, kids) if rule else f"<{type(node).__name__}>"
    return text[id(pattern)]
