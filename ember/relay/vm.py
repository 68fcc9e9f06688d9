"""``relay.vm`` (TVM's name): compile Relay for the virtual machine.

    exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())
    out = vm.invoke("main", x)

The compile side, ``VMExecutor`` (the ``"vm"`` kind of ``relay.create_executor``) included,
is ``ember.relay.backend.vm``; the run side is ``ember.runtime.vm``.
"""
from __future__ import annotations

from ..runtime.vm.executable import Executable
from ..runtime.vm.interpreter import VirtualMachine
from .backend.vm.compiler import VMCompiler, VMExecutor, compile

__all__ = ["Executable", "VMCompiler", "VMExecutor", "VirtualMachine", "compile"]
