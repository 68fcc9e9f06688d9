"""The graph walk: scopes of named values, node order, conversion with context on errors.

``Importer`` holds what one import shares (opset, typer, symbolic sizes, params);
``Scope`` maps ONNX value names to Relay expressions for one graph, and a subgraph's scope
(an ``If`` branch, a ``Loop`` body) sees its parents' values. Nodes are converted in
dependency order (Kahn's algorithm over the node list, so no recursion however long the
model), each by its entry in the support table.
"""
from __future__ import annotations

from collections import ChainMap
from collections.abc import Sequence
from typing import Any

import numpy as np

from ....ir.base import node_span
from ....ir.expr import Constant, RelayExpr, Var
from ....ir.types import Any as AnyDim
from ....ir.types import ShapeVar, TensorType
from ....runtime.errors import (
    FrontendError,
    InternalError,
    OpNotImplemented,
    TVMError,
    add_note,
)
from ._node import Node
from ._proto import tensor_to_numpy
from ._symbolic import Sizes, SymShape
from ._typer import Typer

# Integer initializers up to this size stay constants with freeze_params=False: they are
# shapes, axes and indices that converters must read, not weights.
SMALL_INT_PARAM = 64


class Importer:
    """State shared by every graph of one import."""

    def __init__(self, opset: int, freeze_params: bool) -> None:
        self.opset = opset
        self.freeze_params = freeze_params
        self.typer = Typer()
        self.sizes = Sizes(self.typer)
        self.params: dict[str, np.ndarray] = {}
        self._names: dict[str, int] = {}
        self.input_dims: dict[str, list[str | None]] = {}  # dim_param names of main's inputs
        self._prelude: Any = None

    @property
    def prelude(self) -> Any:
        """The Prelude (List, Cons, Nil and its functions) that sequences of run-time length
        use, made on first use (``_sequences.py``); None-checked by ``used_prelude``."""
        if self._prelude is None:
            from ...prelude import Prelude

            self._prelude = Prelude()
        return self._prelude

    @property
    def used_prelude(self) -> Any:
        return self._prelude

    def node_name(self, proto: Any) -> str:
        """The node's name, or ``<OpType>_<k>`` for an unnamed one."""
        if proto.name:
            return str(proto.name)
        k = self._names.get(proto.op_type, 0)
        self._names[proto.op_type] = k + 1
        return f"{proto.op_type}_{k}"

    def tensor_var(self, name: str, dtype: str, dims: Sequence[Any]) -> Var:
        """A variable of the IR (``?`` for symbolic dims) whose import-time type keeps
        each symbolic dim as a ShapeVar."""
        shape = tuple(dims)
        var = Var(name, TensorType(tuple(AnyDim() if isinstance(d, ShapeVar) else d
                                         for d in shape), dtype))
        ty = TensorType(shape, dtype)
        self.typer.declare(var, ty)
        self.sizes.note_source(var, ty)
        return var


class Scope:
    """The values of one graph: expressions, known values and symbolic shapes by name."""

    def __init__(self, importer: Importer, parent: Scope | None = None) -> None:
        self.importer = importer
        if parent is None:
            self.env: ChainMap[str, RelayExpr] = ChainMap()
            self.known: ChainMap[str, np.ndarray] = ChainMap()
            self.sym: ChainMap[str, SymShape] = ChainMap()
        else:
            self.env, self.known = parent.env.new_child(), parent.known.new_child()
            self.sym = parent.sym.new_child()

    def lookup(self, name: str) -> RelayExpr:
        try:
            return self.env[name]
        except KeyError:
            raise FrontendError(f"value {name!r} is not defined: no graph input, initializer "
                                "or earlier node output has that name") from None

    def known_value(self, name: str) -> np.ndarray | None:
        return self.known.get(name)

    def defines(self, name: str) -> bool:
        return name in self.env

    # -- initializers ---------------------------------------------------------------------------
    def add_initializers(self, graph: Any, as_params: bool = False) -> None:
        """Initializers become constants, or with ``as_params`` (main graph and
        freeze_params=False) variables whose values go to ``params``."""
        imp = self.importer
        for tensor in graph.initializer:
            value = tensor_to_numpy(tensor, f"initializer {tensor.name!r}")
            self.known[tensor.name] = value
            small_int = value.dtype.kind in "iub" and value.size <= SMALL_INT_PARAM
            if not as_params or small_int:
                self.env[tensor.name] = Constant(value)
                continue
            var = Var(tensor.name, TensorType(value.shape, str(value.dtype)))
            imp.typer.declare(var, var.type_annotation)  # type: ignore[arg-type]
            imp.params[tensor.name] = value
            self.env[tensor.name] = var
        for sparse in graph.sparse_initializer:
            raise OpNotImplemented(f"sparse initializer {sparse.values.name!r}: sparse tensors "
                                   "are not supported")

    def convert_subgraph(self, graph: Any, bindings: dict[str, RelayExpr]) -> list[RelayExpr]:
        """The outputs of subgraph ``graph`` (an If branch, a Loop body) converted in a child
        scope where ``bindings`` name its inputs."""
        scope = Scope(self.importer, parent=self)
        scope.env.update(bindings)
        scope.add_initializers(graph)
        scope.convert_nodes(graph.node)
        return [scope.lookup(o.name) for o in graph.output]

    # -- nodes ----------------------------------------------------------------------------------
    def convert_nodes(self, nodes: Sequence[Any]) -> None:
        """Convert ``nodes`` (in dependency order) into this scope."""
        for proto in ordered_nodes(nodes, self.defines):
            self.convert_node(proto)

    def convert_node(self, proto: Any) -> None:
        from ._domains import lookup

        version, entry, _ = lookup(proto.domain, proto.op_type, self.importer.opset)
        assert entry is not None, f"{proto.op_type}: the model's operators were checked first"
        name = self.importer.node_name(proto)
        node = Node(proto, name, self, version,
                    entry.attr_inputs_at(version or self.importer.opset))
        typer, outer_span = self.importer.typer, self.importer.typer.span
        typer.span = node_span(name)  # a subgraph's nodes (If, Loop) name themselves
        try:
            result = entry.convert(node)
            outs = self._outputs(node, result)
        except (TVMError, TypeError, ValueError, AttributeError, NotImplementedError) as err:
            raise with_context(err, node.label) from None
        finally:
            typer.span = outer_span
        for i, expr in outs.items():
            name = proto.output[i]
            sym = node.sym_out.get(i)
            if sym is not None and sym.is_static and not isinstance(expr, Constant):
                expr = self._static_shape_value(sym, expr)
            self.env[name] = expr
            if isinstance(expr, Constant):
                self.known[name] = expr.data.numpy()
            elif sym is not None:
                self.sym[name] = sym

    def _static_shape_value(self, sym: SymShape, expr: RelayExpr) -> RelayExpr:
        """A shape value whose every element turned out static, as a constant."""
        dtype = self.importer.typer.type_of(expr).dtype  # type: ignore[attr-defined]
        value = np.array(sym.elems[0] if sym.scalar else list(sym.elems), dtype=dtype)
        const = Constant(value)
        self.importer.typer.declare(const, TensorType(value.shape, dtype))
        return const

    def _outputs(self, node: Node, result: Any) -> dict[int, RelayExpr]:
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        outs: dict[int, RelayExpr] = {}
        for i, name in enumerate(node.proto.output):
            if not name:
                continue
            if i >= len(results) or results[i] is None:
                raise node.unsupported(f"output {i} ({name!r}) is not supported")
            outs[i] = node.finish(results[i])
        return outs


def with_context(err: BaseException, label: str) -> BaseException:
    """``err`` with ``label`` (a node, a file) at the start of its message (an ember error of
    the same class), unless the message names it already; other exceptions, and classes
    with another constructor, get a note naming it instead."""
    msg = str(err)
    if label in msg:
        return err
    if isinstance(err, TVMError) and not isinstance(err, InternalError):
        try:
            return type(err)(f"{label}: {msg}")
        except TypeError:
            pass
    add_note(err, f"while importing {label}")
    return err


def _graphs_of(node: Any) -> list[Any]:
    """The subgraphs held in a node's attributes (If branches, Loop body)."""
    out = []
    for a in node.attribute:
        if a.HasField("g"):
            out.append(a.g)
        out.extend(a.graphs)
    return out


def subgraph_inputs(graph: Any) -> set[str]:
    """Names a graph reads from enclosing graphs (its nodes' inputs, at any depth, that no
    input, initializer or node output of the graph or its own subgraphs defines)."""
    free: set[str] = set()
    stack = [(graph, frozenset())]
    while stack:
        g, outer_defined = stack.pop()
        defined = set(outer_defined)
        defined.update(i.name for i in g.input)
        defined.update(t.name for t in g.initializer)
        defined.update(o for n in g.node for o in n.output)
        for n in g.node:
            free.update(i for i in n.input if i and i not in defined)
            for sub in _graphs_of(n):
                stack.append((sub, frozenset(defined)))
    return free


def ordered_nodes(nodes: Sequence[Any], defined: Any) -> list[Any]:
    """``nodes`` in an order where each comes after the producers of its inputs (the given
    order when it already is one). FrontendError for a missing value or a cycle."""
    producer: dict[str, int] = {}
    for k, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = k
    deps: list[set[int]] = []
    users: list[list[int]] = [[] for _ in nodes]
    for k, n in enumerate(nodes):
        needed = [i for i in n.input if i]
        for sub in _graphs_of(n):
            needed += sorted(subgraph_inputs(sub))
        d = set()
        for name in needed:
            if name in producer and producer[name] != k:
                d.add(producer[name])
            elif name not in producer and not defined(name):
                label = f"{n.op_type} node {n.name!r}" if n.name else f"a {n.op_type} node"
                raise FrontendError(f"{label}: input {name!r} is not defined: no graph input, "
                                    "initializer or node output has that name")
        deps.append(d)
        for p in d:
            users[p].append(k)
    return _kahn(nodes, deps, users)


def _kahn(nodes: Sequence[Any], deps: list[set[int]], users: list[list[int]]) -> list[Any]:
    import heapq

    waiting = [len(d) for d in deps]
    ready = [k for k, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[Any] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(nodes[k])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = [nodes[k].name or nodes[k].op_type for k, w in enumerate(waiting) if w][:8]
        raise FrontendError(f"the graph has a cycle: nodes {', '.join(map(repr, stuck))} "
                            "depend on each other's outputs")
    return order
