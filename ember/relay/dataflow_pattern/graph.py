"""The dataflow graph of an expression, as the matcher needs it: each node's consumers, and
the post-dominator tree (node ``a`` dominates node ``b`` when every path from ``b`` to the
root runs through ``a``), which dominator patterns and partitioning ask about.

Edges run from a sub-expression to the expression using it (``ir.visitor.children``). Built
iteratively; the dominator tree is the classic one for DAGs: walking from the root towards
the inputs, a node's dominator parent is the lowest common ancestor of its consumers.
"""
from __future__ import annotations

from collections.abc import Iterator

from ...ir.expr import RelayExpr
from ...ir.visitor import children, post_order


class ExprGraph:
    """``order`` (inputs before their users), ``users(node)``, ``dominates(a, b)`` and
    ``dominated_by(node)`` (the nodes ``node`` immediately dominates)."""

    def __init__(self, root: RelayExpr) -> None:
        self.root = root
        self.order: list[RelayExpr] = list(post_order(root))
        self._index = {id(n): i for i, n in enumerate(self.order)}
        self._users: list[list[int]] = [[] for _ in self.order]
        for i, node in enumerate(self.order):
            for kid in dict.fromkeys(children(node), None):  # a node used twice is one edge
                self._users[self._index[id(kid)]].append(i)
        self._parent: list[int] = [-1] * len(self.order)
        self._depth: list[int] = [0] * len(self.order)
        self._kids: list[list[int]] = [[] for _ in self.order]
        for i in range(len(self.order) - 1, -1, -1):  # users come after their inputs
            if self._users[i]:
                parent = self._lca(self._users[i])
                self._parent[i], self._depth[i] = parent, self._depth[parent] + 1
                self._kids[parent].append(i)

    def _lca(self, nodes: list[int]) -> int:
        out = nodes[0]
        for other in nodes[1:]:
            a, b = out, other
            while a != b:
                if self._depth[a] >= self._depth[b]:
                    a = self._parent[a]
                else:
                    b = self._parent[b]
            out = a
        return out

    def __contains__(self, node: RelayExpr) -> bool:
        return id(node) in self._index

    def users(self, node: RelayExpr) -> Iterator[RelayExpr]:
        """The expressions that use ``node`` directly."""
        return (self.order[i] for i in self._users[self._index[id(node)]])

    def dominates(self, a: RelayExpr, b: RelayExpr) -> bool:
        """Whether every path from ``b`` to the root runs through ``a`` (``a`` is ``b`` too)."""
        target, i = self._index[id(a)], self._index[id(b)]
        while i != -1:
            if i == target:
                return True
            i = self._parent[i]
        return False

    def dominated_by(self, node: RelayExpr) -> Iterator[RelayExpr]:
        """The nodes whose immediate dominator is ``node``."""
        return (self.order[i] for i in self._kids[self._index[id(node)]])
