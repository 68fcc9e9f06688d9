"""``tir.stmt_functor``: visit and rewrite loop IR the way Relay-era passes do.

``ir_transform(stmt, preorder, postorder, only_enable)``, ``post_order_visit(stmt, f)``,
``pre_order_visit(stmt, f)``, ``substitute(node, vmap)``. All walk an explicit stack.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import expr as _expr
from . import stmt as _stmt
from .functor import children, post_order, rebuild
from .functor import substitute as _substitute
from .op import convert


def _type_names() -> dict[str, type]:
    out: dict[str, type] = {}
    for mod in (_expr, _stmt):
        for name, cls in vars(mod).items():
            if isinstance(cls, type) and issubclass(cls, (_expr.PrimExpr, _stmt.Stmt)):
                out[f"tir.{name}"] = cls
    return out


def _enabled(only_enable: Sequence[str] | None) -> tuple[type, ...] | None:
    if only_enable is None:
        return None
    known = _type_names()
    if isinstance(only_enable, str):
        only_enable = [only_enable]
    out = []
    for key in only_enable:
        full = key if str(key).startswith("tir.") else f"tir.{key}"
        if full not in known:
            raise ValueError(f"ir_transform: unknown node type {key!r} in only_enable; "
                             f"known: {sorted(known)}")
        out.append(known[full])
    return tuple(out)


def ir_transform(stmt: Any, preorder: Callable | None, postorder: Callable | None,
                 only_enable: Sequence[str] | None = None) -> Any:
    """Rewrite ``stmt``: for each node of an enabled type (``["tir.For"]``; all if None),
    ``preorder(node)`` first (a non-None result replaces the node, its children unvisited),
    else the children are rewritten and ``postorder(new_node)`` may replace it."""
    kinds = _enabled(only_enable)

    def on(n: Any) -> bool:
        return kinds is None or isinstance(n, kinds)

    memo: dict[int, Any] = {}
    stack: list[tuple[Any, bool]] = [(stmt, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in memo:
            continue
        if not ready:
            if preorder is not None and on(n):
                out = preorder(n)
                if out is not None:
                    memo[id(n)] = out
                    continue
            stack.append((n, True))
            stack.extend((c, False) for c in reversed(children(n)) if id(c) not in memo)
            continue
        new = rebuild(n, memo)
        if postorder is not None and on(new):
            out = postorder(new)
            new = new if out is None else out
        memo[id(n)] = new
    return memo[id(stmt)]


def post_order_visit(stmt: Any, fvisit: Callable[[Any], None]) -> None:
    """Call ``fvisit`` on every node (children first, each once)."""
    for n in post_order(stmt):
        fvisit(n)


def pre_order_visit(stmt: Any, fvisit: Callable[[Any], Any]) -> None:
    """Call ``fvisit`` on every node, parents first; a False result skips the node's children."""
    seen: set[int] = set()
    stack = [stmt]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if fvisit(n) is False:
            continue
        stack.extend(reversed(children(n)))


def substitute(node: Any, value_map: dict) -> Any:
    """``node`` with each Var of ``value_map`` (by identity) replaced by its value."""
    return _substitute(node, {k: convert(v) for k, v in value_map.items()})
