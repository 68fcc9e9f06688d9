"""``tvm.contrib.graph_executor``: create a graph executor from a graph JSON and a library.

The executor itself lives in ``ember.runtime.graph_executor``; this module keeps the
Relay-era import path (``from tvm.contrib import graph_executor``).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..runtime.device import Device
from ..runtime.graph_executor import GraphExecutor, GraphModule
from ..runtime.graph_executor import create as _create
from ..runtime.graph_format import Graph
from ..runtime.module import Module

__all__ = ["GraphExecutor", "GraphModule", "create"]


def create(graph_json_str: str | Graph, libmod: Module,
           device: Device | Sequence[Device] | None = None) -> GraphModule:
    """A GraphModule running ``graph_json_str`` with the kernels of ``libmod`` on ``device``.

    Raises GraphFormatError (a TVMError) for a malformed graph, TVMError for a kernel that
    ``libmod`` does not have.
    """
    return GraphModule(_create(graph_json_str, libmod, device))
