"""Graph codegen: a fused, typed ``main`` -> the graph executor's JSON and its params.

The graph has one input node (``op: "null"``) per parameter of ``main`` (named after it), one
per constant (named ``p0``, ``p1``, ... as TVM does; their values are returned as params),
one ``tvm_op`` node per call of a Primitive function (``func_name`` = the lowered kernel's
symbol), ``__nop`` nodes for reshape-only groups (their output aliases their input's memory)
and for concatenations written in place (their inputs, laid end to end, are their output),
and heads for the (flattened) result. Storage ids, each entry's byte offset in its storage
(``storage_offset``, written when any is not 0) and each storage's size (``storage_size``,
written when one is not its largest entry at offset 0: the intermediates' arena) come from
``memory_plan.plan_storage``.
A node whose function came from an imported model's nodes lists them in its attrs
(``"source_nodes": ["conv1", "relu1"]``, from the calls' spans: ``relay.analysis.source_nodes``),
so that a per-node profile can be read against the model's own nodes.
The format is ``ember.runtime.graph_format``'s, which validates the result.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ....ir.expr import Function, GlobalVar, RelayExpr
from ....ir.module import IRModule
from ....ir.op import Op
from ....runtime.errors import TVMError
from ....runtime.graph_format import NOP, Entry, Graph, Node
from ....runtime.ndarray import NDArray
from ...analysis import source_nodes
from .._liveness import CONST, Dataflow, Step, TensorInfo
from ..memory_plan import StoragePlan, plan_storage

FuncNamer = Callable[[RelayExpr], Any]  # callee -> symbol, or LoweredFunc


@dataclass
class GraphCodegenResult:
    """The graph (``graph_json`` is its text), the params it names, and the memory plan."""

    graph: Graph
    graph_json: str
    params: dict[str, NDArray]
    plan: StoragePlan

    @property
    def func_names(self) -> list[str]:
        """The kernels the graph calls, each once, in first-call order."""
        names = (n.func_name for n in self.graph.nodes if not n.is_input and n.func_name != NOP)
        return list(dict.fromkeys(names))


def _default_namer(callee: RelayExpr) -> str:
    if isinstance(callee, GlobalVar):
        return callee.name_hint
    what = f"operator {callee.name}" if isinstance(callee, Op) else "a primitive function"
    raise TVMError(f"graph codegen: no lowered kernel is known for {what}; lower the module "
                   "first (te_compiler.lower_module) and pass the kernel names")


def as_namer(names: Mapping[RelayExpr, Any] | FuncNamer | None) -> FuncNamer:
    """A kernel lookup from a mapping (callee -> symbol or lowered function), a function, or
    None (callees that are GlobalVars name their kernel)."""
    if names is None:
        return _default_namer
    if callable(names):
        return names
    table = names

    def lookup(callee: RelayExpr) -> Any:
        name = table.get(callee)
        return name if name is not None else _default_namer(callee)

    return lookup


def _check_param_names(df: Dataflow) -> None:
    seen: set[str] = set()
    for p, _ in df.params:
        if not p.name_hint:
            raise TVMError("graph codegen: a parameter of main has no name; graph inputs are "
                           "set by name (give every relay.var a name)")
        if p.name_hint in seen:
            raise TVMError(f"graph codegen: main has two parameters named {p.name_hint!r}; "
                           "graph inputs are set by name, so names must be unique")
        seen.add(p.name_hint)


class _GraphBuilder:
    """Nodes, entries and per-entry attributes, filled in execution order."""

    def __init__(self, plan: StoragePlan, namer: FuncNamer, mod: IRModule | None = None) -> None:
        self.plan, self.namer, self.mod = plan, namer, mod
        self.df = plan.dataflow
        self.nodes: list[Node] = []
        self.entry_of: dict[int, Entry] = {}  # tensor id -> graph entry
        self.tensors = list(self.df.tensors)  # grows with constants lifted out of kernels
        self.sids = list(plan.storage_ids)
        self.offsets = list(plan.storage_offsets)
        self.sizes = list(plan.storage_sizes)  # per storage id
        self.params: dict[str, NDArray] = {}
        self.lifted: dict[str, list[int]] = {}  # kernel -> tensor ids of its lifted constants
        self._taken = {p.name_hint for p, _ in self.df.params}
        self._next_param = 0

    def _input(self, tid: int, name: str) -> None:
        self.entry_of[tid] = Entry(len(self.nodes))
        self.nodes.append(Node("null", name))

    def _param_name(self) -> str:
        """``p0``, ``p1``, ... skipping names that parameters of main already use."""
        while f"p{self._next_param}" in self._taken:
            self._next_param += 1
        self._next_param += 1
        return f"p{self._next_param - 1}"

    def _constant(self, value: NDArray, tid: int | None = None) -> int:
        if tid is None:  # a constant the kernel takes after its inputs: a param of its own
            tid = len(self.tensors)
            self.tensors.append(TensorInfo(tuple(value.shape), str(value.dtype), CONST))
            self.sids.append(len(self.sizes))
            self.offsets.append(0)
            self.sizes.append(value.nbytes)
        name = self._param_name()
        self._input(tid, name)
        self.params[name] = value
        return tid

    def _kernel(self, step: Step) -> tuple[str, list[int]]:
        if step.is_nop:
            return NOP, []
        ref = self.namer(step.func)
        name = ref if isinstance(ref, str) else ref.name
        consts = [] if isinstance(ref, str) else list(getattr(ref, "constants", None) or [])
        if name not in self.lifted:
            self.lifted[name] = [self._constant(c) for c in consts]
        return name, self.lifted[name]

    def _source_attrs(self, step: Step) -> dict[str, Any]:
        """``{"source_nodes": [...]}`` for a call of a function with node spans, else {}."""
        if step.call is None:
            return {}
        func = self.mod[step.func] if isinstance(step.func, GlobalVar) and self.mod is not None \
            and step.func in self.mod.functions else step.func
        names = source_nodes(func) if isinstance(func, Function) else []
        return {"source_nodes": names} if names else {}

    def build(self) -> Graph:
        for p, tid in self.df.params:
            self._input(tid, p.name_hint)
        for const, tid in self.df.constants:
            self._constant(const.data, tid)
        for step in self.df.steps:
            func_name, extra = self._kernel(step)
            inputs = [self.entry_of[t] for t in step.inputs + extra]
            nid = len(self.nodes)
            self.nodes.append(Node("tvm_op", func_name, inputs, func_name, len(step.outputs),
                                   extra_attrs=self._source_attrs(step)))
            for k, t in enumerate(step.outputs):
                self.entry_of[t] = Entry(nid, k)
        order = sorted(self.entry_of, key=lambda t: (self.entry_of[t].nid,
                                                      self.entry_of[t].index))
        offsets = [self.offsets[t] for t in order]
        graph = Graph(self.nodes, [i for i, n in enumerate(self.nodes) if n.is_input],
                      [self.entry_of[t] for t in self.df.outputs],
                      storage_id=[self.sids[t] for t in order],
                      shape=[self.tensors[t].shape for t in order],
                      dltype=[self.tensors[t].dtype for t in order],
                      storage_offset=offsets if any(offsets) else None)
        implied = graph.storage_bytes()  # a storage's size when the JSON does not say
        if any(implied.get(sid) != size for sid, size in enumerate(self.sizes)):
            graph.storage_size = list(self.sizes)
        return graph


def generate_graph(func: Function | IRModule, names: Mapping[RelayExpr, Any] | FuncNamer
                   | None = None, mod: IRModule | None = None,
                   plan: StoragePlan | None = None) -> GraphCodegenResult:
    """The graph JSON for ``func`` (or ``mod["main"]``), fused and typed, static shapes.

    ``names`` gives each callee's kernel (a primitive Function, or a GlobalVar naming a lowered
    kernel): its symbol, or a lowered function with ``name`` and ``constants`` (arrays the
    kernel takes after its inputs; they become params). Raises TVMError for what the graph
    executor cannot run (dynamic shapes, control flow, closures: use the VM).
    """
    if isinstance(func, IRModule):
        mod, func = func, func["main"]
    if plan is None:
        plan = plan_storage(Dataflow.from_function(func, mod))  # type: ignore[arg-type]
    _check_param_names(plan.dataflow)
    builder = _GraphBuilder(plan, as_namer(names), mod)
    graph = builder.build()
    return GraphCodegenResult(graph, graph.to_json(), builder.params, plan)
