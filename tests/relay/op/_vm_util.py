"""Run a Relay function on the VM (compiled with the C compiler) and with the interpreter."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import cc


def vm_runner(func: Any) -> Any:
    """``run(*arrays) -> numpy result`` of ``func`` (a relay Function) on the VM."""
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    exe = relay.vm.compile(ember.IRModule.from_expr(func), "llvm")
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())

    def run(*arrays: np.ndarray) -> Any:
        out = vm.invoke("main", *[ember.nd.array(a) for a in arrays])
        if isinstance(out, (list, tuple)) or hasattr(out, "fields"):
            return [o.numpy() for o in out]
        return out.numpy()
    return run


def interpret(func: Any, *arrays: np.ndarray) -> Any:
    """``func`` on ``arrays`` with the reference interpreter (the ops' numpy references)."""
    mod = ember.IRModule.from_expr(func)
    out = relay.create_executor("debug", mod=mod).evaluate()(*arrays)
    if isinstance(out, (list, tuple)) or hasattr(out, "fields"):
        return [o.numpy() for o in out]
    return out.numpy()
