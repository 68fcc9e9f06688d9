"""The tensors of a fused ``main`` and when each is alive.

``Dataflow.from_function(main)`` flattens a fused, typed ``main`` (calls to Primitive
functions, tuples, projections, lets, params, constants) into tensors and steps in execution
order. Both the graph codegen and the memory planners read this one view, so they agree on
what a tensor is. Tuples cost nothing: a tuple is the list of its fields' tensors.

Time is the step index. A tensor made by step ``i`` and last read by step ``j`` lives over
``[i, j]`` (inclusive at both ends, so an operator's inputs and outputs never share memory);
params and constants live over the whole run; outputs of ``main`` until the end.

Some steps make no call (``Step.nop``) and some tensors live inside another's memory
(``Dataflow.alias_places``: a root tensor and a byte offset in it):

- ``RESHAPE``: a reshape-only group; its output is its input, viewed with another shape.
- ``SLICE``: a strided_slice that is a contiguous byte range of its input: its output is
  those bytes (``Step.offset`` in).
- ``CONCAT``: a concatenation whose inputs were written in place: each input (a root) lives
  in its slice of the output, laid end to end, so the concatenation costs nothing.

``_in_place.place_views`` decides which steps become SLICE and CONCAT steps, and why others
stay kernels. A root's memory holds all of its parts: it lives from the first step that
writes any of them to the last step that reads any of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.expr import Call, Constant, Function, GlobalVar, Let, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import TensorType, Type, map_tuple_leaves
from ...ir.visitor import post_order
from ...runtime.dtype import DataType
from ...runtime.errors import TVMError

# Ops that only reinterpret their input's shape: a group of them needs no kernel (``__nop``).
RESHAPE_OPS = frozenset({"reshape", "squeeze", "expand_dims", "reshape_like",
                         "nn.batch_flatten", "contrib_reverse_reshape"})
INPUT, CONST, INTERMEDIATE = "input", "const", "intermediate"
RESHAPE, SLICE, CONCAT = "reshape", "slice", "concat"  # Step.nop: steps that make no call
# The PassContext option that turns off SLICE and CONCAT steps (each stays a kernel's copy).
CONCAT_IN_PLACE_CONFIG = "relay.backend.concat_in_place"
Tree = int | tuple["Tree", ...]  # a value: a tensor id or a tuple of values


@dataclass(frozen=True)
class TensorInfo:
    """One tensor: static shape, dtype and what made it (INPUT, CONST or INTERMEDIATE)."""

    shape: tuple[int, ...]
    dtype: str
    kind: str

    @property
    def nbytes(self) -> int:
        dt = DataType(self.dtype)
        count = 1
        for d in self.shape:
            count *= d
        return count * ((dt.bits * dt.lanes + 7) // 8)


@dataclass
class Step:
    """One call in execution order: the Relay call, its callee, tensors read and written.

    ``call`` is None only in Dataflows built by hand (planner tests). ``nop`` is None for a
    kernel call, RESHAPE (``outputs[0]`` is ``inputs[0]`` viewed), SLICE (``outputs[0]`` is
    the bytes of ``inputs[0]`` from ``offset``) or CONCAT (the inputs, laid end to end, are
    ``outputs[0]``)."""

    call: Call | None
    inputs: list[int]
    outputs: list[int]
    nop: str | None = None
    offset: int = 0  # SLICE: where outputs[0] starts in inputs[0], in bytes

    @property
    def is_nop(self) -> bool:
        """Whether the step makes no call (its outputs alias memory written before)."""
        return self.nop is not None

    @property
    def func(self) -> RelayExpr:
        assert self.call is not None, "a hand-built Step has no callee"
        return self.call.op


@dataclass
class Dataflow:
    """The tensors and steps of one function, plus where each Relay value lives."""

    tensors: list[TensorInfo] = field(default_factory=list)
    params: list[tuple[Var, int]] = field(default_factory=list)
    constants: list[tuple[Constant, int]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    output_tree: Tree = ()

    @staticmethod
    def from_function(func: Function, mod: IRModule | None = None,
                      concat_in_place: bool | None = None) -> Dataflow:
        """Flatten ``func`` (typed); TVMError for what a static graph cannot express.

        ``concat_in_place`` (default: the PassContext option ``relay.backend.concat_in_place``,
        on unless set false) makes the slices and concatenations that qualify SLICE and CONCAT
        steps (``_in_place.place_views``)."""
        builder = _Builder(mod)
        df = builder.build(func)
        if concat_in_place is None:
            from ...ir.transform import PassContext

            concat_in_place = bool(PassContext.current().config.get(CONCAT_IN_PLACE_CONFIG, True))
        if concat_in_place:
            from ._in_place import place_views

            place_views(df, builder.callees)
        return df

    # -- liveness -----------------------------------------------------------------------------
    def alias_places(self) -> list[tuple[int, int]]:
        """Per tensor, ``(root, byte offset)``: the tensor whose memory it lives in, and where.
        ``(t, 0)`` for a root; a RESHAPE output is where its input is, a SLICE output its
        offset further; an input of a CONCAT step is at its slice of the output (which may
        itself be in another's memory)."""
        parent: list[tuple[int, int] | None] = [None] * len(self.tensors)
        for step in self.steps:
            if step.nop in (RESHAPE, SLICE):
                parent[step.outputs[0]] = (step.inputs[0], step.offset)
            elif step.nop == CONCAT:
                at = 0
                for t in step.inputs:
                    parent[t] = (step.outputs[0], at)
                    at += self.tensors[t].nbytes
        places: list[tuple[int, int] | None] = [None] * len(self.tensors)
        for t in range(len(self.tensors)):
            chain = []  # walk up to a placed tensor or a root, then place the chain
            u = t
            while places[u] is None and parent[u] is not None:
                chain.append(u)
                u = parent[u][0]  # type: ignore[index]
            if places[u] is None:
                places[u] = (u, 0)
            for v in reversed(chain):
                up, offset = parent[v]  # type: ignore[misc]
                root, base = places[up]  # type: ignore[misc]
                places[v] = (root, base + offset)
        return places  # type: ignore[return-value]

    def alias_roots(self) -> list[int]:
        """Per tensor, the tensor whose memory it uses (see :meth:`alias_places`)."""
        return [root for root, _ in self.alias_places()]

    def groups(self) -> dict[int, AliasGroup]:
        """Per root tensor, its group: members, bytes (its extent) and live interval."""
        spans = self.intervals()
        out: dict[int, AliasGroup] = {}
        for t, (root, offset) in enumerate(self.alias_places()):
            end = offset + self.tensors[t].nbytes
            g = out.get(root)
            if g is None:
                out[root] = AliasGroup([t], end, spans[t])
            else:
                g.members.append(t)
                g.nbytes = max(g.nbytes, end)
                g.interval = (min(g.interval[0], spans[t][0]), max(g.interval[1], spans[t][1]))
        return out

    def intervals(self) -> list[tuple[int, int]]:
        """Per tensor, ``(first, last)`` step at which it must hold its value."""
        end_of_run = len(self.steps)
        spans = [(-1, end_of_run)] * len(self.tensors)  # params and constants: always
        for i, step in enumerate(self.steps):
            for t in step.outputs:
                spans[t] = (i, i)
            for t in step.inputs:
                spans[t] = (spans[t][0], max(spans[t][1], i))
        for t in self.outputs:
            spans[t] = (spans[t][0], end_of_run)
        return spans


@dataclass
class AliasGroup:
    """The tensors that live in one root's memory: ``nbytes`` covers every member at its
    offset; ``interval`` is the union of their live intervals."""

    members: list[int]
    nbytes: int
    interval: tuple[int, int]


def flatten(tree: Tree) -> list[int]:
    """The tensor ids of a value, in field order (tuples may nest deeply: a stack)."""
    out: list[int] = []
    stack = [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, int):
            out.append(t)
        else:
            stack.extend(reversed(t))
    return out


def is_reshape_only(func: RelayExpr) -> bool:
    """Whether ``func`` is a Primitive function that only reshapes its one tensor input."""
    if not isinstance(func, Function) or len(func.params) != 1:
        return False
    if func.get_attr("relay.reshape_only"):
        return True
    node = func.body
    while isinstance(node, Call):
        if not (isinstance(node.op, Op) and node.op.name in RESHAPE_OPS):
            return False
        node = node.args[0]
    return node is func.params[0] and isinstance(func.body, Call)


def _where(expr: RelayExpr) -> str:
    from ...ir.printer import short_text

    return short_text(expr)


class _Builder:
    """Walks the function once, children before parents, without entering callees."""

    def __init__(self, mod: IRModule | None) -> None:
        self.mod = mod
        self.df = Dataflow()
        self.values: dict[int, Tree] = {}  # id(expr) -> value
        self.lets: dict[int, RelayExpr] = {}  # id(let var) -> bound value
        self.callees: list[RelayExpr] = []  # per step, its callee (a GlobalVar resolved)

    def build(self, func: Function) -> Dataflow:
        for p in func.params:
            self.values[id(p)] = self._param(p)
        # The whole order first (it records the lets), then the values; params are done.
        for node in list(post_order(func.body, kids=self._children, done=self.values)):
            self.values[id(node)] = self._visit(node)
        tree = self.values[id(func.body)]
        self.df.output_tree = tree
        self.df.outputs = flatten(tree)
        return self.df

    def _children(self, node: RelayExpr) -> tuple[RelayExpr, ...]:
        if isinstance(node, Call):
            return node.args
        if isinstance(node, Tuple):
            return node.fields
        if isinstance(node, TupleGetItem):
            return (node.tuple_value,)
        if isinstance(node, Let):
            self.lets[id(node.var)] = node.value
            return (node.value, node.body)
        return ()

    def _tensor(self, ty: Type, kind: str, expr: RelayExpr) -> Tree:
        """The tensor ids of a value of type ``ty`` (nested tuples for tuple types)."""
        tree: Tree = map_tuple_leaves(ty, lambda t: self._leaf(t, kind, expr))
        return tree

    def _leaf(self, ty: Type, kind: str, expr: RelayExpr) -> int:
        if not isinstance(ty, TensorType):
            raise TVMError(f"graph executor: {_where(expr)} has type {ty}, which is not a "
                           "tensor or a tuple of tensors; use the VM (relay.vm.compile)")
        if not ty.is_static:
            raise TVMError(f"graph executor: {_where(expr)} has the dynamic shape "
                           f"{ty}; the graph executor needs static shapes, use the VM "
                           "(relay.vm.compile or create_executor('vm'))")
        self.df.tensors.append(TensorInfo(tuple(ty.shape), ty.dtype, kind))  # type: ignore[arg-type]
        return len(self.df.tensors) - 1

    def _param(self, p: Var) -> Tree:
        ty = p.checked_type_ or p.type_annotation
        if not isinstance(ty, TensorType):
            raise TVMError(f"graph executor: parameter %{p.name_hint} has type {ty}; graph "
                           "inputs must be tensors (use the VM for tuples and ADTs)")
        tid = self._tensor(ty, INPUT, p)
        self.df.params.append((p, tid))  # type: ignore[arg-type]
        return tid

    def _visit(self, node: RelayExpr) -> Tree:
        if isinstance(node, Var):
            if id(node) in self.lets:
                return self.values[id(self.lets[id(node)])]
            raise TVMError(f"graph executor: free variable %{node.name_hint} in main")
        if isinstance(node, Constant):
            tid = self._tensor(node.checked_type_ or TensorType(node.data.shape, node.data.dtype),
                               CONST, node)
            self.df.constants.append((node, tid))  # type: ignore[arg-type]
            return tid
        if isinstance(node, Tuple):
            return tuple(self.values[id(f)] for f in node.fields)
        if isinstance(node, TupleGetItem):
            value = self.values[id(node.tuple_value)]
            if isinstance(value, int) or not 0 <= node.index < len(value):
                raise TVMError(f"graph executor: {_where(node)} projects a non-tuple or is "
                               "out of range")
            return value[node.index]
        if isinstance(node, Let):
            return self.values[id(node.body)]
        if isinstance(node, Call):
            return self._call(node)
        raise TVMError(f"graph executor: cannot run {type(node).__name__} nodes "
                       f"({_where(node)}); control flow, closures, references and ADTs "
                       "need the VM (relay.vm.compile or create_executor('vm'))")

    def _call(self, call: Call) -> Tree:
        callee = call.op
        if isinstance(callee, GlobalVar):
            callee = self._global(call, callee)
        if isinstance(callee, Function) and not callee.get_attr("Primitive"):
            raise TVMError(f"graph executor: {_where(call)} calls a non-primitive function; "
                           "run FuseOps first, or use the VM for closures")
        if not isinstance(callee, (Function, Op, GlobalVar)):
            raise TVMError(f"graph executor: cannot call {type(callee).__name__} "
                           f"({_where(call)}); use the VM")
        inputs = [t for a in call.args for t in flatten(self.values[id(a)])]
        out = self._tensor(call.checked_type, INTERMEDIATE, call)
        nop = is_reshape_only(callee) and isinstance(out, int) and len(inputs) == 1
        self.df.steps.append(Step(call, inputs, flatten(out), RESHAPE if nop else None))
        self.callees.append(callee)
        return out

    def _global(self, call: Call, gv: GlobalVar) -> RelayExpr:
        """The primitive function ``gv`` names, or ``gv`` itself for an already lowered
        kernel that the module does not define."""
        func = None if self.mod is None else self.mod.functions.get(gv)
        if func is None:
            return gv
        if isinstance(func, Function) and func.get_attr("Primitive"):
            return func
        raise TVMError(f"graph executor: {_where(call)} calls the global function "
                       f"@{gv.name_hint}; calls between Relay functions need the VM")
