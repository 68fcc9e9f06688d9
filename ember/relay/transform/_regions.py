"""Compiler regions of an annotated function: what MergeCompilerRegions and PartitionGraph read.

AnnotateTarget (or a hand-written annotator) puts ``annotation.compiler_begin(x, "t")`` on each
value entering a region offloaded to compiler ``t`` and ``annotation.compiler_end(y, "t")`` on
each value leaving it. A *region* is a connected set of computing nodes (calls, tuples,
projections, lets, ifs) joined by direct data edges that no annotation interrupts; variables,
constants, globals, operators and functions are leaves and join nothing. Its inputs are the
``compiler_begin`` nodes its nodes read, its outputs the ``compiler_end`` nodes that read it;
all of them must name the same compiler. Connected nodes that touch no annotation are not a
region (ordinary code between regions).

Malformed annotations are refused with the node and function they were found in: a region
whose annotations name two compilers (overlapping regions), a variable read inside a region
without a ``compiler_begin``, a region whose value leaves the function without a
``compiler_end``, an annotation placed directly on another one.

Functions inside the walked body (composite functions in call position, closures) are leaves:
their insides are never part of a region. Every walk is iterative.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.adt import Constructor
from ...ir.expr import Call, Constant, Function, GlobalVar, Let, RelayExpr, Var
from ...ir.op import Op
from ...ir.printer import short_text
from ...ir.visitor import children, post_order
from ...runtime.errors import TVMError

BEGIN = "annotation.compiler_begin"
END = "annotation.compiler_end"
DEFAULT = "default"
_LEAVES = (Var, GlobalVar, Constant, Op, Constructor, Function)


def annotation_kind(node: RelayExpr) -> str | None:
    """``BEGIN`` or ``END`` for a compiler annotation call, else None."""
    if isinstance(node, Call) and isinstance(node.op, Op) and node.op.name in (BEGIN, END):
        return node.op.name
    return None


def annotation_target(node: Call) -> str:
    """The compiler a begin/end annotation names."""
    return str(node.attrs.compiler)


def is_leaf(node: RelayExpr) -> bool:
    return isinstance(node, _LEAVES)


def opaque_function(node: RelayExpr) -> bool:
    """Functions are walked as leaves (their insides are no part of the caller's regions)."""
    return isinstance(node, Function)


@dataclass
class Region:
    """One region: its compiler, nodes (in post order), inputs (begin annotations, in order of
    first use) and outputs (end annotations, in post order)."""

    index: int
    target: str
    nodes: list[RelayExpr] = field(default_factory=list)
    begins: list[Call] = field(default_factory=list)
    ends: list[Call] = field(default_factory=list)


class RegionSet:
    """The regions of one function body, and the data edges around them."""

    def __init__(self, body: RelayExpr, where: str) -> None:
        self.body, self.where = body, where
        self.order = list(post_order(body, skip=opaque_function))
        self.position = {n: i for i, n in enumerate(self.order)}
        self.consumers: dict[RelayExpr, list[RelayExpr]] = {}
        for node in self.order:
            if not opaque_function(node):
                for c in dict.fromkeys(children(node)):
                    self.consumers.setdefault(c, []).append(node)
        self._parent: dict[RelayExpr, RelayExpr] = {}
        self.regions: list[Region] = []
        self.region_of: dict[RelayExpr, Region] = {}  # computing node, or annotation -> region
        self._group()

    # -- union-find over computing nodes ----------------------------------------------------
    def _find(self, node: RelayExpr) -> RelayExpr:
        root = node
        while self._parent[root] is not root:
            root = self._parent[root]
        while self._parent[node] is not root:  # path compression
            self._parent[node], node = root, self._parent[node]
        return root

    def _union(self, a: RelayExpr, b: RelayExpr) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra is not rb:
            self._parent[rb] = ra

    def _computing(self, node: RelayExpr) -> bool:
        return not is_leaf(node) and annotation_kind(node) is None

    def _group(self) -> None:
        computing = [n for n in self.order if self._computing(n)]
        for n in computing:
            self._parent[n] = n
        for n in computing:
            for c in children(n):
                if self._computing(c):
                    self._union(n, c)
        comps: dict[RelayExpr, list[RelayExpr]] = {}
        for n in computing:
            comps.setdefault(self._find(n), []).append(n)
        self._check_annotations()
        for nodes in comps.values():
            self._make_region(nodes)

    def _check_annotations(self) -> None:
        for n in self.order:
            kind = annotation_kind(n)
            if kind is not None and annotation_kind(n.args[0]) == kind:
                raise TVMError(f"{self.where}: {kind} is applied directly to another {kind} "
                               f"at {short_text(n)}; each value enters or leaves a region once")
            if kind == BEGIN and any(annotation_kind(c) == END for c in self.consumers.get(n, [])):
                raise TVMError(f"{self.where}: a compiler_end reads a compiler_begin directly "
                               f"at {short_text(n)}; a region must compute something")

    def _make_region(self, nodes: list[RelayExpr]) -> None:
        members = set(nodes)
        begins = [c for n in nodes for c in dict.fromkeys(children(n))
                  if annotation_kind(c) == BEGIN]
        ends = [c for n in nodes for c in self.consumers.get(n, []) if annotation_kind(c) == END]
        if not begins and not ends:
            return  # ordinary code between regions
        targets = sorted({annotation_target(a) for a in begins + ends})
        if len(targets) > 1:
            raise TVMError(f"{self.where}: overlapping regions: the region holding "
                           f"{short_text(nodes[-1])} is annotated for {targets}; each region "
                           "is offloaded to one compiler (check the compiler_begin/end "
                           "annotations around it)")
        region = Region(len(self.regions), targets[0], nodes, list(dict.fromkeys(begins)),
                        sorted(set(ends), key=self.position.__getitem__))
        self._check_closed(region, members)
        self.regions.append(region)
        for n in nodes + region.begins + region.ends:
            self.region_of[n] = region

    def _check_closed(self, region: Region, members: set[RelayExpr]) -> None:
        # A let variable bound by a let of the region is the region's own.
        let_vars = {m.var for m in members if isinstance(m, Let)}
        for n in region.nodes:
            args = n.args if isinstance(n, Call) else children(n)
            for a in args:
                if isinstance(a, Var) and a not in let_vars:
                    raise TVMError(f"{self.where}: %{a.name_hint} is read inside the "
                                   f"{region.target!r} region at {short_text(n)} without a "
                                   "compiler_begin")
        if self.body in members:
            raise TVMError(f"{self.where}: the function's result leaves the {region.target!r} "
                           f"region without a compiler_end (at {short_text(self.body)})")

    # -- queries ----------------------------------------------------------------------------
    def begin_region(self, begin: Call) -> Region | None:
        """The region a begin annotation feeds (None: it feeds no computing node)."""
        return self.region_of.get(begin)

    def end_region(self, end: Call) -> Region | None:
        """The region an end annotation closes (None: it ends a leaf)."""
        return self.region_of.get(end)

