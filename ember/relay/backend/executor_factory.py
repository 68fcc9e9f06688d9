"""``tvm.relay.backend.executor_factory``: the factory modules ``relay.build`` returns, by
their Relay-era names. They live in the runtime (``ember.runtime.executor_factory``), where an
exported library is loaded back into one without the compiler; these are the same classes,
so ``isinstance(lib, executor_factory.GraphExecutorFactoryModule)`` holds for both."""
from __future__ import annotations

from ...runtime.executor_factory import (
    AotExecutorFactoryModule,
    ExecutorFactoryModule,
    GraphExecutorFactoryModule,
)

AOTExecutorFactoryModule = AotExecutorFactoryModule  # the Relay-era spelling

__all__ = ["AOTExecutorFactoryModule", "AotExecutorFactoryModule", "ExecutorFactoryModule",
           "GraphExecutorFactoryModule"]
