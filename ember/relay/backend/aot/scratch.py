"""Operator scratch under the USMP: kernels' workspaces planned into the user's pools.

A kernel whose large allocations would come from ``TVMBackendAllocWorkspace`` at run time is
emitted again with its scratch as a last argument (``ember.tir.kernel_scratch``): a block of a
size known at build time. The planner (``usmp.py``) places one such block per call of the
kernel, alive for that call only, next to the intermediates; ``run_model`` passes the pool
address. This is TVM's ``ConvertPoolAllocationsToOffsets``: no heap, and no
``TVMBackendAllocWorkspace`` call left in the model.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ....tir.codegen import function_c
from ....tir.kernel_scratch import scratch_layout


def with_planned_scratch(kernels: Mapping[Any, Any]) -> tuple[dict[Any, Any], dict[str, int]]:
    """``kernels`` (callee -> LoweredFunc) with every kernel that needs scratch emitted to take
    it as its last argument, and per kernel name its scratch bytes (only those above 0)."""
    redone: dict[str, tuple[Any, int]] = {}
    out: dict[Any, Any] = {}
    for callee, low in kernels.items():
        if low.external_module is not None or low.is_external:
            out[callee] = low  # BYOC: the external codegen owns its memory
            continue
        if low.name not in redone:
            layout = scratch_layout(low.prim_func)
            if layout.nbytes == 0:
                redone[low.name] = (low, 0)
            else:
                code = function_c(low.prim_func, layout)
                redone[low.name] = (replace(low, code=code, workspace_bytes=0), layout.nbytes)
        out[callee] = redone[low.name][0]
    return out, {name: n for name, (_, n) in redone.items() if n}
