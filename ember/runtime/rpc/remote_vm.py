"""``VirtualMachine(remote_exe, remote_dev)``: a VM that runs on the RPC server.

``VirtualMachine`` hands an executable loaded by ``session.load_module`` to this class; the
VM is created on the server (where the kernel library is loaded) and every call goes there.
Keyword arguments are bound to parameter positions here, with the parameter names read from
the remote executable, since a remote call carries positional arguments only.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..device import Device
from ..errors import TVMError
from ..time_eval import BenchmarkResult
from .remote import RemoteModule


class RemoteVirtualMachine:
    """The Relay-era VM interface (``invoke``, ``run``, ``set_input``, ``get_output``,
    ``benchmark``...) over a VirtualMachine on the server."""

    def __init__(self, exe: RemoteModule, device: Device | Sequence[Device],
                 memory_cfg: str | None = None) -> None:
        dev = device if isinstance(device, Device) else next(iter(device), None)
        if not isinstance(dev, Device):
            raise TypeError(f"VirtualMachine: device must be a Device, got {device!r}")
        if not isinstance(memory_cfg, (str, type(None))):
            raise TypeError("VirtualMachine: over RPC, memory_cfg is 'pooled', 'naive' or None")
        self.exe = exe
        self.device = dev
        session = exe.rpc_session
        self.module: RemoteModule = session.get_function("ember.rpc.vm_create")(exe, dev,
                                                                                memory_cfg)
        self._params: dict[str, list[str]] = {}

    def _param_names(self, func_name: str) -> list[str]:
        if func_name not in self._params:
            arity = self.exe["get_function_arity"](func_name)
            name = self.exe["get_function_param_name"]
            self._params[func_name] = [name(func_name, i) for i in range(arity)]
        return self._params[func_name]

    def _positional(self, func_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
                    ) -> list[Any]:
        """Named arguments in their parameter slots, the positional ones in the rest."""
        if not kwargs:
            return list(args)
        params = self._param_names(func_name)
        slots: list[Any] = [None] * len(params)
        filled = [False] * len(params)
        for name, value in kwargs.items():
            if name not in params:
                raise TVMError(f"{func_name}: no parameter named {name!r}; its parameters are "
                               f"{', '.join(map(repr, params))}")
            slots[params.index(name)], filled[params.index(name)] = value, True
        free = [i for i, f in enumerate(filled) if not f]
        if len(args) != len(free):
            raise TVMError(f"{func_name}: expected {len(params)} arguments "
                           f"({', '.join(params)}), got {len(args)} and {len(kwargs)} named")
        for i, value in zip(free, args):
            slots[i] = value
        return slots

    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Store the inputs of ``func_name`` on the server."""
        self.module["set_input"](func_name, *self._positional(func_name, args, kwargs))

    def set_one_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        if kwargs and not args and len(kwargs) == 1:
            args = next(iter(kwargs.items()))
        self.module["set_one_input"](func_name, *args)

    def invoke(self, func_name: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``func_name`` on the server; the result stays there (RemoteNDArray or an ADT of
        them) until copied back with ``numpy()``."""
        return self.module["invoke"](func_name, *self._positional(func_name, args, kwargs))

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.invoke("main", *args, **kwargs)

    def invoke_stateful(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        self.module["invoke_stateful"](func_name, *self._positional(func_name, args, kwargs))

    def get_outputs(self) -> list[Any]:
        return list(self.module["get_outputs"]())

    def get_output(self, index: int) -> Any:
        return self.module["get_output"](index)

    def get_num_outputs(self) -> int:
        return int(self.module["get_num_outputs"]())

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        return int(self.module["get_input_index"](input_name, func_name))

    def benchmark(self, device: Device, *args: Any, func_name: str = "main", repeat: int = 5,
                  number: int = 5, min_repeat_ms: int | None = None, end_to_end: bool = False,
                  cooldown_interval_ms: int = 0, repeats_to_cooldown: int = 1,
                  **kwargs: Any) -> BenchmarkResult:
        """Time ``invoke_stateful(func_name)`` on the server (inputs given here are set first)."""
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        timer = self.module.time_evaluator("invoke_stateful", device, number, repeat,
                                           min_repeat_ms or 0, cooldown_interval_ms,
                                           repeats_to_cooldown)
        return timer(func_name)

    def __repr__(self) -> str:
        return f"VirtualMachine(remote {self.exe!r}, {self.device})"
