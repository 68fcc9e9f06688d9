"""``relay.vm``: compile Relay for the virtual machine, and the ``"vm"`` kind of
``relay.create_executor``.

    exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())
    out = vm.invoke("main", x)

The compiler itself is ``relay.backend.vm`` (``compiler.py`` and the VM passes).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime.vm.executable import Executable
from ..runtime.vm.interpreter import VirtualMachine
from ._build import evaluated_module
from .backend.interpreter import Executor as _EvaluatorBase
from .backend.vm.compiler import VMCompiler, compile

__all__ = ["Executable", "VMCompiler", "VMExecutor", "VirtualMachine", "compile"]


class VMExecutor(_EvaluatorBase):
    """``create_executor("vm", mod, device, target)``: ``evaluate()`` compiles ``main`` (or
    the given function) with ``relay.vm.compile`` once and returns a callable running it on
    a VirtualMachine. Results are NDArrays, or ADTs for tuples and data types."""

    def _make_executor(self, expr: Any = None) -> Callable[..., Any]:
        from .backend._values import convert_args

        mod = evaluated_module(self.mod, expr)
        main = mod["main"]
        exe = compile(mod, self.target)
        vm = VirtualMachine(exe, self.device)

        def run(*args: Any, **kwargs: Any) -> Any:
            return vm.invoke("main", *convert_args(main, args, kwargs, "vm executor"))

        return run
