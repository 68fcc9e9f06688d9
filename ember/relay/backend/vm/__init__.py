"""The VM compiler (``relay.backend.vm``): Relay to VM bytecode.

``compile(mod, target, target_host, params)`` -> ``ember.runtime.vm.Executable``;
``VMCompiler`` for the staged form (``lower``/``codegen``/``get_exec``). The passes the VM
pipeline adds (``InlinePrimitives``, ``ManifestAlloc``, ``LambdaLift``) live here too.
"""
from __future__ import annotations

from .compiler import VMCompiler, build_vm, compile  # noqa: F401
from .inline_primitives import InlinePrimitives
from .lambda_lift import LambdaLift
from .memory_alloc import ManifestAlloc

__all__ = ["InlinePrimitives", "LambdaLift", "ManifestAlloc", "VMCompiler", "compile"]
