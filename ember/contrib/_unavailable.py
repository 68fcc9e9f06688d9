"""Modules of the Relay-era ``tvm.contrib`` that need a GPU or a vendor library
(``nvcc``, ``cudnn``, ``cublas``, ``cuda_graph``...): they import, so that a script's imports
succeed, and every function says why it cannot run here and what to use instead.

A predicate that asks whether the feature is usable (``cudnn.exists()``,
``nvcc.have_cudagraph()``, ``thrust.can_use_thrust(...)``) answers False instead of raising,
since scripts call it precisely to decide whether to skip.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime.errors import TVMError


class NotAvailableError(TVMError, NotImplementedError):
    """A name that ember keeps for Relay-era scripts cannot do its job here (no GPU, no vendor
    library): '<module>.<name>: not available in ember: <why>; <what to do instead>'."""


def raising(module: str, why: str, instead: str) -> Callable[[str], Callable[..., Any]]:
    """``stub = raising(__name__, why, instead)``; ``compile_cuda = stub("compile_cuda")`` is a
    function that raises NotAvailableError naming itself, why, and what to do instead."""

    def make(name: str) -> Callable[..., Any]:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise NotAvailableError(f"{module}.{name}: not available in ember: {why}; "
                                    f"{instead}")

        unavailable.__name__ = unavailable.__qualname__ = name
        unavailable.__module__ = module
        unavailable.__doc__ = f"Not available in ember ({why}); raises NotAvailableError."
        return unavailable

    return make


def answering_false(module: str, why: str) -> Callable[[str], Callable[..., bool]]:
    """``no = answering_false(__name__, why)``; ``exists = no("exists")`` always answers
    False (a predicate scripts call to decide whether to skip)."""

    def make(name: str) -> Callable[..., bool]:
        def answer(*args: Any, **kwargs: Any) -> bool:
            return False

        answer.__name__ = answer.__qualname__ = name
        answer.__module__ = module
        answer.__doc__ = f"Always False in ember ({why})."
        return answer

    return make


def unavailable_class(module: str, name: str, why: str, instead: str) -> type:
    """A class whose construction raises NotAvailableError (e.g. a GPU executor's module)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise NotAvailableError(f"{module}.{name}: not available in ember: {why}; {instead}")

    return type(name, (), {"__init__": __init__, "__module__": module,
                           "__doc__": f"Not available in ember ({why})."})


NO_CUDA = "ember compiles for the CPU only and has no CUDA backend"
NO_ROCM = "ember compiles for the CPU only and has no ROCm backend"
USE_CPU = "build for target 'llvm' (the host CPU) and run on ember.cpu(0)"
USE_RELAY_OPS = ("build for target 'llvm' and use the Relay operators (relay.nn.conv2d, "
                 "relay.nn.dense, relay.nn.batch_matmul, relay.nn.softmax...), which ember "
                 "compiles with its own CPU kernels")
