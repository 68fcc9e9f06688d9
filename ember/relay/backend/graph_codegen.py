"""Graph codegen: a fused, typed ``main`` -> the graph executor's JSON and its params.

The graph has one input node (``op: "null"``) per parameter of ``main`` (named after it), one
per constant (named ``p0``, ``p1``, ... as TVM does; their values are returned as params),
one ``tvm_op`` node per call of a Primitive function (``func_name`` = the lowered kernel's
symbol), ``__nop`` nodes for reshape-only groups (their output aliases their input's memory),
and heads for the (flattened) result. Storage ids come from ``memory_plan.plan_storage``.
The format is ``ember.runtime.graph_format``'s, which validates the result.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...ir.expr import Function, GlobalVar, RelayExpr
from ...ir.module import IRModule
from ...ir.op import Op
from ...runtime.errors import TVMError
from ...runtime.graph_format import NOP, Entry, Graph, Node
from ...runtime.ndarray import NDArray
from ._liveness import Dataflow, Step
from .memory_plan import StoragePlan, plan_storage

FuncNamer = Callable[[RelayExpr], str]


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


def as_namer(names: Mapping[RelayExpr, str] | FuncNamer | None) -> FuncNamer:
    """A kernel-name lookup from a mapping (callee -> symbol), a function, or None (callees
    that are GlobalVars name their kernel)."""
    if names is None:
        return _default_namer
    if callable(names):
        return names
    table = names

    def lookup(callee: RelayExpr) -> str:
        name = table.get(callee)
        return name if name is not None else _default_namer(callee)

    return lookup


def _constant_names(df: Dataflow) -> list[str]:
    """``p0``, ``p1``, ... skipping names that parameters of main already use."""
    taken = {p.name_hint for p, _ in df.params}
    names: list[str] = []
    k = 0
    while len(names) < len(df.constants):
        if f"p{k}" not in taken:
            names.append(f"p{k}")
        k += 1
    return names


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


def _op_node(step: Step, entries: dict[int, Entry], namer: FuncNamer) -> Node:
    func_name = NOP if step.is_nop else namer(step.func)
    inputs = [entries[t] for t in step.inputs]
    return Node("tvm_op", func_name, inputs, func_name, len(step.outputs))


def generate_graph(func: Function | IRModule, names: Mapping[RelayExpr, str] | FuncNamer | None = None, mod: IRModule | None = None,
                   plan: StoragePlan | None = None) -> GraphCodegenResult:
    """The graph JSON for ``func`` (or ``mod["main"]``), fused and typed, static shapes.

    ``names`` gives the kernel symbol of each callee (a primitive Function, or a GlobalVar
    naming a lowered kernel). Raises TVMError for what the graph executor cannot run
    (dynamic shapes, control flow, closures: use the VM).
    """
    if isinstance(func, IRModule):
        mod, func = func, func["main"]  # type: ignore[assignment]
    if plan is None:
        plan = plan_storage(Dataflow.from_function(func, mod))  # type: ignore[arg-type]
    df, namer = plan.dataflow, as_namer(names)
    _check_param_names(df)
    nodes: list[Node] = []
    entries: dict[int, Entry] = {}
    params: dict[str, NDArray] = {}
    for p, tid in df.params:
        entries[tid] = Entry(len(nodes))
        nodes.append(Node("null", p.name_hint))
    for (const, tid), name in zip(df.constants, _constant_names(df), strict=True):
        entries[tid] = Entry(len(nodes))
        nodes.append(Node("null", name))
        params[name] = const.data
    arg_nodes = list(range(len(nodes)))
    for step in df.steps:
        nid = len(nodes)
        nodes.append(_op_node(step, entries, namer))
        for k, t in enumerate(step.outputs):
            entries[t] = Entry(nid, k)
    tensor_of_entry = sorted(entries, key=lambda t: (entries[t].nid, entries[t].index))
    graph = Graph(nodes, arg_nodes, [entries[t] for t in df.outputs],
                  storage_id=[plan.storage_ids[t] for t in tensor_of_entry],
                  shape=[df.tensors[t].shape for t in tensor_of_entry],
                  dltype=[df.tensors[t].dtype for t in tensor_of_entry])
    return GraphCodegenResult(graph, graph.to_json(), params, plan)
