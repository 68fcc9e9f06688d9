"""The debug graph executor: the graph executor, plus a ``run()`` that times every node.

``run()`` calls each kernel ``number`` times in a row (more while a measurement takes less
than ``min_repeat_ms``), ``repeat`` times over the graph, in graph order so the final outputs
are those of a normal run; it keeps the per-node times, prints the per-node table and, with a
``dump_root``, writes the graph, a Chrome trace and every node's outputs there. ``profile()``
returns the same measurements as a :class:`~ember.runtime.profiling.Report`.

With ``work_split`` on (the default), ``run()`` and ``profile()`` also make one profiled call
of every kernel (``ember.runtime.work_split``): how its work split over the thread pool's
tasks, shown as the ``Tasks``, ``Imbalance`` and ``Serial Share`` columns.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from .device import Device
from .errors import ArgumentError, ArgumentTypeError, TVMError
from .executor_common import GraphIndexError, check_out, check_timing, is_index, type_str
from .graph_executor import GraphExecutor, GraphModule
from .graph_format import Graph
from .module import Module
from .ndarray import NDArray
from .params import save_param_dict
from .profiling import Count, Duration, Percent, Ratio, Report
from .work_split import KernelSplit, SplitProfiler, imbalance, serial_share, task_count

_MAX_COUNT = 1 << 20  # bounds the growth of ``number`` for kernels that time as zero
DUMP_DIR = "_tvmdbg_device_CPU_0"


class GraphExecutorDebug(GraphExecutor):
    """A graph executor whose ``run`` profiles each node (see the module docstring)."""

    type_key = "GraphExecutorDebug"
    _EXPORTED = GraphExecutor._EXPORTED + ("run_individual", "debug_get_output", "profile")

    def __init__(self, graph: Graph | str, lib: Module, dev: Device | Sequence[Device]
                 | None = None, dump_root: str | None = None) -> None:
        super().__init__(graph, lib, dev)
        self.dump_root = dump_root
        self.node_times: dict[int, list[float]] = {}  # node id -> seconds per call, per repeat
        # What nodes are timed with: wall time; time.thread_time (the calling thread's CPU
        # time) stays meaningful on a busy machine when the kernels run on one thread.
        self.clock: Any = time.perf_counter
        # Whether run() and profile() measure each kernel's work split too (node_splits).
        self.work_split = True
        self.node_splits: dict[int, list[KernelSplit]] = {}

    # -- timing -----------------------------------------------------------------------------
    def _time_nodes(self, number: int, repeat: int, min_repeat_ms: float) -> dict[int, list[float]]:
        times: dict[int, list[float]] = {nid: [] for _, nid in self._plan}
        clock = self.clock
        for _ in range(repeat):
            for call, nid in self._plan:
                count = number
                while True:
                    start = clock()
                    for _ in range(count):
                        if call():
                            self._kernel_failed(nid)
                    elapsed = clock() - start
                    if elapsed * 1e3 >= min_repeat_ms or count >= _MAX_COUNT:
                        break
                    count *= 2
                times[nid].append(elapsed / count)
        return times

    def measure_work_split(self, repeat: int = 1, simulate: int = 0
                           ) -> dict[int, list[KernelSplit]]:
        """Call every kernel ``repeat`` times with its launches profiled, in graph order;
        node id -> its KernelSplit per call (also kept in ``node_splits``). Empty when the
        kernels are not all compiled into a library with ``EmberSplitRun``. ``simulate``:
        see ``SplitProfiler.run`` (its kernels run twice; the graph runs once more after, so
        that the outputs are the model's)."""
        check_timing(1, repeat, 0, "measure_work_split")
        plan = self._run_all
        if plan is None or not SplitProfiler.available(plan.lib):
            self.node_splits = {}
            return {}
        profiler = SplitProfiler(plan.lib)
        base, size = ctypes.addressof(plan._table), ctypes.sizeof(plan._table[0])
        splits: dict[int, list[KernelSplit]] = {nid: [] for _, nid in self._plan}
        for _ in range(repeat):
            for k, (_, nid) in enumerate(self._plan):
                rc, split = profiler.run(base + k * size, simulate)
                if rc:
                    self._kernel_failed(nid)
                splits[nid].append(split)
        if simulate:
            self._execute()
        self.node_splits = splits
        return splits

    def run_individual(self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
                       **_: Any) -> list[float]:
        """Mean seconds per call of every node, in node order (0 for inputs and __nop)."""
        check_timing(number, repeat, min_repeat_ms, "run_individual")
        self.node_times = self._time_nodes(number, repeat, min_repeat_ms)
        return [statistics.fmean(self.node_times[i]) if i in self.node_times else 0.0
                for i in range(len(self.graph.nodes))]

    def run(self, number: int = 10, repeat: int = 1, min_repeat_ms: float = 1,
            display: bool = True, **inputs: Any) -> None:
        """Run the graph, timing every node; print the per-node table (``display``) and write
        the dump files when ``dump_root`` is set. Every argument is checked first."""
        check_timing(number, repeat, min_repeat_ms, "run")
        self._set(inputs, "run")
        self.node_times = self._time_nodes(number, repeat, min_repeat_ms)
        self.node_splits = self.measure_work_split() if self.work_split else {}
        if self.dump_root:
            self._dump(self._node_outputs())
        if display:
            print(self.report().table(aggregate=False))

    # -- results ----------------------------------------------------------------------------
    def _node_outputs(self) -> dict[str, NDArray]:
        """Every node's outputs, copied right after the node ran (storage is reused later)."""
        g, out = self.graph, {}
        calls = {nid: call for call, nid in self._plan}
        for nid, node in enumerate(g.nodes):  # inputs and __nop views have no call
            call = calls.get(nid)
            if call is not None and call():
                self._kernel_failed(nid)
            for k in range(1 if node.is_input else node.num_outputs):
                key = f"{node.name}____topo-index:{nid}____output-num:{k}"
                out[key] = self._entries[g.entry_id(nid, k)].copyto(self.device)
        return out

    def report(self) -> Report:
        """The last ``run``/``profile`` measurements as a Report (every kernel node)."""
        if not self.node_times:
            raise TVMError("debug executor: nothing measured yet; call run() or profile() first")
        g = self.graph
        means = {nid: statistics.fmean(t) * 1e6 for nid, t in self.node_times.items()}
        total = sum(means.values()) or 1.0
        calls = []
        for nid, node in enumerate(g.nodes):
            if node.is_input:
                continue
            us = means.get(nid, 0.0)
            entries = [g.entry_id(e) for e in node.inputs]
            entries += [g.entry_id(nid, k) for k in range(node.num_outputs)]
            shapes = ", ".join(type_str(g.dltype[e], g.shape[e]) for e in entries)
            calls.append({"Name": node.name, "Duration (us)": Duration(us),
                          "Percent": Percent(100.0 * us / total), "Count": Count(1),
                          "Device": str(self.device), "Argument Shapes": shapes,
                          "Hash": str(node.extra_attrs.get("hash", _short_hash(node.func_name)))})
            if self.node_splits.get(nid):
                splits = self.node_splits[nid]
                calls[-1].update({"Tasks": Count(task_count(splits) // len(splits)),
                                  "Imbalance": Ratio(imbalance(splits)),
                                  "Serial Share": Ratio(serial_share(splits))})
            if node.extra_attrs.get("source_nodes"):  # the imported model's nodes it computes
                calls[-1]["Source Nodes"] = ",".join(map(str, node.extra_attrs["source_nodes"]))
        config = {"Executor": "Graph", "Repeats": Count(len(next(iter(self.node_times.values()),
                                                                 [])))}
        return Report(calls, {str(self.device): {"Duration (us)": Duration(sum(means.values()))}},
                      config)

    def profile(self, collectors: Sequence[Any] | None = None, **inputs: Any) -> Report:
        """Run once to warm up, then time every node over three runs; return the Report.

        ``Duration (us)`` of a call is its mean; ``device_metrics[dev]["Duration (us)"]`` is the
        mean wall time of a whole run.
        """
        if collectors:
            raise TVMError(f"profile: metric collectors are not supported by ember (got "
                           f"{len(collectors)}); only durations are measured")
        self._set(inputs, "profile")
        self._execute()
        self.node_times = self._time_nodes(number=1, repeat=3, min_repeat_ms=0)
        self.node_splits = self.measure_work_split() if self.work_split else {}
        walls = []
        for _ in range(3):
            start = time.perf_counter()
            self._execute()
            walls.append(time.perf_counter() - start)
        report = self.report()
        for metrics in report.device_metrics.values():
            metrics["Duration (us)"] = Duration(statistics.fmean(walls) * 1e6)
        return report

    def debug_get_output(self, node: int | str, out: NDArray | None = None) -> NDArray:
        """The (first) output of ``node`` (an index or a name), computed by running the graph
        up to that node; a copy, or written into ``out``."""
        nid = self._node_id(node)
        arr = self._entries[self.graph.entry_id(nid)]
        if out is not None:
            check_out(out, arr, "debug_get_output")
        for call, k in self._plan:
            if k > nid:
                break
            if call():
                self._kernel_failed(k)
        return arr.copyto(self.device) if out is None else out.copyfrom(arr)

    def _node_id(self, node: int | str) -> int:
        nodes = self.graph.nodes
        if isinstance(node, str):
            for i, n in enumerate(nodes):
                if n.name == node:
                    return i
            raise ArgumentError(f"debug_get_output: no node named {node!r}")
        if not is_index(node):
            raise ArgumentTypeError(f"debug_get_output: node must be an int or a name, got "
                                    f"{type(node).__name__}")
        if not 0 <= node < len(nodes):
            raise GraphIndexError(f"debug_get_output: node {node} out of range (the graph has "
                                  f"{len(nodes)} nodes)")
        return int(node)

    # -- dump -------------------------------------------------------------------------------
    def _dump(self, outputs: dict[str, NDArray]) -> None:
        """graph JSON, Chrome trace and node outputs under ``<dump_root>/_tvmdbg_device_CPU_0``."""
        folder = os.path.join(str(self.dump_root), DUMP_DIR)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "_tvmdbg_graph_dump.json"), "w") as f:
            f.write(self.graph.to_json())
        with open(os.path.join(folder, "_tvmdbg_execution_trace.json"), "w") as f:
            json.dump(self._trace(), f)
        with open(os.path.join(folder, "output_tensors.params"), "wb") as f:
            f.write(save_param_dict(outputs))

    def _trace(self) -> dict[str, Any]:
        """Chrome trace events: the nodes back to back, each lasting its mean duration."""
        events, now = [], 0.0
        for _, nid in self._plan:
            us = statistics.fmean(self.node_times[nid]) * 1e6
            name = self.graph.nodes[nid].name
            events.append({"name": name, "ph": "B", "ts": now, "pid": 1, "tid": 1})
            now += us
            events.append({"name": name, "ph": "E", "ts": now, "pid": 1, "tid": 1})
        return {"traceEvents": events, "displayTimeUnit": "ns"}


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


class GraphModuleDebug(GraphModule):
    """The user-facing debug module: ``GraphModuleDebug(factory["debug_create"]("default",
    dev), [dev], graph_json, dump_root)``; methods as :class:`GraphExecutorDebug`."""

    def __init__(self, module: Module, device: Any = None, graph_json_str: str | None = None,
                 dump_root: str | None = None) -> None:
        super().__init__(module)
        if not isinstance(self.module, GraphExecutorDebug):
            raise ArgumentTypeError(f"GraphModuleDebug: expected a debug executor (debug_create or "
                            f"debug_executor.create), got {self.module!r}")
        if dump_root is not None:
            self.module.dump_root = dump_root


def create(graph_json_str: str | Graph, libmod: Module, device: Device | Sequence[Device]
           | None = None, dump_root: str | None = None) -> GraphModuleDebug:
    """A debug executor for ``graph_json_str`` with kernels from ``libmod``, on ``device``."""
    if not isinstance(libmod, Module):
        raise ArgumentTypeError(f"debug_executor.create: lib must be a Module, got "
                        f"{type(libmod).__name__}")
    return GraphModuleDebug(GraphExecutorDebug(graph_json_str, libmod, device, dump_root))
