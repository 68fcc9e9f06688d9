"""FuseOps' analysis: the indexed dataflow graph, its post-dominator tree, and the grouping.

1. ``build_graph`` numbers the nodes of a function children-first and records, per node,
   its fusion pattern and its consumers with the pattern of each edge (a broadcast op reads
   an argument of its own output shape elementwise). A node used where fusion cannot follow
   (a function's parameter or result, a let value, an if condition, ...) is *external*.
2. ``post_dominators``: a node's parent is the least common ancestor of its consumers, found
   walking the tree from the consumers towards the root, which is already built for them
   because consumers come later in the order. The tree edge keeps the worst (highest)
   pattern met on the way, so "everything between a node and its post-dominator is
   elementwise" is one comparison.
3. ``partition`` starts with one group per node, then runs three phases over the nodes:
   phase 0 fuses out-elementwise-fusable anchors (conv2d, dense, pools) into elementwise
   successors and elementwise/broadcast nodes into anything injective or reducing that
   post-dominates them; phase 1 fuses injective ops and tuples; phase 2 fuses injective ops
   into tuples that already joined an injective consumer. A fusion commits only if every
   node on every path to the post-dominator passes the phase's condition, and only while
   the group stays within ``max_depth`` nodes. Groups are a union-find forest.
4. A group holding a costly elementwise op (a transcendental: log, exp, erf, sin...) fuses
   into no consumer that iterates over more elements than that op makes: the fused loop
   would compute it again for every element the consumer adds (T5's relative-position
   buckets, a log over (L, L), gathered per head and added to (B, H, L, L) scores: B x H
   times the logs). It runs as its own kernel instead, once per element.
5. In a function with run-time dimensions, a group of *value* nodes (computed from constants
   and shapes alone: ``zeros_like``/``ones_like``/``shape_of`` of anything, then any pure op
   of such values; ``value_nodes``) that does more than elementwise work (a gather, a
   transpose: an injective op or worse) fuses only into value nodes. A static build folds
   such values to constants; the VM runs a kernel of them once per input signature (its
   plan's value phase), but only if no data joins the kernel: T5's bias table gathered by
   the buckets stays a (1, H, L, L) value read by the mask's add, as the static build's
   constant, not a gather per element of every call's (B, H, L, L) add (75 us -> 7 us at
   4x64). An elementwise value group still fuses: a cast of GPT-2's causal slice inside the
   masking ``where`` costs less than reading a bool mask made once (1.2 us against 2.6 us at
   4x24).
6. A layout transform NCHW -> NCHW[L]c that ember's blocked-copy kernel runs is a group of
   its own (opaque) when what would fuse into it reads memory in NCHW order (elementwise,
   broadcast and reshape-like ops): inlined into the transform, their loop would run its
   vector along the output block's L channels, H x W floats apart in its input (GroupNorm's
   scale, shift and SiLU before a conv: 1.27 ms where onnxruntime's GroupNorm takes 0.22 ms);
   apart, the producers run along rows and the kernel copies at memory speed. So do ops that
   move whole image rows as they are (a channel pad, slice or concatenation, a transpose of the
   outer axes, a blocked value read back to NCHW: ShuffleNetV2's channel shuffle into blocks,
   152 us inlined against 31 + 10 us apart at 116 x 28 x 28); a zero pad of an input's channels
   into whole blocks stays with the transform, which the kernel copies with the pad. A chain
   that reorders (a transpose of the image axes, a resize) keeps the usual fusion: SegFormer
   resizes channels-last tokens into NCHW16c, reading along the channels (split, it ran 25%
   slower).
7. A ``concatenate`` whose every field is a blocked map copied channels-last by the kernel
   (``layout_transform`` NCHW[L]c -> NHWC, maybe the first channels of it, maybe reshaped:
   a detector head's level, ``(N, H * W * anchors, k)``), along an axis with only extents of
   1 before it, takes none of its fields' groups: each field is then one kernel call of its
   own, which the memory planner has write its slice of the concatenation in place
   (``backend/_in_place.py``). Fused, the concatenation's loop gathered each level's
   channels one element at a time, at a division and a remainder per element (EfficientDet's
   class head: 41 ms of the model's 72 at one thread).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from ...ir.adt import Constructor, Match
from ...ir.expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    RelayExpr,
    Tuple,
    TupleGetItem,
)
from ...ir.op import Op, OpPattern
from ...ir.types import TensorType, TupleType, is_dynamic
from ...ir.visitor import is_primitive, post_order, walk_children
from ...topi.layout_nchwc import blocked_copy, gathers_when_fused
from ...topi.nn.sizes import dims

ELEMWISE, BROADCAST, INJECTIVE = OpPattern.ELEMWISE, OpPattern.BROADCAST, OpPattern.INJECTIVE
COMM_REDUCE, OUT_EWISE, TUPLE = OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE, OpPattern.TUPLE
OPAQUE = OpPattern.OPAQUE
_SIMPLE_CONST_DTYPES = ("int32", "int64", "float32", "float64", "bool")
# ops that cost far more per element than a load, a store and an add
COSTLY_OPS = frozenset({
    "log", "log2", "log10", "log1p", "exp", "exp2", "expm1", "erf", "tanh", "sigmoid", "sin",
    "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "power",
    "sqrt", "rsqrt", "fast_exp", "fast_tanh", "fast_erf"})
# ops whose result depends on their argument's shape alone (point 5)
SHAPE_READERS = frozenset({"zeros_like", "ones_like", "shape_of", "ndarray_size"})
# ops whose result is no function of their arguments alone: never a value (point 5)
IMPURE_PREFIXES = ("random.",)
KEEP_VALUES_APART = True  # point 5 (a switch for comparing fusions)


@dataclass(eq=False)
class GraphNode:
    """A dataflow node: ``outputs`` are (consumer, edge pattern) pairs."""

    ref: RelayExpr
    index: int
    pattern: OpPattern = OPAQUE
    extern_ref: bool = False
    outputs: list[tuple[GraphNode, OpPattern]] = field(default_factory=list)


@dataclass
class IndexedGraph:
    nodes: list[GraphNode]  # children first
    by_id: dict[int, GraphNode]

    def node_of(self, e: RelayExpr) -> GraphNode | None:
        return self.by_id.get(id(e))


def _constant_pattern(c: Constant) -> OpPattern:
    # Scalars of plain dtypes are inlined into a fused function; other constants stay inputs.
    scalar = len(c.data.shape) == 0 and str(c.data.dtype) in _SIMPLE_CONST_DTYPES
    return ELEMWISE if scalar else OPAQUE


def _op_pattern(call: Call) -> OpPattern:
    op_def = cast(Op, call.op).op_def
    ty = call.checked_type_
    if op_def.shape_func_data_dependent and ty is not None and is_dynamic(ty):
        return OPAQUE  # its output shape is only known after it ran
    if cast(Op, call.op).name == "layout_transform" and _copied_by_kernel(call):
        return OPAQUE  # point 6
    return OpPattern(op_def.pattern)


# ops whose output keeps the memory order of their input (point 6)
ORDER_KEEPING = frozenset({"reshape", "squeeze", "expand_dims", "reshape_like",
                           "contrib_reverse_reshape", "dyn.reshape"})
_CHAIN_LIMIT = 64  # producers looked at (a longer chain keeps the usual fusion)


def _copied_by_kernel(call: Call) -> bool:
    """Point 6: the transform is one the kernel runs, and what would fuse into it reads
    memory in NCHW order (elementwise, broadcast and order-keeping ops back to the kernels,
    parameters and constants whose results it reads): inlined, those reads would gather
    across channel planes. A chain with a transpose or a resize (SegFormer's tokens, channels
    last, resized into NCHW16c) reads along the channels there, and keeps the fusion."""
    ty = call.args[0].checked_type_
    if not (isinstance(ty, TensorType) and gathers_when_fused(
            call.attrs.src_layout, call.attrs.dst_layout, str(ty.dtype), tuple(dims(ty.shape)))):
        return False
    if _channel_pad(call.args[0]) and not isinstance(call.args[0].args[0], Call):
        return False  # the kernel copies a zero pad of memory into blocks itself
    stack, seen = [call.args[0]], 0
    while stack:
        e = stack.pop()
        seen += 1
        if seen > _CHAIN_LIMIT:
            return False
        if not (isinstance(e, Call) and isinstance(e.op, Op)):
            continue  # a parameter, a constant, a tuple item: memory
        pattern = _op_pattern(e)
        if e.op.name in ORDER_KEEPING:
            stack.append(e.args[0])  # (the others: a shape, a tensor to take it from)
        elif (rows := _row_moves(e)) is not None:
            stack.extend(rows)
        elif pattern in (ELEMWISE, BROADCAST):
            stack.extend(e.args)
        elif pattern == INJECTIVE or pattern == TUPLE:
            return False  # it would reorder (a transpose, a resize, a gather...)
    return True


def _channel_pad(e: RelayExpr) -> bool:
    """Whether ``e`` is a constant ``nn.pad`` of axis 1 alone (AlterOpLayout's channels padded
    into whole blocks)."""
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "nn.pad" and \
        e.attrs.pad_mode == "constant" and all(
            tuple(w) == (0, 0) for i, w in enumerate(e.attrs.pad_width) if i != 1)


def _row_moves(e: Call) -> tuple[RelayExpr, ...] | None:
    """The inputs of ``e`` when it moves whole image rows (its last two axes) as they are, so
    that its loop still runs along its inputs' rows: a channel pad, a slice, concatenation or
    transpose of the outer axes, a blocked value's copy back to NCHW (ShuffleNetV2's channel
    shuffle between blocked convs); else None."""
    ty, name = e.checked_type_, cast(Op, e.op).name
    ndim = ty.ndim if isinstance(ty, TensorType) else 0
    if name == "nn.pad" and _channel_pad(e):
        return (e.args[0],)
    if name == "concatenate" and ndim >= 3 and e.attrs.axis % ndim < ndim - 2 and \
            isinstance(e.args[0], Tuple):
        return e.args[0].fields
    if name == "transpose" and ndim >= 3 and e.attrs.axes is not None and \
            [a % ndim for a in e.attrs.axes][-2:] == [ndim - 2, ndim - 1]:
        return (e.args[0],)
    if name == "strided_slice" and ndim >= 3 and e.attrs.axes is not None and \
            all(a % ndim < ndim - 2 for a in e.attrs.axes):
        return (e.args[0],)
    if name == "layout_transform" and e.attrs.dst_layout == "NCHW" and \
            re.fullmatch(r"NCHW\d+c", e.attrs.src_layout):
        return (e.args[0],)  # a blocked value's rows, L floats apart: read along them
    return None


def _concat_in_place(call: Call) -> bool:
    """Point 7: a concatenation of blocked maps copied channels-last, along an axis with
    only extents of 1 before it (each field one byte range of the result)."""
    tup, ty = call.args[0], call.checked_type_
    if not isinstance(tup, Tuple) or not isinstance(ty, TensorType) or len(tup.fields) < 2:
        return False
    sizes = dims(ty.shape)
    axis = int(call.attrs.axis) % len(sizes)  # type: ignore[union-attr]
    if not all(isinstance(d, int) for d in sizes) or any(d != 1 for d in sizes[:axis]):
        return False
    return all(_copied_channels_last(f) for f in tup.fields)


def _copied_channels_last(e: RelayExpr) -> bool:
    """Whether ``e`` is a kernel's copy of a blocked map to channels-last (float32, static),
    maybe its first channels, maybe reshaped (``layout_nchwc.reshaped_copy``)."""
    while isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in ORDER_KEEPING:
        e = e.args[0]
    if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "strided_slice":
        e = e.args[0]
    if not (isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "layout_transform"):
        return False
    ty = e.args[0].checked_type_
    pair = blocked_copy(e.attrs.src_layout, e.attrs.dst_layout)  # type: ignore[union-attr]
    return pair is not None and not pair[1] and pair[2] and isinstance(ty, TensorType) and \
        str(ty.dtype) == "float32" and all(isinstance(d, int) for d in dims(ty.shape))


class _Builder:
    def __init__(self) -> None:
        self.graph = IndexedGraph([], {})

    def external(self, e: RelayExpr) -> None:
        node = self.graph.node_of(e)
        if node is not None:
            node.extern_ref = True

    def edge(self, child: RelayExpr, parent: GraphNode, pattern: OpPattern) -> None:
        node = self.graph.node_of(child)
        if node is not None:
            node.outputs.append((parent, pattern))

    def add(self, e: RelayExpr) -> None:
        if isinstance(e, (Op, GlobalVar, Constructor)):
            return
        node = GraphNode(e, len(self.graph.nodes))
        self.graph.nodes.append(node)
        self.graph.by_id[id(e)] = node
        handler = _LINKS.get(type(e))
        if handler is not None and not is_primitive(e):
            handler(self, e, node)

    def link_call(self, e: Call, node: GraphNode) -> None:
        if not isinstance(e.op, Op):
            self.external(e.op)
            for a in e.args:
                self.edge(a, node, OPAQUE)
            return
        node.pattern = pattern = _op_pattern(e)
        if cast(Op, e.op).name == "concatenate" and _concat_in_place(e):
            self.cut_fields(e)
        out_ty = e.checked_type_
        for a in e.args:
            edge = pattern
            ty = a.checked_type_
            if (edge == BROADCAST and isinstance(ty, TensorType) and isinstance(out_ty, TensorType)
                    and ty.shape == out_ty.shape):
                edge = ELEMWISE
            self.edge(a, node, edge)

    def cut_fields(self, e: Call) -> None:
        """Point 7: the fields of the concatenation ``e`` fuse into none of its groups."""
        tup = self.graph.node_of(e.args[0])
        for f in cast(Tuple, e.args[0]).fields:
            field = self.graph.node_of(f)
            if field is not None:
                field.outputs = [(c, OPAQUE if c is tup else p) for c, p in field.outputs]

    def link_tuple(self, e: Tuple, node: GraphNode) -> None:
        node.pattern = TUPLE
        for f in e.fields:
            if isinstance(f.checked_type_, TensorType):
                self.edge(f, node, INJECTIVE)
            else:
                self.external(f)

    def link_getitem(self, e: TupleGetItem, node: GraphNode) -> None:
        ty = e.tuple_value.checked_type_
        # Fused functions take tensors or tuples of tensors only: no fusing through others.
        if isinstance(ty, TupleType) and all(isinstance(f, TensorType) for f in ty.fields):
            node.pattern = INJECTIVE
            self.edge(e.tuple_value, node, INJECTIVE)
        else:
            self.external(e.tuple_value)

    def link_scope(self, e: RelayExpr, node: GraphNode) -> None:
        # Nothing fuses through a let, an if, a match, a reference or a function boundary.
        for c in _scope_children(e):
            self.external(c)

    def link_constant(self, e: Constant, node: GraphNode) -> None:
        node.pattern = _constant_pattern(e)


def _scope_children(e: RelayExpr) -> tuple[RelayExpr, ...]:
    if isinstance(e, Let):
        return (e.var, e.value, e.body)
    if isinstance(e, If):
        return (e.cond, e.true_branch, e.false_branch)
    if isinstance(e, Match):
        return (e.data, *(c.rhs for c in e.clauses))
    if isinstance(e, Function):
        return (*e.params, e.body)
    if isinstance(e, RefCreate):
        return (e.value,)
    if isinstance(e, RefRead):
        return (e.ref,)
    if isinstance(e, RefWrite):
        return (e.ref, e.value)
    return ()


_LINKS: dict[type, Callable[[_Builder, Any, GraphNode], None]] = {
    Call: _Builder.link_call, Tuple: _Builder.link_tuple, TupleGetItem: _Builder.link_getitem,
    Constant: _Builder.link_constant, Let: _Builder.link_scope, If: _Builder.link_scope,
    Match: _Builder.link_scope, Function: _Builder.link_scope, RefCreate: _Builder.link_scope,
    RefRead: _Builder.link_scope, RefWrite: _Builder.link_scope,
}


def build_graph(expr: RelayExpr) -> IndexedGraph:
    """The indexed dataflow graph of ``expr`` (typed); fused functions are single nodes."""
    b = _Builder()
    for e in post_order(expr, skip=is_primitive, kids=walk_children):
        b.add(e)
    b.external(expr)
    return b.graph


# -- post-dominator tree -------------------------------------------------------------------------
@dataclass(eq=False)
class DomNode:
    gnode: GraphNode
    parent: DomNode | None
    depth: int
    pattern: OpPattern  # the worst pattern between the node and its parent


def _lca(a: DomNode | None, b: DomNode | None, pattern: OpPattern
         ) -> tuple[DomNode | None, OpPattern]:
    while a is not b:
        if a is None or b is None:
            return None, pattern
        if a.depth < b.depth:
            pattern, b = max(pattern, b.pattern), b.parent
        elif b.depth < a.depth:
            pattern, a = max(pattern, a.pattern), a.parent
        else:
            pattern = max(pattern, a.pattern, b.pattern)
            a, b = a.parent, b.parent
    return a, pattern


def post_dominators(graph: IndexedGraph) -> list[DomNode]:
    """Per node (by index), its immediate post-dominator and the path's worst pattern."""
    tree: list[DomNode | None] = [None] * len(graph.nodes)
    for node in reversed(graph.nodes):
        if node.extern_ref or not node.outputs:
            tree[node.index] = DomNode(node, None, 1, OPAQUE)
            continue
        first, pattern = node.outputs[0]
        parent: DomNode | None = tree[first.index]
        for consumer, edge in node.outputs[1:]:
            parent, pattern = _lca(parent, tree[consumer.index], max(pattern, edge))
        tree[node.index] = DomNode(node, parent, parent.depth + 1 if parent else 1, pattern)
    return tree  # type: ignore[return-value]


# -- grouping -------------------------------------------------------------------------------------
@dataclass(eq=False)
class Group:
    """A union-find set of nodes that becomes one fused function, rooted at ``root_ref``."""

    pattern: OpPattern
    root_ref: RelayExpr
    anchor_ref: RelayExpr | None = None
    num_nodes: int = 1
    parent: Group | None = None
    costly: tuple[int, int] | None = None  # _size of the smallest costly op's output in it
    value: bool = False  # every node a value node (point 5)
    heavy: bool = False  # some node a call more than elementwise (point 5)

    def find_root(self) -> Group:
        root = self
        while root.parent is not None:
            root = root.parent
        node = self
        while node.parent is not None and node.parent is not root:  # path compression
            node.parent, node = root, node.parent
        return root


def _size(e: RelayExpr) -> tuple[int, int] | None:
    """A tensor's element count as (dimensions of run-time size, product of the others)."""
    ty = getattr(e, "checked_type_", None)
    if not isinstance(ty, TensorType):
        return None
    dynamic, static = 0, 1
    for d in ty.shape:
        if isinstance(d, int):
            static *= d
        else:
            dynamic += 1
    return dynamic, static


def value_nodes(graph: IndexedGraph) -> set[int]:
    """The indices of the nodes computed from constants and shapes alone (point 5 of the
    module docstring), when some node has a run-time dimension; none otherwise (a static
    function: FoldConstant made such values constants)."""
    if not any(isinstance(ty, TensorType) and is_dynamic(ty)
               for ty in (getattr(n.ref, "checked_type_", None) for n in graph.nodes)):
        return set()
    values: set[int] = set()

    def value(e: RelayExpr) -> bool:
        node = graph.node_of(e)
        return node is not None and node.index in values

    for node in graph.nodes:
        e = node.ref
        if isinstance(e, Constant):
            ok = True
        elif isinstance(e, Call) and isinstance(e.op, Op):
            ok = e.op.name in SHAPE_READERS or (
                not e.op.name.startswith(IMPURE_PREFIXES) and all(value(a) for a in e.args))
        elif isinstance(e, Tuple):
            ok = all(value(f) for f in e.fields)
        elif isinstance(e, TupleGetItem):
            ok = value(e.tuple_value)
        else:
            ok = False
        if ok:
            values.add(node.index)
    return values


def _more_elements(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether a size of _size counts more elements than another, surely: more run-time
    dimensions, or as many and a larger static product."""
    return a[0] > b[0] or (a[0] == b[0] and a[1] > b[1])


def _costly(e: RelayExpr) -> tuple[int, int] | None:
    if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in COSTLY_OPS:
        return _size(e)
    return None


def _fuses_into_anchor(kind: OpPattern, is_sink: bool) -> bool:
    return kind <= BROADCAST


def _fuses_into_injective(kind: OpPattern, is_sink: bool) -> bool:
    return kind <= INJECTIVE


def _fuses_elemwise(kind: OpPattern, is_sink: bool) -> bool:
    # Injective ops on parallel branches may join; the sink may also be a reduction or an
    # anchor that elementwise producers feed.
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= INJECTIVE or kind in (COMM_REDUCE, OUT_EWISE)


class Partitioner:
    """Groups the nodes of an IndexedGraph (see the module docstring)."""

    def __init__(self, graph: IndexedGraph, opt_level: int, max_depth: int) -> None:
        self.graph, self.opt_level, self.max_depth = graph, opt_level, max_depth
        values = value_nodes(graph) if KEEP_VALUES_APART else set()
        self.groups = [Group(n.pattern, n.ref, n.ref if n.pattern == OUT_EWISE else None,
                             costly=_costly(n.ref), value=n.index in values,
                             heavy=isinstance(n.ref, Call) and n.pattern > BROADCAST)
                       for n in graph.nodes]
        self._visited: set[int] = set()

    def partition(self) -> list[Group]:
        if self.opt_level == 0 or not self.groups:
            return self.groups
        tree = post_dominators(self.graph)
        for phase in range(3):
            self._run(tree, phase)
        return self.groups

    def _check_path(self, src: GraphNode, sink: GraphNode,
                    cond: Callable[[OpPattern, bool], bool]) -> bool:
        self._visited = set()
        stack = [out for out, _ in src.outputs]
        while stack:
            node = stack.pop()
            if node.index in self._visited:
                continue
            self._visited.add(node.index)
            if not cond(self.groups[node.index].find_root().pattern, node is sink):
                return False
            if node is not sink:
                stack.extend(out for out, _ in node.outputs)
        return True

    def _merge(self, child: Group, parent: Group) -> None:
        child, parent = child.find_root(), parent.find_root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        parent.value = parent.value and child.value
        parent.heavy = parent.heavy or child.heavy
        if child.costly is not None and (parent.costly is None or
                                         _more_elements(parent.costly, child.costly)):
            parent.costly = child.costly
        if child.anchor_ref is not None:
            assert parent.anchor_ref is None, "FuseOps: a group cannot have two anchors"
            parent.anchor_ref = child.anchor_ref
            parent.pattern = max(child.pattern, parent.pattern)

    @staticmethod
    def _up_to(src: GraphNode, sink: GraphNode) -> Iterator[GraphNode]:
        # The nodes on the paths from src towards its post-dominator sink (sink excluded).
        seen: set[int] = set()
        stack = [src]
        while stack:
            node = stack.pop()
            if node is sink or node.index in seen:
                continue
            seen.add(node.index)
            yield node
            stack.extend(out for out, _ in node.outputs)

    def _commit(self, src: GraphNode, sink: GraphNode) -> None:
        target = self.groups[sink.index]
        for node in self._up_to(src, sink):
            self._merge(self.groups[node.index], target)

    def _count_with(self, child: GraphNode, sink: GraphNode) -> int:
        # The walk stops once past max_depth: in a DAG the way to the post-dominator can be
        # the whole rest of the graph (y = y + z; z = y, repeated), and counting it all per
        # node would be quadratic.
        total = self.groups[sink.index].find_root().num_nodes
        for n in self._up_to(child, sink):
            total += self.groups[n.index].num_nodes
            if total > self.max_depth:
                break
        return total

    def _run(self, tree: list[DomNode], phase: int) -> None:
        for node, dom, group in zip(self.graph.nodes, tree, self.groups):
            if group.pattern == OPAQUE or dom.parent is None:
                continue
            sink = dom.parent.gnode
            if self._count_with(node, sink) > self.max_depth:
                continue
            sink_group = self.groups[sink.index]
            if dom.pattern == OPAQUE:  # an edge cut on the way (point 7)
                continue
            if phase == 2:
                self._phase2(node, sink, group, sink_group)
                continue
            if group.find_root() is sink_group.find_root() or sink_group.pattern == TUPLE:
                continue
            if group.pattern == OUT_EWISE:
                ok = phase == 0 and dom.pattern == ELEMWISE and \
                    self._check_path(node, sink, _fuses_into_anchor)
            elif group.pattern <= BROADCAST:
                ok = (dom.pattern <= INJECTIVE or dom.pattern == COMM_REDUCE) and \
                    self._check_path(node, sink, _fuses_elemwise)
            elif group.pattern in (INJECTIVE, TUPLE):
                # After the anchors (phase 0), so that conv2d groups are complete first.
                ok = phase == 1 and self._check_path(node, sink, _fuses_into_injective)
            else:
                ok = False  # a reduction only takes producers; it fuses into nothing
            if ok and not self._recomputes(group, sink) and not self._joins_data(group):
                self._commit(node, sink)

    @staticmethod
    def _recomputes(group: Group, sink: GraphNode) -> bool:
        """Whether fusing ``group`` into ``sink`` would compute its costly ops more often
        (point 4 of the module docstring)."""
        costly, size = group.find_root().costly, _size(sink.ref)
        return costly is not None and size is not None and _more_elements(size, costly)

    def _joins_data(self, group: Group) -> bool:
        """Whether fusing value group ``group`` along the path ``_check_path`` just walked
        (``_visited``, the sink included) would put data in its kernel (point 5)."""
        root = group.find_root()
        return root.value and root.heavy and not all(
            self.groups[i].find_root().value for i in self._visited)

    def _phase2(self, node: GraphNode, sink: GraphNode, group: Group, sink_group: Group) -> None:
        # Fuse injective ops into a tuple that has already joined an injective consumer.
        if group.pattern > INJECTIVE:
            return
        root = sink_group.find_root()
        if root.pattern == TUPLE:
            return
        if sink_group.pattern == TUPLE and root.pattern <= INJECTIVE and \
                not self._recomputes(group, sink) and \
                self._check_path(node, sink, _fuses_into_injective) and \
                not self._joins_data(group):
            self._commit(node, sink)
