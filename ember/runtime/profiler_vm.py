"""``tvm.runtime.profiler_vm``: the profiling VM (defined in ``ember.runtime.vm.profiler``).

``VirtualMachineProfiler(exe, dev).profile(*args, func_name="main")`` returns a
:class:`ember.runtime.profiling.Report` with one call per kernel invocation and one
aggregated call per other instruction kind.
"""
from __future__ import annotations

from .vm.profiler import VirtualMachineProfiler, enabled  # noqa: F401

__all__ = ["VirtualMachineProfiler", "enabled"]
