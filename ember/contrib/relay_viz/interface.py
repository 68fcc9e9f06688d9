"""The pieces of the Relay visualizer: ``VizNode``/``VizEdge`` (what is drawn), ``VizParser``
(a Relay node -> a VizNode and its edges), ``VizGraph`` and ``Plotter`` (where they are
drawn), and ``DefaultVizParser``, which the DOT renderer uses as it is and the terminal
renderer builds on.

Edges run from an operand to its user (argument -> call, body -> function), the direction
data flows in.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any

from ...ir.expr import Call, Constant, Function, GlobalVar, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.op import Op

UNKNOWN_TYPE = "unknown"
NodeEdges = tuple["VizNode | None", list["VizEdge"]]
Ids = Mapping[RelayExpr, str]  # node -> its unique identity
Params = Mapping[str, Any]  # parameter name -> bound value


class VizNode:
    """A node to draw: a unique ``identity``, a ``type_name`` and a ``detail`` text."""

    def __init__(self, node_id: str, node_type: str, node_detail: str) -> None:
        self._id, self._type, self._detail = node_id, node_type, node_detail

    @property
    def identity(self) -> str:
        return self._id

    @property
    def type_name(self) -> str:
        return self._type

    @property
    def detail(self) -> str:
        return self._detail

    def __repr__(self) -> str:
        detail = self._detail.replace("\n", ", ")
        return f"VizNode(identity: {self._id}, type_name: {self._type}, detail: {detail})"


class VizEdge:
    """An edge from node ``start`` to node ``end`` (their identities)."""

    def __init__(self, start_node: str, end_node: str) -> None:
        self._start, self._end = start_node, end_node

    @property
    def start(self) -> str:
        return self._start

    @property
    def end(self) -> str:
        return self._end

    def __repr__(self) -> str:
        return f"VizEdge({self._start} -> {self._end})"


class VizParser(abc.ABC):
    """Turns one Relay node into a VizNode (or None: not drawn) and the edges into it."""

    @abc.abstractmethod
    def get_node_edges(self, node: RelayExpr, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        """``(viz_node or None, [edges])`` for ``node``; ``node_to_id`` names every node of
        the function being drawn, ``relay_param`` the parameters bound to values."""


class VizGraph(abc.ABC):
    """A graph being drawn; nodes arrive in post order (operands before their users)."""

    @abc.abstractmethod
    def node(self, viz_node: VizNode) -> None:
        """Add a node."""

    @abc.abstractmethod
    def edge(self, viz_edge: VizEdge) -> None:
        """Add an edge."""


class Plotter(abc.ABC):
    """Makes one VizGraph per function and renders them all."""

    @abc.abstractmethod
    def create_graph(self, name: str) -> VizGraph:
        """A new graph for the function ``name``."""

    @abc.abstractmethod
    def render(self, filename: str | None = None) -> Any:
        """Render every graph (to ``filename`` where the plotter writes files)."""


def attrs_lines(attrs: Any) -> list[str]:
    """``"key: value"`` per attribute of an op call or a function (none for None)."""
    if not attrs:
        return []
    return [f"{k}: {attrs[k]}" for k in attrs.keys()]


def _shape_text(ty: Any) -> str:
    return str(tuple(int(d) if isinstance(d, int) else str(d) for d in ty.shape))


class DefaultVizParser(VizParser):
    """Draws calls (named by their op, a ``Composite`` name or the global they call), vars
    (``Var(Param)`` when bound in ``relay_param``, else ``Var(Input)``, with shape and dtype),
    constants, tuples, tuple items and functions; global vars and ops are not drawn (they are
    part of the call that uses them). Other nodes are drawn as ``unknown``."""

    def __init__(self) -> None:
        self._rules: dict[type, Callable[..., NodeEdges]] = {
            Function: self._function, Call: self._call, Var: self._var, Tuple: self._tuple,
            TupleGetItem: self._tuple_get_item, Constant: self._constant,
            GlobalVar: self._hidden, Op: self._hidden}

    def _rule(self, node: RelayExpr) -> Callable[..., NodeEdges] | None:
        for klass in type(node).__mro__:
            if klass in self._rules:
                return self._rules[klass]
        return None

    def get_node_edges(self, node: RelayExpr, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        rule = self._rule(node)
        if rule is None:
            return VizNode(node_to_id[node], UNKNOWN_TYPE,
                           f"don't know how to parse {type(node).__name__}"), []
        return rule(node, relay_param, node_to_id)

    @staticmethod
    def _hidden(node: RelayExpr, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        return None, []

    @staticmethod
    def _var(node: Var, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        detail = f"name_hint: {node.name_hint}"
        kind = "Var(Param)" if node.name_hint in relay_param else "Var(Input)"
        ty = node.type_annotation
        if ty is not None and hasattr(ty, "shape"):
            detail += f"\nshape: {_shape_text(ty)}\ndtype: {ty.dtype}"
        elif ty is not None:
            detail += f"\ntype_annotation: {ty}"
        return VizNode(node_to_id[node], kind, detail), []

    @staticmethod
    def _function(node: Function, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        name = node.get_attr("Composite", "") or ""
        node_id = node_to_id[node]
        viz = VizNode(node_id, f"Func {name}", "\n".join(attrs_lines(node.attrs)))
        return viz, [VizEdge(node_to_id[node.body], node_id)]

    @staticmethod
    def _call(node: Call, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        node_id, op, detail = node_to_id[node], node.op, []
        if isinstance(op, Op):
            name, detail = op.name, attrs_lines(node.attrs)
        elif isinstance(op, Function):
            name = op.get_attr("Composite", "") or "Anonymous Func"
            detail = attrs_lines(op.attrs)
        elif isinstance(op, GlobalVar):
            name, detail = "GlobalVar", [f"GlobalVar.name_hint: {op.name_hint}"]
        else:
            name = type(op).__name__
        edges = [VizEdge(node_to_id[arg], node_id) for arg in node.args]
        return VizNode(node_id, f"Call {name}", "\n".join(detail)), edges

    @staticmethod
    def _tuple(node: Tuple, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        node_id = node_to_id[node]
        return VizNode(node_id, "Tuple", ""), [VizEdge(node_to_id[f], node_id)
                                                for f in node.fields]

    @staticmethod
    def _tuple_get_item(node: TupleGetItem, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        node_id = node_to_id[node]
        return (VizNode(node_id, "TupleGetItem", f"idx: {node.index}"),
                [VizEdge(node_to_id[node.tuple_value], node_id)])

    @staticmethod
    def _constant(node: Constant, relay_param: Params, node_to_id: Ids) -> NodeEdges:
        detail = f"shape: {tuple(node.data.shape)}, dtype: {node.data.dtype}"
        return VizNode(node_to_id[node], "Const", detail), []
