"""Shared by the VM compiler tests: compile with ``relay.vm.compile``, run on the VM, and
compare with the reference interpreter (values converted to plain Python/numpy trees)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.backend._values import ConstructorValue
from ember.runtime.container import ADT
from ember.runtime.ndarray import NDArray
from ember.runtime.vm import Executable, VirtualMachine

requires_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def to_py(value: Any) -> Any:
    """NDArray -> numpy; ADT / constructor value -> (tag, [fields]); tuples -> lists."""
    if isinstance(value, NDArray):
        return value.numpy()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (ADT, ConstructorValue)):
        return (value.tag, [to_py(f) for f in value.fields])
    raise TypeError(f"cannot compare a {type(value).__name__}")


def assert_same(actual: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-6,
                path: str = "result") -> None:
    """Structural comparison of two to_py trees; arrays with a tolerance."""
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{path}: expected a tensor, got {actual!r}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} vs {expected.shape}"
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=path)
        return
    assert isinstance(actual, tuple), f"{path}: expected {expected!r}, got {actual!r}"
    assert actual[0] == expected[0], f"{path}: tag {actual[0]} vs {expected[0]}"
    assert len(actual[1]) == len(expected[1]), f"{path}: field counts differ"
    for i, (a, e) in enumerate(zip(actual[1], expected[1])):
        assert_same(a, e, rtol, atol, f"{path}.{i}")


def interpret(mod: ember.IRModule, *args: Any) -> Any:
    return relay.create_executor("debug", mod=mod).evaluate()(*args)


def vm_run(exe: Executable, *args: Any) -> Any:
    return VirtualMachine(exe, ember.cpu()).invoke("main", *args)


def round_trip(exe: Executable) -> Executable:
    """The executable after save() / load_exec (same kernel library)."""
    code, lib = exe.save()
    return Executable.load_exec(code, lib)


def check(mod: ember.IRModule, *args: Any, params: dict | None = None, save: bool = False,
          rtol: float = 1e-5, atol: float = 1e-6, ref_args: tuple | None = None) -> Executable:
    """Compile ``mod``, run it on ``args`` and compare with the interpreter (given
    ``ref_args`` when they differ: constructor values instead of ADTs); with ``save``, also
    through a save/load round trip. Returns the executable."""
    exe = relay.vm.compile(mod, target="llvm", params=params)
    ref_mod = mod
    if params:
        ref_mod = mod.copy()
        from ember.relay.build_module import bind_params_by_name

        ref_mod["main"] = bind_params_by_name(mod["main"], params)
    expected = to_py(interpret(ref_mod, *(args if ref_args is None else ref_args)))
    assert_same(to_py(vm_run(exe, *args)), expected, rtol, atol)
    if save:
        assert_same(to_py(vm_run(round_trip(exe), *args)), expected, rtol, atol)
    return exe
