"""The VM compiler (``relay.backend.vm``): Relay to VM bytecode.

``compile(mod, target, target_host, params)`` -> ``ember.runtime.vm.Executable``;
``VMCompiler`` for the staged form (``lower``/``codegen``/``get_exec``). The passes the VM
pipeline adds (``InlinePrimitives``, ``ManifestAlloc``, ``LambdaLift``) live here too, and
the ``"vm"`` builder of ``relay.build`` and kind of ``create_executor`` (``VMExecutor``),
registered in ``backend/registry.py``. ``ember.relay.vm`` is the TVM name of this package's
public part; the run side is ``ember.runtime.vm``.
"""
from __future__ import annotations

from ..registry import register_builder, register_evaluator
from .compiler import VMCompiler, VMExecutor, build_vm, compile  # noqa: F401
from .inline_primitives import InlinePrimitives
from .lambda_lift import LambdaLift
from .memory_alloc import ManifestAlloc

__all__ = ["InlinePrimitives", "LambdaLift", "ManifestAlloc", "VMCompiler", "VMExecutor",
           "compile"]

register_builder("vm", build_vm)
register_evaluator("vm", VMExecutor)
