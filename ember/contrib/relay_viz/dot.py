"""The Graphviz DOT renderer. ember writes the DOT text itself (no ``graphviz`` Python
package needed); laying it out as a picture needs the Graphviz ``dot`` program.

``DotPlotter(...).render("net")`` writes the DOT source to ``net`` and, as the Relay-era
renderer did, lays it out as ``net.pdf`` (``render_kwargs={"format": "svg"}`` for another
format) with ``dot``. Where ``dot`` is not installed, the source is still written and
``GraphvizNotFoundError`` says so; ``render_kwargs={"format": "dot"}`` (or ``"gv"``) writes the
source only, and ``DotPlotter.source()`` returns it as a string.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from ...runtime.errors import TVMError
from .interface import DefaultVizParser, Plotter, VizEdge, VizGraph, VizNode

DotVizParser = DefaultVizParser
_SOURCE_FORMATS = (None, "dot", "gv")


class GraphvizNotFoundError(TVMError, FileNotFoundError):
    """Laying out a DOT graph needs Graphviz's ``dot`` program, which is not on PATH; the
    message names the DOT file written and how to render it elsewhere."""


def _quote(text: str) -> str:
    """A DOT string literal (backslashes, quotes and newlines escaped)."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def _attr_list(attrs: Mapping[str, Any] | None) -> str:
    if not attrs:
        return ""
    return "[" + ", ".join(f"{k}={_quote(str(v))}" for k, v in attrs.items()) + "]"


class DotGraph(VizGraph):
    """One function as a DOT cluster subgraph (``cluster_<name>``, labelled ``name``)."""

    def __init__(self, name: str, graph_attr: Mapping[str, str] | None = None,
                 node_attr: Mapping[str, str] | None = None,
                 edge_attr: Mapping[str, str] | None = None,
                 get_node_attr: Callable[[VizNode], Mapping[str, str]] | None = None) -> None:
        self._name = name
        self._get_node_attr = get_node_attr or self._default_get_node_attr
        self._lines = [f"subgraph {_quote('cluster_' + name)} {{", f"  label={_quote(name)}"]
        for kind, attrs in (("graph", graph_attr), ("node", node_attr), ("edge", edge_attr)):
            if attrs:
                self._lines.append(f"  {kind} {_attr_list(attrs)}")

    def node(self, viz_node: VizNode) -> None:
        attrs = {"label": f"{viz_node.type_name}\n{viz_node.detail}",
                 **self._get_node_attr(viz_node)}
        self._lines.append(f"  {_quote(viz_node.identity)} {_attr_list(attrs)}")

    def edge(self, viz_edge: VizEdge) -> None:
        self._lines.append(f"  {_quote(viz_edge.start)} -> {_quote(viz_edge.end)}")

    @property
    def source(self) -> str:
        """This graph's DOT text."""
        return "\n".join([*self._lines, "}"])

    @staticmethod
    def _default_get_node_attr(node: VizNode) -> dict[str, str]:
        return {"shape": "ellipse"} if "Var" in node.type_name else {"shape": "box"}


class DotPlotter(Plotter):
    """Renders every function as a DOT cluster of one digraph (see the module docstring).

    ``graph_attr``/``node_attr``/``edge_attr`` are Graphviz attributes for every graph, node
    and edge; ``get_node_attr(viz_node)`` gives per-node attributes; ``render_kwargs`` takes
    ``format`` (default "pdf"), ``filename`` and ``cleanup`` (remove the DOT source once laid
    out; default True as in the Relay-era renderer)."""

    def __init__(self, graph_attr: Mapping[str, str] | None = None,
                 node_attr: Mapping[str, str] | None = None,
                 edge_attr: Mapping[str, str] | None = None,
                 get_node_attr: Callable[[VizNode], Mapping[str, str]] | None = None,
                 render_kwargs: Mapping[str, Any] | None = None) -> None:
        self._name_to_graph: dict[str, DotGraph] = {}
        self._attrs = (graph_attr, node_attr, edge_attr, get_node_attr)
        self._render_kwargs = dict(render_kwargs or {})
        unknown = sorted(set(self._render_kwargs) - {"format", "filename", "cleanup",
                                                     "directory"})
        if unknown:
            raise TypeError(f"DotPlotter: render_kwargs {unknown} are not understood (ember "
                            "takes format, filename, directory and cleanup)")

    def create_graph(self, name: str) -> DotGraph:
        self._name_to_graph[name] = DotGraph(name, *self._attrs)
        return self._name_to_graph[name]

    def source(self) -> str:
        """The DOT text of every graph, as one digraph."""
        body = "\n".join(g.source for g in self._name_to_graph.values())
        return f"digraph {{\n{body}\n}}\n"

    def render(self, filename: str | None = None) -> str:
        """Write the DOT source and lay it out with Graphviz (module docstring); returns the
        path of the picture, or of the source when only the source is asked for."""
        kwargs = self._render_kwargs
        path = filename or kwargs.get("filename") or "Digraph.gv"
        path = os.path.join(kwargs.get("directory") or "", os.fspath(path))
        fmt = kwargs.get("format", "pdf")
        with open(path, "w") as out:
            out.write(self.source())
        if fmt in _SOURCE_FORMATS:
            return path
        return _layout(path, str(fmt), bool(kwargs.get("cleanup", True)))


def _layout(source: str, fmt: str, cleanup: bool) -> str:
    dot = shutil.which("dot")
    picture = f"{source}.{fmt}"
    if dot is None:
        raise GraphvizNotFoundError(
            f"relay_viz.DotPlotter.render: laying the graph out as {fmt} needs Graphviz's "
            f"'dot' program, which is not on PATH. The DOT source is in {source}: render it "
            f"where Graphviz is installed (dot -T{fmt} {source} -o {picture}), install "
            "Graphviz, or pass render_kwargs={'format': 'dot'} to write the source only "
            "(relay_viz.TermPlotter prints the graph as text)")
    proc = subprocess.run([dot, f"-T{fmt}", source, "-o", picture], capture_output=True,
                          text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise TVMError(f"relay_viz.DotPlotter.render: dot -T{fmt} {source} failed "
                       f"(exit {proc.returncode}): {proc.stderr.strip()}")
    if cleanup:
        os.unlink(source)
    return picture
