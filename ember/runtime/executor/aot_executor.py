"""``tvm.runtime.executor.aot_executor``: see ``ember.runtime.aot_executor``."""
from __future__ import annotations

from ..aot_executor import AotExecutor, AotModule, create

__all__ = ["AotExecutor", "AotModule", "create"]
