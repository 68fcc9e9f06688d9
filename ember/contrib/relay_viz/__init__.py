"""``tvm.contrib.relay_viz``: draw a Relay module, as text (``TermPlotter``, the default) or
as Graphviz DOT (``DotPlotter``).

    viz = relay_viz.RelayVisualizer(mod, relay_param=params)          # text
    viz.render()                                                      # prints each function
    dot = relay_viz.RelayVisualizer(mod, params, relay_viz.DotPlotter(),
                                    relay_viz.DotVizParser())
    dot.render("net")                                                 # net (DOT) + net.pdf

Each global function is one graph (``main`` first); every node of it is drawn once, in post
order, with an id unique across the module.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...ir.expr import RelayExpr
from ...ir.module import IRModule
from ...ir.visitor import post_order
from .dot import DotGraph, DotPlotter, DotVizParser, GraphvizNotFoundError
from .interface import (
    DefaultVizParser,
    Plotter,
    VizEdge,
    VizGraph,
    VizNode,
    VizParser,
)
from .terminal import TermGraph, TermNode, TermPlotter, TermVizParser

__all__ = ["DefaultVizParser", "DotGraph", "DotPlotter", "DotVizParser",
           "GraphvizNotFoundError", "Plotter", "RelayVisualizer", "TermGraph", "TermNode",
           "TermPlotter", "TermVizParser", "VizEdge", "VizGraph", "VizNode", "VizParser"]


class RelayVisualizer:
    """Draw ``relay_mod`` (an IRModule, or a Function drawn as ``main``) with ``plotter``
    (default TermPlotter) and ``parser`` (default TermVizParser); parameters named in
    ``relay_param`` are drawn as ``Var(Param)``. ``render(filename)`` renders."""

    def __init__(self, relay_mod: IRModule | RelayExpr,
                 relay_param: Mapping[str, Any] | None = None,
                 plotter: Plotter | None = None, parser: VizParser | None = None) -> None:
        if isinstance(relay_mod, RelayExpr):
            relay_mod = IRModule.from_expr(relay_mod)
        if not isinstance(relay_mod, IRModule):
            raise TypeError(f"RelayVisualizer: relay_mod must be an IRModule (or a relay "
                            f"Function), got {type(relay_mod).__name__}")
        for what, value, base in (("plotter", plotter, Plotter), ("parser", parser, VizParser)):
            if value is not None and not isinstance(value, base):
                raise TypeError(f"RelayVisualizer: {what} must be a relay_viz.{base.__name__}, "
                                f"got {type(value).__name__}")
        self._plotter = plotter if plotter is not None else TermPlotter()
        self._parser = parser if parser is not None else TermVizParser()
        self._relay_param = dict(relay_param or {})
        names = sorted((g.name_hint for g in relay_mod.functions), key=lambda n: n != "main")
        offset = 0
        for name in names:
            node_to_id = {node: str(offset + k)
                          for k, node in enumerate(post_order(relay_mod[name]))}
            offset += len(node_to_id)
            self._add_nodes(self._plotter.create_graph(name), node_to_id)

    def _add_nodes(self, graph: VizGraph, node_to_id: dict[RelayExpr, str]) -> None:
        for node in node_to_id:
            viz_node, viz_edges = self._parser.get_node_edges(node, self._relay_param,
                                                               node_to_id)
            if viz_node is not None:
                graph.node(viz_node)
            for edge in viz_edges:
                graph.edge(edge)

    def render(self, filename: str | None = None) -> Any:
        """Render with the plotter (TermPlotter: print, or write ``filename``; DotPlotter:
        write ``filename`` and lay it out)."""
        return self._plotter.render(filename=filename)
