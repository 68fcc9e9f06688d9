"""Generic traversal of the loop IR: rebuild children, substitute variables, walk post-order.

Nodes are dataclasses with uniform fields, so one function maps over the children of any node;
a node is rebuilt only when a child changed (``new is old`` means nothing changed).

Every walk here is a loop over an explicit stack, memoised on node identity: an expression
10,000 operators deep (a fused chain of elementwise ops) or a DAG whose tree form would be
exponential (``y = y + z; z = y`` repeated) costs time linear in its number of nodes.
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
_FIELDS: dict[type, tuple[str, ...]] = {}  # class -> fields that may hold children
_BINDER_FIELDS: dict[type, tuple[str, ...]] = {}  # class -> its binder fields


def _index(cls: type) -> None:
    # Once per class (walks look fields up for every node); () for a non-dataclass.
    fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    _FIELDS[cls] = tuple(f.name for f in fields if f.name not in _BINDERS)
    _BINDER_FIELDS[cls] = tuple(f.name for f in fields if f.name in _BINDERS)


def _child_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        _index(cls)
        names = _FIELDS[cls]
    return names


_NODE_TYPES = (PrimExpr, Stmt)


def children(node: Node) -> list[Node]:
    """The child expressions/statements of ``node`` in field order (binders excluded)."""
    out: list[Node] = []
    for name in _FIELDS.get(type(node)) or _child_fields(type(node)):
        v = getattr(node, name)
        if isinstance(v, _NODE_TYPES):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, _NODE_TYPES))
    return out


def map_children(node: Node, fn: Callable[[Node], Node]) -> Node:
    """``node`` with ``fn`` applied to each child expression/statement (rebuilt if changed;
    ``fn`` is called once per distinct child)."""
    return rebuild(node, {id(c): fn(c) for c in children(node)})


def transform(node: Node, fn: Callable[[Node], Node | None]) -> Node:
    """Rewrite bottom-up: children first, then ``fn(node)`` (``None`` keeps the node).

    ``fn`` sees the node rebuilt on its rewritten children; each distinct node is rewritten
    once, so shared subexpressions stay shared.
    """
    memo: dict[int, Node] = {}
    stack: list[tuple[Node, bool]] = [(node, False)]
    pop, push = stack.pop, stack.append
    while stack:
        n, ready = pop()
        if id(n) in memo:
            continue
        if not ready:
            kids = [c for c in children(n) if id(c) not in memo]
            if kids:  # a leaf (or a node whose children are all done) is rewritten at once
                push((n, True))
                stack.extend((c, False) for c in reversed(kids))
                continue
        new = rebuild(n, memo)
        out = fn(new)
        memo[id(n)] = new if out is None else out
    return memo[id(node)]


def rebuild(node: Node, memo: dict[int, Node]) -> Node:
    """``node`` on its children's replacements ``memo[id(child)]``: rebuilt if one differs,
    else ``node`` itself. The inner loop of every bottom-up rewrite (no call per child)."""
    changes: dict[str, Any] | None = None
    for name in _FIELDS.get(type(node)) or _child_fields(type(node)):
        v = getattr(node, name)
        if isinstance(v, _NODE_TYPES):
            nv = memo[id(v)]
            if nv is v:
                continue
        elif isinstance(v, tuple) and v:
            nv = tuple(memo[id(x)] if isinstance(x, _NODE_TYPES) else x for x in v)
            if all(a is b for a, b in zip(nv, v)):
                continue
        else:
            continue
        if changes is None:
            changes = {}
        changes[name] = nv
    return dataclasses.replace(node, **changes) if changes else node


def rewrite(node: Node, fn: Callable[[Node], Node | None]) -> Node:
    """As ``transform``, but a replacement returned by ``fn`` is rewritten in turn (its
    children first, then ``fn`` on it), until ``fn`` keeps every node. Lowering inlines a
    stage this way: a load becomes the stage's body, whose own loads are inlined next.

    ``fn`` may return the same replacement object for many nodes (it is rewritten once);
    a replacement must not contain the node it replaces.
    """
    memo: dict[int, Node] = {}
    keep: list[Node] = []  # replacements stay alive, so their ids stay unique
    stack: list[tuple[Node, int, Node]] = [(node, 0, None)]
    while stack:
        n, state, repl = stack.pop()
        if state == 2:  # the replacement of ``n`` is done
            memo[id(n)] = memo[id(repl)]
            continue
        if id(n) in memo:
            continue
        if state == 0:
            stack.append((n, 1, None))
            stack.extend((c, 0, None) for c in reversed(children(n)) if id(c) not in memo)
            continue
        new = rebuild(n, memo)
        out = fn(new)
        if out is None or out is new:
            memo[id(n)] = new
        elif id(out) in memo:
            memo[id(n)] = memo[id(out)]
        else:
            keep.append(out)
            stack.append((n, 2, out))
            stack.append((out, 0, None))
    return memo[id(node)]


def substitute(node: Node, vmap: dict[Var, Any]) -> Node:
    """Replace each Var in ``vmap`` (by identity) with its expression."""
    if not vmap:
        return node
    ids = {id(k): v for k, v in vmap.items()}
    return transform(node, lambda n: ids.get(id(n)) if isinstance(n, Var) else None)


def post_order(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself included), children before parents, each once.

    A binding variable (a loop's or a let's) comes before the node's other children, and the
    children of a later field before those of an earlier one."""
    seen: set[int] = set()
    see = seen.add
    stack: list[tuple[Node, bool]] = [(node, False)]
    pop, push = stack.pop, stack.append
    fields_of, binders_of = _FIELDS.get, _BINDER_FIELDS.get
    while stack:
        n, expanded = pop()
        if expanded:
            yield n
            continue
        if id(n) in seen:
            continue
        see(id(n))
        cls = type(n)
        fields = fields_of(cls)
        if fields is None:
            fields = _child_fields(cls)
        mark = len(stack)
        push((n, True))
        # Field by field: a later field's children come out first (the order that stage
        # inputs, and so the generated C, have always had).
        for name in fields:
            v = getattr(n, name)
            if isinstance(v, _NODE_TYPES):
                push((v, False))
            elif isinstance(v, tuple):
                stack.extend((k, False) for k in reversed(v) if isinstance(k, _NODE_TYPES))
        for name in binders_of(cls):
            b = getattr(n, name, None)
            if isinstance(b, Var):
                push((b, False))
        if len(stack) == mark + 1:  # a leaf: out at once, not after another turn
            pop()
            yield n


def walk(node: Node, kids: Callable[[Node], list[Node]] = children) -> Iterator[Node]:
    """Every node reachable from ``node`` through ``kids``, children first, each once."""
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            yield n
        elif id(n) not in seen:
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((c, False) for c in reversed(kids(n)) if id(c) not in seen)


def fold(node: Node, fn: Callable[[Node, list[Any]], Any],
         kids: Callable[[Node], list[Node]] = children,
         memo: dict[int, Any] | None = None) -> Any:
    """Evaluate ``fn(n, [value of each kid])`` children first, once per distinct node, and
    return the value of ``node``: printing, bounds and linear forms of deep expressions.

    ``memo`` (node id -> value) carries values over from earlier folds, which it is extended
    with: folds of expressions that share subexpressions then evaluate each node once. Ids
    stay unique only while their nodes live: the caller keeps them alive (in the values)."""
    memo = {} if memo is None else memo
    stack: list[tuple[Node, bool]] = [(node, False)]
    pop, push = stack.pop, stack.append
    while stack:
        n, ready = pop()
        if id(n) in memo:
            continue
        ks = kids(n)
        if not ready:
            pending = [c for c in ks if id(c) not in memo]
            if pending:  # a node whose kids are done is evaluated at once
                push((n, True))
                stack.extend((c, False) for c in reversed(pending))
                continue
        memo[id(n)] = fn(n, [memo[id(c)] for c in ks])
    return memo[id(node)]


def free_vars(node: Node) -> list[Var]:
    """Vars used in ``node`` in order of first appearance (bound vars included)."""
    return [n for n in post_order(node) if isinstance(n, Var)]
