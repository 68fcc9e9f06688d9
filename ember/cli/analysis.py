"""What ``ember compile`` and ``ember inspect`` report about a build: how many operators were
fused into how many kernels, and the memory plan (every intermediate buffer with its lifetime,
its offset and size, the planned total and the lower bound).

The memory plan is recomputed from the fused module with the planners the backends use
(``memory_plan.plan_storage`` for the graph executor, ``plan_dataflow_arena`` for AOT, both
deterministic), so it is the plan the build made; ``ember compile`` checks the AOT total
against the built model's metadata. The VM plans per scope while it runs: for it only the lower
bound is reported.

A plan is a JSON-ready dict (saved in the model's record, read back by ``inspect``)::

    {"executor": "aot", "planned_bytes": 768, "lower_bound": 768, "total_bytes": 808,
     "steps": 3, "buffers": [[label, first_step, last_step, offset, size], ...]}
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..ir.expr import Call, Function, GlobalVar
from ..ir.instrument import PassInstrument
from ..ir.module import IRModule
from ..ir.op import Op
from ..ir.visitor import post_order
from ..relay.backend._liveness import INTERMEDIATE, Dataflow
from ..relay.backend.aot.codegen import itemsize
from ..relay.backend.memory_plan import lower_bound, plan_dataflow_arena, plan_storage
from ..relay.backend.te_compiler import is_primitive, readable_name
from ..runtime.errors import TVMError
from ._console import CLIError

AOT_ALIGNMENT = 16  # the AOT executor's default workspace-byte-alignment


def import_model(path: Path, shapes: dict[str, tuple[int, ...]] | None
                 ) -> tuple[IRModule, dict[str, Any]]:
    """``(typed mod, params)`` of an .onnx or Relay text file (parse errors name the file)."""
    from ..relay.transform import InferType

    if path.suffix == ".onnx":
        from ..api.compiler import to_relay

        mod, params = to_relay(path, shapes, None)
    else:
        if shapes is not None:
            raise CLIError("--input-shapes applies to ONNX models; a Relay model's input "
                           "shapes are the types of its main's parameters", code=2)
        from ..parser import fromtext

        mod, params = fromtext(path.read_text(), source_name=str(path)), {}
    return InferType()(mod), params


class BuildRecorder(PassInstrument):
    """A pass instrument that keeps the module the first pass receives (the model as
    imported) and the one FuseOps returns, and calls
    ``on_pass(name)`` before every pass (for the progress line)."""

    def __init__(self, on_pass: Callable[[str], None] | None = None) -> None:
        self.on_pass = on_pass
        self.source: IRModule | None = None
        self.fused: IRModule | None = None

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        if self.on_pass is not None:
            self.on_pass(info.name)
        if self.source is None:
            self.source = mod

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        if info.name == "FuseOps":
            self.fused = mod


def count_ops(mod: IRModule) -> int:
    """Operator calls in every function of ``mod``."""
    return sum(1 for func in mod.functions.values() if isinstance(func, Function)
               for node in post_order(func) if isinstance(node, Call) and isinstance(node.op, Op))


def kernel_label(func: Any) -> str:
    """``fused_nn_dense_add`` for a primitive function: its operators in order."""
    if isinstance(func, GlobalVar):
        return func.name_hint
    if not isinstance(func, Function):
        return type(func).__name__
    ops = [n.op.name for n in post_order(func.body) if isinstance(n, Call) and isinstance(n.op, Op)]
    return readable_name(ops)


def primitive_calls(mod: IRModule) -> list[Function]:
    """The primitive function of every fused call in ``mod`` (every function), in order."""
    calls = []
    for func in mod.functions.values():
        if not isinstance(func, Function) or is_primitive(func):
            continue
        for node in post_order(func):
            if isinstance(node, Call):
                callee = mod[node.op] if isinstance(node.op, GlobalVar) and node.op in \
                    mod.functions else node.op
                if is_primitive(callee):
                    calls.append(callee)
    return calls


def memory_plan(fused: IRModule, executor: str) -> dict[str, Any] | None:
    """The memory plan of fused, typed ``fused`` for ``executor`` (see the module doc);
    None when ``main`` is not a static dataflow graph."""
    try:
        df = Dataflow.from_function(fused["main"], fused)
    except TVMError:
        return None
    roots = df.alias_roots()
    outputs = {roots[t] for t in df.outputs}
    groups = df.groups()
    inter = [r for r, g in groups.items()
             if r not in outputs and all(df.tensors[t].kind == INTERMEDIATE for t in g.members)]
    producer = {t: i for i, step in enumerate(df.steps) for t in step.outputs}
    size = {r: groups[r].nbytes for r in inter}
    life = {r: groups[r].interval for r in inter}
    plan: dict[str, Any] = {"executor": executor, "steps": len(df.steps),
                            "total_bytes": sum(size.values())}
    if executor == "graph":
        storage = plan_storage(df)  # the intermediates: one storage, an arena
        offset = {r: storage.storage_offsets[r] for r in inter}
        plan.update(planned_bytes=storage.report.planned_bytes,
                    lower_bound=storage.report.lower_bound)
    elif executor == "aot":
        align = max([AOT_ALIGNMENT] + [itemsize(t.dtype) for t in df.tensors])
        offsets, arena = plan_dataflow_arena(df, align)
        offset = {r: offsets[r] for r in inter}
        plan.update(planned_bytes=arena.total, lower_bound=arena.lower_bound)
    else:
        plan.update(planned_bytes=None, lower_bound=lower_bound(
            [size[r] for r in inter], [life[r] for r in inter]))
        return plan
    plan["buffers"] = [[kernel_label(df.steps[producer[r]].func), life[r][0], life[r][1],
                        offset[r], size[r]] for r in inter]
    return plan


def graph_json_plan(graph: Any) -> dict[str, Any]:
    """The graph executor's plan read back from its JSON (``runtime.graph_format.Graph``): a
    buffer per tensor a kernel writes outside the inputs' and outputs' storages, alive until
    its last reader (or a reader of a __nop view or concatenation of it); the storages of the
    intermediates laid end to end, each buffer at its offset in its storage."""
    ops = [nid for nid, node in enumerate(graph.nodes) if not node.is_input]
    pinned = {graph.storage_id[graph.entry_id(n)] for n in graph.arg_nodes}
    pinned |= {graph.storage_id[graph.entry_id(h)] for h in graph.heads}
    made: dict[int, list[int]] = {}  # entry -> the kernel-written entries in its bytes
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    label: dict[int, str] = {}
    for step, nid in enumerate(ops):
        node = graph.nodes[nid]
        parts = [e for i in node.inputs for e in made.get(graph.entry_id(i), [])]
        for e in parts:
            last[e] = step
        for k in range(node.num_outputs):
            eid = graph.entry_id(nid, k)
            if node.func_name == "__nop":
                made[eid] = parts
            elif graph.storage_id[eid] not in pinned:
                made[eid] = [eid]
                first[eid] = last[eid] = step
                label[eid] = node.name
    sizes = graph.storage_bytes()
    base, at = {}, 0
    for sid in sorted({graph.storage_id[e] for e in first}):
        base[sid], at = at, at + sizes[sid]
    buffers = [[label[e], first[e], last[e], base[graph.storage_id[e]] + graph.offset(e),
                graph.nbytes(e)] for e in sorted(first, key=lambda e: (first[e], e))]
    return {"executor": "graph", "steps": len(ops), "planned_bytes": at,
            "lower_bound": lower_bound([b[4] for b in buffers], [(b[1], b[2]) for b in buffers]),
            "total_bytes": sum(b[4] for b in buffers), "buffers": buffers}
