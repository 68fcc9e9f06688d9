"""A VM that times what it runs: every kernel call, and every other instruction by kind.

``VirtualMachineProfiler(exe, dev).profile(*args, func_name="main")`` runs the function once
and returns a :class:`~ember.runtime.profiling.Report`:

- one call per kernel invocation (``Name`` = the kernel, ``Duration (us)``, ``Percent``,
  ``Count`` 1, ``Device``, ``Argument Shapes``, ``Hash``);
- one aggregated call per other instruction kind that ran (``VM::AllocStorage``,
  ``VM::AllocTensor``, ``VM::If``...), with the number of executions in ``Count``;
- ``VM::Dispatch``: the rest of the run's time (the loop, invoke, invoke_closure, ret).

``device_metrics[dev]["Duration (us)"]`` is the wall time of the whole run.
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from ..errors import TVMError
from ..ndarray import NDArray
from ..profiling import Count, Duration, Percent, Report
from . import instructions as I
from .interpreter import VirtualMachine
from .program import VMFunction
from .steps import Step


class VirtualMachineProfiler(VirtualMachine):
    """A VirtualMachine whose steps are timed; ``profile`` returns a Report."""

    static_plans = False  # every instruction runs (and is timed) in the interpreter

    def __init__(self, exe: Any, device: Any, memory_cfg: Any = None) -> None:
        self._kernel_calls: list[tuple[str, float, list[Any]]] = []
        self._kinds: dict[str, list[float]] = {}
        # What steps are timed with (as the debug executor's ``clock``): wall time, or
        # time.thread_time, which stays meaningful on a busy machine at one thread. Read as
        # each step runs.
        self.clock: Any = time.perf_counter
        super().__init__(exe, device, memory_cfg)

    def _decode(self, ins: I.Instruction, func: VMFunction, pc: int) -> Step | None:
        step = super()._decode(ins, func, pc)
        if step is None:
            return None
        if isinstance(ins, I.InvokePacked):
            name, calls, arg_regs = self._ctx.kernel_names[ins.packed_index], \
                self._kernel_calls, ins.args

            def timed_kernel(regs: list[Any]) -> int:
                start = self.clock()
                result = step(regs)
                calls.append((name, self.clock() - start, _shapes(regs, arg_regs)))
                return result
            return timed_kernel
        slot = self._kinds.setdefault(f"VM::{type(ins).__name__}", [0, 0.0])

        def timed(regs: list[Any]) -> int:
            start = self.clock()
            result = step(regs)
            slot[1] += self.clock() - start
            slot[0] += 1
            return result
        return timed

    def _reset(self) -> None:
        self._kernel_calls.clear()
        for slot in self._kinds.values():
            slot[0], slot[1] = 0, 0.0

    def profile(self, *args: Any, func_name: str = "main", collectors: Sequence[Any] | None
                = None, **kwargs: Any) -> Report:
        """Run ``func_name`` once (on these inputs, or the stored ones) and report the times."""
        if collectors:
            raise TVMError(f"profile: metric collectors are not supported by ember (got "
                           f"{len(collectors)}); only durations are measured")
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        self._reset()
        start = time.perf_counter()
        self.invoke_stateful(func_name)
        total = time.perf_counter() - start
        return self._report(total)

    def _report(self, total: float) -> Report:
        dev = str(self.device)
        rows: list[tuple[str, float, int, dict[str, Any]]] = [
            (name, secs, 1, {"Argument Shapes": _format_shapes(shapes), "Hash": _short_hash(name)})
            for name, secs, shapes in self._kernel_calls]
        rows += [(kind, secs, int(n), {}) for kind, (n, secs) in self._kinds.items() if n]
        timed = sum(secs for _, secs, _, _ in rows)
        rows.append(("VM::Dispatch", max(total - timed, 0.0), 1, {}))
        calls = [{"Name": name, "Duration (us)": Duration(secs * 1e6),
                  "Percent": Percent(100.0 * secs / total if total else 0.0), "Count": Count(n),
                  "Device": dev, **extra} for name, secs, n, extra in rows]
        return Report(calls, {dev: {"Duration (us)": Duration(total * 1e6)}},
                      {"Executor": "VM"})

    def get_stat(self, sort_by_time: bool = True) -> str:
        """The last profile as a text table (the pre-Report profiler interface)."""
        if not self._kernel_calls and not any(n for n, _ in self._kinds.values()):
            raise TVMError("get_stat: nothing profiled yet; call profile() first")
        return self._report(sum(s for _, s, _ in self._kernel_calls)
                            + sum(s for _, s in self._kinds.values())).table(sort=sort_by_time)


def _shapes(regs: list[Any], arg_regs: tuple[int, ...]) -> list[Any]:
    """The arguments' (dtype, shape), cheaply: formatting waits for the report."""
    out = []
    for r in arg_regs:
        v = regs[r]
        for a in (v.fields if hasattr(v, "fields") else (v,)):
            if isinstance(a, NDArray):
                out.append((a._dtype, a._np.shape))
    return out


def _format_shapes(shapes: list[Any]) -> str:
    return ", ".join(f"{dt}[{', '.join(map(str, shape))}]" for dt, shape in shapes)


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def enabled() -> bool:
    """Whether the VM profiler is available (always, in ember)."""
    return True
