"""``tvm.support``: what this installation can do (``libinfo``, ``describe``) and
``FrontendTestModule``, a module whose functions are Python callables.

The Relay-era ``libinfo()`` reported the CMake options the C++ library was built with; ember
has no such build, so it answers the same keys from what is true here: ``USE_LLVM`` is "ON"
when a C compiler is found (ember compiles ``llvm`` targets through C), every GPU and vendor
library option is "OFF", and the runtime features ember always has are "ON".
"""
from __future__ import annotations

import json
import os
import platform
import sys
import textwrap
from typing import Any, Callable

from .runtime.cpu_features import host_cpu_name
from .runtime.module import PyModule
from .testing import find_c_compiler

# CMake options of the Relay-era build that name features ember never has (GPUs, vendor
# libraries, other compilers' runtimes).
_ABSENT = ("USE_CUDA", "USE_CUDNN", "USE_CUBLAS", "USE_CUTLASS", "USE_TENSORRT_CODEGEN",
           "USE_TENSORRT_RUNTIME", "USE_ROCM", "USE_ROCBLAS", "USE_MIOPEN", "USE_OPENCL",
           "USE_VULKAN", "USE_METAL", "USE_HEXAGON", "USE_MKL", "USE_DNNL", "USE_CMSISNN",
           "USE_ETHOSN", "USE_ETHOSU", "USE_VITIS_AI", "USE_COREML", "USE_TFLITE",
           "USE_ARM_COMPUTE_LIB", "USE_THRUST", "USE_CUDA_GRAPH", "USE_RANDOM")
# ... and those it always has (its executors, RPC, micro, the profiler).
_PRESENT = ("USE_GRAPH_EXECUTOR", "USE_AOT_EXECUTOR", "USE_PROFILER", "USE_RPC", "USE_MICRO",
            "USE_MICRO_STANDALONE_RUNTIME", "USE_SORT", "USE_LIBBACKTRACE")


def libinfo() -> dict[str, str]:
    """``{option: value}`` in the Relay-era build's vocabulary (see the module docstring),
    plus ``EMBER_VERSION``, ``C_COMPILER`` (path or "NOT-FOUND") and ``HOST_CPU``."""
    from . import __version__

    compiler = find_c_compiler()
    info = {key: "OFF" for key in _ABSENT}
    info.update({key: "ON" for key in _PRESENT})
    info.update({
        "USE_LLVM": "ON" if compiler else "OFF",
        "LLVM_VERSION": "NOT-FOUND",  # no LLVM: "llvm" targets compile through C
        "GIT_COMMIT_HASH": "NOT-FOUND",
        "EMBER_VERSION": __version__,
        "C_COMPILER": compiler or "NOT-FOUND",
        "HOST_CPU": host_cpu_name(),
    })
    return dict(sorted(info.items()))


def describe() -> None:
    """Print ember's version, the Python environment and ``libinfo()``."""
    from . import __version__

    uname = platform.uname()
    lines = [f"ember version  = {__version__}",
             f"Python version = {sys.version.replace(os.linesep, ' ')} "
             f"({sys.maxsize.bit_length() + 1} bit)",
             f"os.uname()     = {uname.system} {uname.release} {uname.version} {uname.machine}"]
    print("Python Environment")
    print(textwrap.indent("\n".join(lines), "  "))
    print("Build options (libinfo):")
    print(textwrap.indent(json.dumps(libinfo(), indent=2), "  "))


class FrontendTestModule(PyModule):
    """A runtime Module whose functions are Python callables, added by name:
    ``mod["f"] = callable`` or ``mod.add_function("f", callable)``; ``mod["f"](...)`` calls
    it as a PackedFunc, and ``mod(...)`` calls the function named ``entry_name``."""

    type_key = "FrontendTestModule"

    def __init__(self, entry_name: str | None = None) -> None:
        super().__init__()
        if entry_name is not None:
            if not isinstance(entry_name, str) or not entry_name:
                raise TypeError(f"FrontendTestModule: entry_name must be a non-empty str, got "
                                f"{entry_name!r}")
            self.entry_name = entry_name

    def add_function(self, name: str, func: Callable[..., Any]) -> None:
        """Add (or replace) the function ``name``; TypeError for a non-str name or a
        non-callable ``func``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"FrontendTestModule.add_function: the name must be a non-empty "
                            f"str, got {name!r}")
        if not callable(func):
            raise TypeError(f"FrontendTestModule.add_function({name!r}): expected a callable, "
                            f"got {type(func).__name__}")
        super().add_function(name, func)

    def __setitem__(self, name: str, func: Callable[..., Any]) -> None:
        self.add_function(name, func)
