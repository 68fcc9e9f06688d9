"""The VM executor factory: what ``relay.build(..., executor=Executor("vm"))`` returns.

It holds a VM program and the kernel library (its import), and creates executors with the
module-based interface shared by every executor (``set_input``, ``run``, ``get_output``,
``get_num_outputs``, ``get_input_index``...). The VM's ``main`` is the model: its parameters
are the inputs, its result (flattened, if it is a tuple) the outputs. Serialised like every
factory (``executor_factory.py``), with one section ``code``: the VM program in the byte
format of ``vm/serialize.py``; params are constants of the program, so ``params`` is empty.
Runtime layer: loading an exported VM factory needs no compiler module.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .container import ADT
from .device import Device, cpu
from .errors import TVMError
from .executor_factory import ExecutorFactoryModule, register_factory
from .module import Module
from .ndarray import NDArray, array
from .packed_func import PackedFunc, as_packed_func
from .time_eval import BenchmarkResult, time_evaluator


def _flatten(value: Any) -> list[Any]:
    if type(value) is ADT and value.tag == 0:
        return [x for f in value.fields for x in _flatten(f)]
    return [value]


class VMModule(Module):
    """A VirtualMachine behind the module-based executor interface, running ``main``."""

    type_key = "VMModule"

    def __init__(self, vm: Any) -> None:
        super().__init__()
        self.vm = vm
        self.params = list(vm.exe.get_function_params("main"))
        self._inputs: list[Any] = [None] * len(self.params)
        self._outputs: list[Any] | None = None

    def _index(self, key: str | int, where: str) -> int:
        if isinstance(key, int) and 0 <= key < len(self.params):
            return key
        if isinstance(key, str) and key in self.params:
            return self.params.index(key)
        raise TVMError(f"{where}: no input {key!r}; this model's inputs are "
                       f"{', '.join(map(repr, self.params)) or '(none)'}")

    def set_input(self, key: str | int | None = None, value: Any = None, **params: Any) -> None:
        """Set input ``key`` (name or index), and/or inputs by keyword."""
        if key is not None:
            self._inputs[self._index(key, "set_input")] = _as_value(value)
        for name, v in params.items():
            self._inputs[self._index(name, "set_input")] = _as_value(v)

    def get_input(self, key: str | int) -> Any:
        return self._inputs[self._index(key, "get_input")]

    def get_input_index(self, name: str) -> int:
        return self.params.index(name) if name in self.params else -1

    def get_num_inputs(self) -> int:
        return len(self.params)

    def run(self, **inputs: Any) -> None:
        """Run ``main`` on the inputs set (plus those given here)."""
        if inputs:
            self.set_input(**inputs)
        missing = [n for n, v in zip(self.params, self._inputs) if v is None]
        if missing:
            raise TVMError(f"run: inputs not set: {', '.join(missing)}")
        self._outputs = None  # let the last result's storage go back to the pool first
        self._outputs = _flatten(self.vm.invoke("main", *self._inputs))

    def get_num_outputs(self) -> int:
        if self._outputs is None:  # a VM knows its outputs once main has returned
            raise TVMError("get_num_outputs: run the model first")
        return len(self._outputs)

    def get_output(self, index: int, out: NDArray | None = None) -> Any:
        if self._outputs is None:
            raise TVMError("get_output: no outputs yet; call run() first")
        if not 0 <= index < len(self._outputs):
            raise TVMError(f"get_output: index {index} out of range ({len(self._outputs)} "
                           "outputs)")
        value = self._outputs[index]
        if out is not None:
            out.copyfrom(value)
            return out
        return value

    def benchmark(self, device: Device | None = None, func_name: str = "run", repeat: int = 5,
                  number: int = 5, min_repeat_ms: int | None = None, **kwargs: Any
                  ) -> BenchmarkResult:
        """Time ``run()`` (inputs given here are set first)."""
        if kwargs:
            self.set_input(**kwargs)
        timer = time_evaluator(self.run, device or cpu(0), number, repeat, min_repeat_ms or 0)
        return timer()

    _EXPORTED = ("set_input", "get_input", "get_input_index", "get_num_inputs", "run",
                 "get_num_outputs", "get_output")

    def _get_local(self, name: str) -> PackedFunc | None:
        return as_packed_func(getattr(self, name), name) if name in self._EXPORTED else None


def _as_value(value: Any) -> Any:
    if isinstance(value, (NDArray, ADT)):
        return value
    import numpy as np

    return array(np.asarray(value))


@register_factory
class VMExecutorFactoryModule(ExecutorFactoryModule):
    """The factory of VM executors: a VM program + kernel library.

    ``VMExecutorFactoryModule(exe, mod_name="default", target=None)`` with ``exe`` an
    ``ember.runtime.vm.Executable`` (or, when loading, its Program).
    """

    executor_kind = "vm"
    type_key = "VMExecutorFactory"

    def __init__(self, exe: Any, libmod_name: str = "default", target: Any = None) -> None:
        from .vm.executable import Executable

        program = exe._program if isinstance(exe, Executable) else exe
        lib = exe.lib if isinstance(exe, Executable) else None
        super().__init__(lib, libmod_name, None, target)
        self.program = program

    def get_executor(self) -> Any:
        """The Executable (program + this factory's kernel library)."""
        from .vm.executable import Executable, ExecutableModule

        return Executable(ExecutableModule(self.program, self.lib if self._imports else None))

    def get_executor_config(self) -> str:
        """The bytecode listing."""
        return str(self.get_executor().bytecode)

    def _create(self, dev: Device | Sequence[Device] | None = None) -> Module:
        from .vm.interpreter import VirtualMachine

        return VMModule(VirtualMachine(self.get_executor(), dev or cpu(0)))

    def _functions(self) -> dict[str, Callable[..., Any]]:
        return dict(super()._functions(), get_executor=self.get_executor)

    def _sections(self) -> list[tuple[str, bytes]]:
        from .vm.serialize import serialize

        return [("code", bytes(serialize(self.program)))]

    def _header(self) -> dict[str, Any]:
        return dict(super()._header(), config="")  # the bytecode is in the "code" section

    @classmethod
    def _from_parts(cls, header: dict[str, Any], sections: dict[str, bytes]) -> Module:
        from .vm.serialize import deserialize

        return cls(deserialize(sections["code"]), header["mod_name"], target=header["target"])
