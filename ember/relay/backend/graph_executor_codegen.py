"""``GraphExecutorCodegen``: TVM's name for graph codegen on an already fused function.

    codegen = GraphExecutorCodegen(None, "llvm")
    graph_json, lowered, params = codegen.codegen(ir_mod, fused_main)

``lowered`` maps the target string to the kernel library (a C source module). Most users want
``relay.build``, which also optimises and fuses; this entry is for scripts that inspect the
graph of a module they fused themselves.
"""
from __future__ import annotations

from typing import Any

from ...ir.expr import Function
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from ...target import Target
from ..transform import InferType
from .graph.codegen import generate_graph


class GraphExecutorCodegen:
    """Lower the primitive functions of a fused ``main`` and generate its graph JSON."""

    def __init__(self, mod: Any = None, target: Any = "llvm") -> None:
        if isinstance(target, dict):
            target = next(iter(target.values()))
        self.target = Target(target)
        self.target.check_buildable("GraphExecutorCodegen")
        self.mod_name = "default"

    def codegen(self, ir_module: IRModule | None, func: Function
                ) -> tuple[str, dict[str, Any], dict[str, NDArray]]:
        """``(graph_json, {target: kernel library}, params)`` for the fused function ``func``."""
        from . import te_compiler

        mod = ir_module.copy() if ir_module is not None else IRModule()
        mod["main"] = func
        mod = InferType()(mod)
        lowered, lib = te_compiler.lower_module(mod, self.target, self.mod_name)
        kernels = {k: v for k, v in lowered.items() if not isinstance(k, str)}
        result = generate_graph(mod, kernels)
        return result.graph_json, {str(self.target): lib}, result.params
