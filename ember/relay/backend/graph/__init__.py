"""The graph executor's compile side (``relay.build(..., executor=Executor("graph"))``).

- ``codegen``: a fused, typed ``main`` -> the graph JSON and its params (memory planned);
- ``build``: the pipeline, registered as the ``"graph"`` builder and ``create_executor`` kind.

The run side is ``ember.runtime.graph_executor``; the contract between them is
``ember.runtime.graph_format``.
"""
from __future__ import annotations

from ..registry import register_builder, register_evaluator
from .build import GraphEvaluator, build_graph

__all__ = ["GraphEvaluator", "build_graph"]

register_builder("graph", build_graph)
register_evaluator("graph", GraphEvaluator)
