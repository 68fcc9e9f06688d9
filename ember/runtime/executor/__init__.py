"""``tvm.runtime.executor``: the executors' user-facing wrappers (``AotModule``).

``ember.runtime.executor.AotModule`` and ``ember.runtime.executor.aot_executor.AotModule`` are
``ember.runtime.aot_executor.AotModule``.
"""
from __future__ import annotations

from ..aot_executor import AotExecutor, AotModule
from . import aot_executor

__all__ = ["AotExecutor", "AotModule", "aot_executor"]
