"""The module-based executor interface over a VM, as the graph and AOT executors offer it.

``VMModule(exe, dev)`` runs one function (``main``) with the interface every ember executor
shares: ``set_input(name_or_index, value)`` / ``set_input(**inputs)``, ``run()``,
``get_output(i)``, ``get_num_outputs()``, ``get_input(i)``, ``get_input_index(name)``,
``get_num_inputs()``, ``benchmark(dev, ...)``; the same names are its packed functions
(``m["run"]()``). A VM executor factory returns one of these from ``factory["default"](dev)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..container import ADT
from ..device import Device
from ..errors import ArgumentError, ArgumentTypeError, TVMError
from ..executor_common import Inputs, InputSpec, check_out, check_timing, input_array
from ..module import Module
from ..ndarray import NDArray
from ..packed_func import PackedFunc, as_packed_func
from ..time_eval import BenchmarkResult
from . import arguments as A
from .executable import Executable
from .interpreter import VirtualMachine
from .program import TensorInfo


class VMModule(Module):
    """A VirtualMachine behind the module-based interface, for function ``func_name``.

    Inputs are checked as by every executor (``executor_common``); the whole ``set_input``
    call is checked before any input is stored."""

    type_key = "VMModule"
    _EXPORTED = ("set_input", "run", "get_output", "get_num_outputs", "get_input",
                 "get_input_index", "get_num_inputs")

    def __init__(self, exe: Executable | Module | VirtualMachine, dev: Device | None = None,
                 memory_cfg: Any = None, func_name: str = "main") -> None:
        super().__init__()
        if isinstance(exe, VirtualMachine):
            self.vm = exe
        else:
            if dev is None:
                raise ArgumentTypeError("VMModule: pass the device to run on")
            self.vm = VirtualMachine(exe, dev, memory_cfg)
        self.func_name = func_name
        self._func = self.vm._functions[self.vm._function_index(func_name, "VMModule")]
        self._params = list(self._func.params)
        self._specs = Inputs([InputSpec(p, None) for p in self._params])
        self._own: dict[int, NDArray] = {}  # input buffers set_input made (refilled in place)

    def set_input(self, key: int | str | None = None, value: Any = None, **params: Any) -> None:
        """Set an input by name or index, and/or several by name. A numpy value is copied into
        the buffer an earlier call made for that input when it fits (no allocation per call),
        unless the last run's outputs view that buffer."""
        checked = self._specs.check_call(key, value, params, "set_input")
        with self.vm._lock:
            self._set_checked(checked)

    def _set_checked(self, checked: list[tuple[int, Any]]) -> None:
        stored = self.vm._inputs.setdefault(self.func_name, [A.UNSET] * len(self._params))
        plan = []
        for k, v in checked:  # every value checked (and converted) before any input changes
            label = self._specs.label(k, "set_input")
            try:
                src = self._refill_source(k, v, stored, label)
                plan.append((k, src, None if src is not None else
                             A.convert(self._func, k, v, label), v))
            except TVMError as err:
                raise type(err)(f"{err}{self._specs.suffix(k)}") from None
        for k, src, converted, v in plan:
            self.vm._guard.wrote(k)
            if src is not None:
                np.copyto(stored[k]._np, src)
                continue
            stored[k] = converted
            if not isinstance(v, NDArray) and isinstance(converted, NDArray):
                self._own[k] = converted  # made here: later calls may refill it
            else:
                self._own.pop(k, None)

    def _refill_source(self, k: int, v: Any, stored: list[Any], label: str
                       ) -> np.ndarray | None:
        """``v`` checked, as the array to copy into input ``k``'s own buffer; None when ``v``
        is to be converted afresh."""
        own = self._own.get(k)
        ty = self._func.param_types[k] if self._func.param_types else None
        if own is None or stored[k] is not own or isinstance(v, NDArray) or \
                not isinstance(ty, TensorInfo):
            return None
        src = input_array(v, ty.dtype, ty.shape, label)
        if src.shape != own._np.shape or self._outputs_view(own):
            return None
        return src

    def _outputs_view(self, arr: NDArray) -> bool:
        """Whether a value of the last run (fields of tuples included) may share ``arr``'s
        memory."""
        todo, seen = [self.vm._outputs], 0
        while todo and seen < 10000:
            value = todo.pop()
            seen += 1
            if isinstance(value, ADT):
                todo.extend(value.fields)
            elif isinstance(value, NDArray) and np.may_share_memory(value._np, arr._np):
                return True
        return bool(todo)

    def run(self, **inputs: Any) -> None:
        """Run the function on the inputs set (plus any given here)."""
        if inputs:
            self.set_input(**inputs)
        self.vm.invoke_stateful(self.func_name)

    def get_output(self, index: int, out: NDArray | None = None) -> Any:
        """Output ``index`` of the last run (copied into ``out`` if given)."""
        value = self.vm.get_output(index)
        if out is None:
            return value
        if not isinstance(value, NDArray):
            raise ArgumentError(f"get_output: output {index} is a {type(value).__name__}, not a "
                                "tensor; it cannot be copied into out")
        return check_out(out, value, "get_output").copyfrom(value)

    def get_num_outputs(self) -> int:
        return self.vm.get_num_outputs()

    def get_input(self, key: int | str) -> Any:
        """The value set for input ``key`` (TVMError if it was not set)."""
        index = self._specs.slot(key, "get_input")
        value = self.vm._inputs.get(self.func_name, [A.UNSET] * len(self._params))[index]
        if value is A.UNSET:
            raise TVMError(f"get_input: input {self._params[index]!r} is not set")
        return value

    def get_input_index(self, name: str) -> int:
        return self.vm.get_input_index(name, self.func_name)

    def get_num_inputs(self) -> int:
        return len(self._params)

    def benchmark(self, device: Device, func_name: str | None = None, repeat: int = 5,
                  number: int = 5, min_repeat_ms: int | None = None, **kwargs: Any
                  ) -> BenchmarkResult:
        """Time ``run()`` (see ``VirtualMachine.benchmark``); inputs may be given by name."""
        check_timing(number, repeat, min_repeat_ms, "benchmark")
        self.vm._function_index(func_name or self.func_name, "benchmark")
        if kwargs:
            self.set_input(**kwargs)
        return self.vm.benchmark(device, func_name=func_name or self.func_name, repeat=repeat,
                                 number=number, min_repeat_ms=min_repeat_ms)

    def _get_local(self, name: str) -> PackedFunc | None:
        return as_packed_func(getattr(self, name), name) if name in self._EXPORTED else None

    def __repr__(self) -> str:
        return f"VMModule({self.func_name}, {self.vm!r})"
