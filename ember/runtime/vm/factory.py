"""The VM executor factory: what ``relay.build(..., executor=Executor("vm"))`` returns.

It holds a VM program and the kernel library (its import), and creates executors with the
module-based interface shared by every executor (``executor.py``'s ``VMModule``:
``set_input``, ``run``, ``get_output``, ``get_num_outputs``, ``get_input_index``...). The VM's
``main`` is the model: its parameters are the inputs, its result (a tuple's fields) the
outputs. Serialised like every factory (``executor_factory.py``), with one section ``code``:
the VM program in the byte format of ``serialize.py``; params are constants of the
program, so ``params`` is empty.
Runtime layer: loading an exported VM factory needs no compiler module.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..device import Device, cpu
from ..executor_factory import ExecutorFactoryModule, register_factory
from ..module import Module


@register_factory
class VMExecutorFactoryModule(ExecutorFactoryModule):
    """The factory of VM executors: a VM program + kernel library.

    ``VMExecutorFactoryModule(exe, mod_name="default", target=None)`` with ``exe`` an
    ``ember.runtime.vm.Executable`` (or, when loading, its Program).
    """

    executor_kind = "vm"
    type_key = "VMExecutorFactory"

    def __init__(self, exe: Any, libmod_name: str = "default", target: Any = None) -> None:
        from .executable import Executable

        program = exe._program if isinstance(exe, Executable) else exe
        lib = exe.lib if isinstance(exe, Executable) else None
        super().__init__(lib, libmod_name, None, target)
        self.program = program

    def get_executor(self) -> Any:
        """The Executable (program + this factory's kernel library)."""
        from .executable import Executable, ExecutableModule

        return Executable(ExecutableModule(self.program, self.lib if self._imports else None))

    def get_executor_config(self) -> str:
        """The bytecode listing."""
        return str(self.get_executor().bytecode)

    def _create(self, dev: Device | Sequence[Device] | None = None) -> Module:
        from .executor import VMModule

        return VMModule(self.get_executor(), dev or cpu(0))  # type: ignore[arg-type]

    def _functions(self) -> dict[str, Callable[..., Any]]:
        return dict(super()._functions(), get_executor=self.get_executor)

    def _sections(self) -> list[tuple[str, bytes]]:
        from .serialize import serialize

        return [("code", bytes(serialize(self.program)))]

    def _header(self) -> dict[str, Any]:
        return dict(super()._header(), config="")  # the bytecode is in the "code" section

    @classmethod
    def _from_parts(cls, header: dict[str, Any], sections: dict[str, bytes]) -> Module:
        from .serialize import deserialize

        return cls(deserialize(sections["code"]), header["mod_name"], target=header["target"])
