"""``tvm.contrib.debugger.debug_executor``: a graph executor whose ``run`` times every node.

The implementation lives in ``ember.runtime.debug_executor``; this module keeps the
Relay-era import path.
"""
from __future__ import annotations

from ...runtime.debug_executor import GraphExecutorDebug, GraphModuleDebug, create

__all__ = ["GraphExecutorDebug", "GraphModuleDebug", "create"]
