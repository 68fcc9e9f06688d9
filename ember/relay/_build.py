"""The ``relay.build`` driver (DESIGN.md "From model to machine code").

The pipeline every executor shares is ``backend/pipeline.py`` (``optimize_passes``,
``optimize``, the stages and their listeners), and each
executor's compile side is in its backend folder (``backend/graph``, ``backend/aot``,
``backend/vm``), registered by name in ``backend/registry.py``. ``build`` checks the
arguments and calls the builder of the chosen executor. ``EMBER_DEBUG=1`` prints each stage
with its time and the memory plan.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..runtime.errors import TVMError
from ..target import Target
from .backend import registry
from .backend.executor import Executor
from .backend.pipeline import (  # noqa: F401  (the driver's names, as before the split)
    as_module,
    canon_target,
    evaluated_module,
    optimize,
    optimize_passes,
    stage_listener,
)
from .backend.runtime import Runtime


def _executor_and_runtime(target: Target, executor: Any, runtime: Any) -> tuple[Executor, Runtime]:
    from .build_module import _reconstruct_from_deprecated_options

    old_executor, old_runtime = _reconstruct_from_deprecated_options(target)
    executor = old_executor or executor or Executor("graph")
    runtime = old_runtime or runtime or Runtime("cpp")
    if not isinstance(executor, Executor):
        raise TVMError(f"relay.build: executor must be a relay.backend.Executor, got "
                       f"{type(executor).__name__} {executor!r}")
    if not isinstance(runtime, Runtime):
        raise TVMError(f"relay.build: runtime must be a relay.backend.Runtime, got "
                       f"{type(runtime).__name__} {runtime!r}")
    return executor, runtime


def build(ir_mod: Any, target: Any, target_host: Any, executor: Any, runtime: Any,
          params: Mapping[str, Any] | None, mod_name: str | None, workspace_pools: Any = None,
          constant_pools: Any = None) -> Any:
    """See ``relay.build``."""
    mod = as_module(ir_mod, "relay.build")
    canon = canon_target(target, target_host, "relay.build")
    executor, runtime = _executor_and_runtime(canon, executor, runtime)
    name = "default" if mod_name is None else mod_name
    if not isinstance(name, str) or not name:
        raise TVMError(f"relay.build: mod_name must be a non-empty str, got {mod_name!r}")
    builder = registry.get_builder(executor.name, "relay.build")
    # Memory pools matter to AOT only (the graph executor ignores them, as TVM's does).
    pools = ({"workspace_pools": workspace_pools, "constant_pools": constant_pools}
             if executor.name == "aot" else {})
    with canon:
        return builder(mod, canon, executor, runtime, params, name, **pools)
