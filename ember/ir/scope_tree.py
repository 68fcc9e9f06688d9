"""Nested scopes (function bodies, branches, blocks) and the innermost one enclosing two.

The printer binds a shared value in the innermost block that encloses all its uses, and
ToANormalForm binds it in the innermost scope that does: both ask ``common_scope`` once per
use. Each scope keeps the scopes 1, 2, 4, ... levels out of it (binary lifting), so an answer
takes log(depth) steps; walking out a level at a time would cost the depth at every use, and a
value used at every level of a deep nest would make the whole walk quadratic::

    top = Scope()
    a = Scope(Scope(top))
    common_scope(a, Scope(top)) is top
"""
from __future__ import annotations


class Scope:
    """A scope; ``parent`` is the enclosing one (None at the top), ``depth`` its level."""

    __slots__ = ("depth", "parent", "up")

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        # up[k]: the scope 2**k levels out, for every k that stays inside the tree.
        up: list[Scope] = [] if parent is None else [parent]
        while up and len(up) - 1 < len(up[-1].up):  # up[k + 1] is up[k].up[k]
            up.append(up[-1].up[len(up) - 1])
        self.up = up


def _outer(scope: Scope, depth: int) -> Scope:
    """The scope at level ``depth`` that encloses ``scope`` (or is it)."""
    steps, k = scope.depth - depth, 0
    while steps:
        if steps & 1:
            scope = scope.up[k]
        steps, k = steps >> 1, k + 1
    return scope


def common_scope(a: Scope, b: Scope) -> Scope:
    """The innermost scope enclosing both ``a`` and ``b`` (scopes of one tree)."""
    depth = min(a.depth, b.depth)
    a, b = _outer(a, depth), _outer(b, depth)
    if a is b:
        return a
    for k in reversed(range(len(a.up))):  # a and b stay level: both have as many steps up
        if k < len(a.up) and a.up[k] is not b.up[k]:
            a, b = a.up[k], b.up[k]
    if a.parent is None or a.parent is not b.parent:
        raise ValueError("common_scope: the two scopes are not in one tree")
    return a.parent
