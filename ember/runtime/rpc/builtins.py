"""Global functions a session calls on the server: executor creation, timing, array copies.

These are what the client's wrappers call (``graph_executor.create`` with a remote library,
``VirtualMachine(remote_exe, remote_dev)``, ``RemoteModule.time_evaluator``); the names are
those of the Relay-era runtime where it had one. The session's file functions
(``tvm.rpc.server.upload``...) are bound to each session in ``endpoint.py``.
"""
from __future__ import annotations

from typing import Any

from ..device import Device
from ..module import Module
from ..ndarray import NDArray
from ..packed_func import PackedFunc
from ..registry import register_func
from ..time_eval import time_evaluator


def _graph_create(graph_json: str, lib: Module, dev: Device) -> Module:
    from ..graph_executor import create

    return create(graph_json, lib, dev)


def _aot_create(lib: Module, dev: Device, mod_name: str = "default") -> Module:
    from ..aot_executor import create

    return create(lib, dev, mod_name)


def _vm_create(exe: Module, dev: Device, memory_cfg: str | None = None) -> Module:
    from ..vm.interpreter import VirtualMachine

    return VirtualMachine(exe, dev, memory_cfg)


def _time_evaluate(func: PackedFunc, dev: Device, number: int, repeat: int, min_repeat_ms: int,
                   cooldown_interval_ms: int, repeats_to_cooldown: int, *args: Any
                   ) -> list[float]:
    """Seconds per call of each of ``repeat`` measurements (``Module.time_evaluator``)."""
    timer = time_evaluator(func, dev, number, repeat, min_repeat_ms, cooldown_interval_ms,
                           repeats_to_cooldown)
    return list(timer(*args).results)


def _array_copy(dst: NDArray, src: NDArray) -> None:
    """``dst[:] = src`` between two arrays of one session."""
    dst.copyfrom(src)


register_func("tvm.graph_executor.create", _graph_create, override=True)
register_func("tvm.aot_executor.create", _aot_create, override=True)
register_func("ember.rpc.vm_create", _vm_create, override=True)
register_func("ember.rpc.time_evaluate", _time_evaluate, override=True)
register_func("ember.rpc.array_copy", _array_copy, override=True)
