"""Generic traversal of the loop IR: rebuild children, substitute variables, walk post-order.

Nodes are dataclasses with uniform fields, so one function maps over the children of any node;
a node is rebuilt only when a child changed (``new is old`` means nothing changed).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from .expr import PrimExpr, Var
from .stmt import Stmt

Node = Any
# Fields that bind a variable rather than use it: substitution must not touch them.
_BINDERS = frozenset({"loop_var", "var"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in _BINDERS)
        _FIELDS[cls] = names
    return names


def _is_node(v: Any) -> bool:
    return isinstance(v, (PrimExpr, Stmt))


def map_children(node: Node, fn: Callable[[Node], Node]) -> Node:
    """``node`` with ``fn`` applied to each child expression/statement (rebuilt if changed)."""
    if not dataclasses.is_dataclass(node):
        return node
    changes: dict[str, Any] = {}
    for name in _child_fields(type(node)):
        v = getattr(node, name)
        if _is_node(v):
            nv = fn(v)
        elif isinstance(v, tuple) and any(_is_node(x) for x in v):
            nv = tuple(fn(x) if _is_node(x) else x for x in v)
            if all(a is b for a, b in zip(nv, v)):
                continue
        else:
            continue
        if nv is not v:
            changes[name] = nv
    return dataclasses.replace(node, **changes) if changes else node


def transform(node: Node, fn: Callable[[Node], Node | None]) -> Node:
    """Rewrite bottom-up: children first, then ``fn(node)`` (``None`` keeps the node)."""
    memo: dict[int, Node] = {}

    def go(n: Node) -> Node:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        new = map_children(n, go)
        out = fn(new)
        out = new if out is None else out
        memo[id(n)] = out
        return out

    return go(node)


def substitute(node: Node, vmap: dict[Var, Any]) -> Node:
    """Replace each Var in ``vmap`` (by identity) with its expression."""
    if not vmap:
        return node
    ids = {id(k): v for k, v in vmap.items()}
    return transform(node, lambda n: ids.get(id(n)) if isinstance(n, Var) else None)


def post_order(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself included), children before parents, each once."""
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            yield n
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        if dataclasses.is_dataclass(n):
            for name in _child_fields(type(n)):
                v = getattr(n, name)
                kids = (v,) if _is_node(v) else v if isinstance(v, tuple) else ()
                for k in reversed(kids):
                    if _is_node(k):
                        stack.append((k, False))
        for name in ("loop_var", "var"):
            if isinstance(getattr(n, name, None), Var):
                stack.append((getattr(n, name), False))


def free_vars(node: Node) -> list[Var]:
    """Vars used in ``node`` in order of first appearance (bound vars included)."""
    return [n for n in post_order(node) if isinstance(n, Var)]
