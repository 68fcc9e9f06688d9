"""The ``"aot"`` kind of ``relay.create_executor``: ``main`` built with
``Executor("aot")`` and run by the AOT executor (``AotModule``), called like the other kinds:

    relay.create_executor("aot", mod=mod, device=tvm.cpu(0), target="llvm").evaluate()(x, w)

The Relay-era stack asked for ``-executor=aot`` in the target as well; ember accepts it and
does not need it. Like the graph kind, AOT needs static shapes and no control flow (the VM
kind runs the rest).
"""
from __future__ import annotations

from typing import Any

from ....ir.module import IRModule
from ....runtime.errors import TVMError
from ....target import Target
from ..executor import Executor
from ..graph.build import GraphEvaluator
from ..runtime import Runtime
from .build import build_aot


class AotEvaluator(GraphEvaluator):
    """``create_executor("aot", ...)``: results are NDArrays (ADTs for tuples)."""

    kind = "aot"

    def _executor_module(self, mod: IRModule, target: Target) -> Any:
        from ....runtime.aot_executor import AotModule

        declared = target.attrs.get("executor", "aot")
        if declared != "aot":
            raise TVMError(f"create_executor('aot'): target {str(target)!r} asks for the "
                           f"{declared!r} executor; drop -executor= or use "
                           f"create_executor({declared!r}, ...)")
        factory = build_aot(mod, target, Executor("aot"), Runtime("cpp"), None, "default")
        return AotModule(factory["default"](self.device))
