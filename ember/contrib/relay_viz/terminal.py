"""The text renderer: each function as an indented tree, the way an AST dump reads.

    @main([Var(x, ...)])
    `--Call
       |--add
       |--Var(Input) name_hint: x, shape: (2, 3), dtype: float32
       `--Const shape: (), dtype: float32

A node used twice (shared) is drawn in full the first time and as ``... (shown above)``
after that, so a graph with much sharing prints in linear size. The tree is printed
iteratively: a 10,000-deep chain prints without recursion. The indentation stops growing at
``MAX_INDENT_LEVELS``: a deeper line draws the guides of its innermost levels only, after
``[+N]`` for the N outer levels left out, so every line is short and a deep chain prints in
size linear in its depth (full indentation would be quadratic: 1.2 GB for 20,000 levels).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.expr import Call, Function, GlobalVar, If, Let, RelayExpr
from ...ir.op import Op
from .interface import (
    DefaultVizParser,
    Ids,
    NodeEdges,
    Params,
    Plotter,
    VizEdge,
    VizGraph,
    VizNode,
    VizParser,
)


MAX_INDENT_LEVELS = 32  # levels of guides drawn (3 columns each) before a line says [+N]


class TermVizParser(VizParser):
    """Draws every node, ops and globals included, with edges from a node to its parts
    (TermGraph reverses them to print parents above children)."""

    def __init__(self) -> None:
        self._default_parser = DefaultVizParser()
        self._rules: dict[type, Callable[[Any, Ids], NodeEdges]] = {
            Call: self._call, Let: self._let, GlobalVar: self._global_var, If: self._if,
            Op: self._op, Function: self._function}

    def get_node_edges(self, node: RelayExpr, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        rule = self._rules.get(type(node))
        if rule is None:
            return self._default_parser.get_node_edges(node, relay_param, node_to_id)
        return rule(node, node_to_id)

    @staticmethod
    def _edges(node_id: str, parts: list[RelayExpr], node_to_id: Ids) -> list[VizEdge]:
        return [VizEdge(node_to_id[p], node_id) for p in parts]

    def _call(self, node: Call, node_to_id: Ids) -> NodeEdges:
        node_id = node_to_id[node]
        return VizNode(node_id, "Call", ""), self._edges(node_id, [node.op, *node.args],
                                                          node_to_id)

    def _let(self, node: Let, node_to_id: Ids) -> NodeEdges:
        node_id = node_to_id[node]
        return (VizNode(node_id, "Let", "(var, val, body)"),
                self._edges(node_id, [node.var, node.value, node.body], node_to_id))

    @staticmethod
    def _global_var(node: GlobalVar, node_to_id: Ids) -> NodeEdges:
        return VizNode(node_to_id[node], "GlobalVar", node.name_hint), []

    def _if(self, node: If, node_to_id: Ids) -> NodeEdges:
        node_id = node_to_id[node]
        return (VizNode(node_id, "If", "(cond, true, false)"),
                self._edges(node_id, [node.cond, node.true_branch, node.false_branch],
                            node_to_id))

    @staticmethod
    def _op(node: Op, node_to_id: Ids) -> NodeEdges:
        return VizNode(node_to_id[node], node.name, ""), []

    def _function(self, node: Function, node_to_id: Ids) -> NodeEdges:
        node_id = node_to_id[node]
        params = "[" + ", ".join(f"Var({p.name_hint}, ty={p.type_annotation})"
                                 for p in node.params) + "]"
        return VizNode(node_id, "Func", params), self._edges(node_id, [node.body], node_to_id)


class TermNode:
    """A node as the terminal shows it: its type and its detail on one line."""

    def __init__(self, viz_node: VizNode) -> None:
        self.type = viz_node.type_name
        self.other_info = viz_node.detail.replace("\n", ", ")


class TermGraph(VizGraph):
    """One function's tree; ``render()`` gives its text."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._graph: dict[str, list[str]] = {}  # node -> the nodes printed below it
        self._id_to_term_node: dict[str, TermNode] = {}
        self._last: str | None = None  # the root: the last node added in post order

    def node(self, viz_node: VizNode) -> None:
        self._last = viz_node.identity
        self._graph.setdefault(viz_node.identity, [])
        self._id_to_term_node[viz_node.identity] = TermNode(viz_node)

    def edge(self, viz_edge: VizEdge) -> None:
        # A parser's edge runs operand -> user; the tree prints the user above its operands.
        self._graph.setdefault(viz_edge.end, []).append(viz_edge.start)

    def _line(self, node_id: str) -> str:
        node = self._id_to_term_node.get(node_id)
        return f"{node.type} {node.other_info}" if node else f"<node {node_id}>"

    def render(self) -> str:
        """The tree as text (``@name(<root detail>)`` and one line per node)."""
        if self._last is None:
            return f"@{self._name}()"
        lines = [f"@{self._name}({self._id_to_term_node[self._last].other_info})"]
        shown: set[str] = {self._last}
        # (guides, depth, node, is last child) of the nodes still to print, the next on top;
        # ``guides`` keeps the innermost MAX_INDENT_LEVELS levels only
        kids = self._graph.get(self._last, [])
        stack = [("", 0, kid, k == len(kids) - 1) for k, kid in enumerate(kids)]
        stack.reverse()
        while stack:
            guides, depth, node_id, last = stack.pop()
            seen = node_id in shown and bool(self._graph.get(node_id))
            tail = " ... (shown above)" if seen else ""
            outer = depth - MAX_INDENT_LEVELS
            lines.append(f"{f'[+{outer}]' if outer > 0 else ''}{guides}"
                         f"{'`--' if last else '|--'}{self._line(node_id)}{tail}")
            if seen:
                continue
            shown.add(node_id)
            kids = self._graph.get(node_id, [])
            inner = (guides + ("   " if last else "|  "))[-3 * MAX_INDENT_LEVELS:]
            stack.extend(reversed([(inner, depth + 1, kid, k == len(kids) - 1)
                                   for k, kid in enumerate(kids)]))
        return "\n".join(lines)


class TermPlotter(Plotter):
    """Renders every function's tree as text: printed, or written to ``filename``."""

    def __init__(self) -> None:
        self._name_to_graph: dict[str, TermGraph] = {}

    def create_graph(self, name: str) -> TermGraph:
        self._name_to_graph[name] = TermGraph(name)
        return self._name_to_graph[name]

    def text(self) -> str:
        """The text of every graph, ``main`` first."""
        return "\n".join(g.render() for g in self._name_to_graph.values())

    def render(self, filename: str | None = None) -> str:
        """Print the text (``filename`` None) or write it to ``filename``; returns it."""
        text = self.text()
        if filename is None:
            print(text)
        else:
            with open(filename, "w") as out:
                out.write(text)
        return text
