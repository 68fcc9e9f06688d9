"""MergeCompilerRegions: join neighbouring regions of one compiler into one region.

After AnnotateTarget every call is a region of its own. Regions are visited in topological
order; a region joins a parent region (one whose ``compiler_end`` feeds one of its
``compiler_begin`` annotations directly) of the same compiler unless that would make a cycle:
when some other path leads from the parent to it through code outside both (another
compiler's region, or ordinary code), the merged region would have to run both before and
after that code, so the two stay apart. ``default`` regions (ember's own compiler) merge by
the same rule; PartitionGraph drops their annotations anyway.

Each ``compiler_begin(compiler_end(x))`` pair inside a merged region is removed (``x`` is read
directly); the ``compiler_end`` of a value that other regions still read stays for them.

Relay-era call: ``relay.transform.MergeCompilerRegions()`` after ``AnnotateTarget``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir.expr import Call, Function, RelayExpr
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.visitor import ExprMutator
from ._regions import BEGIN, END, Region, RegionSet, annotation_kind
from .annotate_target import annotated_functions, with_body
from .type_infer import InferType

__all__ = ["MergeCompilerRegions"]


class _Merger:
    """Union-find over the regions of one body, with the reachability test for a merge."""

    def __init__(self, regions: RegionSet) -> None:
        self.rs = regions
        self.parent = {r.index: r.index for r in regions.regions}
        self.members = {r.index: list(r.nodes) for r in regions.regions}  # by group root

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def group_of(self, node: RelayExpr) -> int | None:
        region = self.rs.region_of.get(node)
        if region is None or annotation_kind(node) is not None:
            return None  # annotations are edges between regions, not members
        return self.find(region.index)

    def parents(self, region: Region) -> list[Region]:
        """Regions whose end annotations feed ``region``'s begins directly."""
        found = []
        for begin in region.begins:
            src = self.rs.end_region(begin.args[0]) if annotation_kind(begin.args[0]) == END \
                else None
            if src is not None and src not in found:
                found.append(src)
        return found

    def _members(self, group: int) -> list[RelayExpr]:
        return self.members[group]

    def union(self, into: int, other: int) -> None:
        self.parent[other] = into
        self.members[into] += self.members.pop(other)

    def indirectly_reaches(self, src: int, dst: int) -> bool:
        """Whether group ``dst`` is reachable from group ``src`` other than through an end
        of ``src`` read by a begin of ``dst`` directly."""
        consumers = self.rs.consumers
        todo: list[RelayExpr] = []
        for n in self._members(src):
            for c in consumers.get(n, []):
                if annotation_kind(c) == END:
                    todo += [d for d in consumers.get(c, []) if not (
                        annotation_kind(d) == BEGIN and self._begin_group(d) == dst)]
                elif self.group_of(c) != src:
                    todo.append(c)
        # Post order is topological: a node after every node of dst cannot lead to it.
        limit = max(self.rs.position[n] for n in self._members(dst))
        seen_nodes: set[RelayExpr] = set()
        seen_groups = {src}
        while todo:
            node = todo.pop()
            if node in seen_nodes or self.rs.position[node] > limit:
                continue
            seen_nodes.add(node)
            group = self.group_of(node)
            if group == dst:
                return True
            if group is None:
                todo += consumers.get(node, [])
            elif group not in seen_groups:
                seen_groups.add(group)
                todo += [c for m in self._members(group) for c in consumers.get(m, [])]
        return False

    def _begin_group(self, begin: RelayExpr) -> int | None:
        region = self.rs.begin_region(begin)  # type: ignore[arg-type]
        return None if region is None else self.find(region.index)

    def merge_all(self) -> None:
        for region in self.rs.regions:  # in topological order (first node in post order)
            for src in self.parents(region):
                a, b = self.find(src.index), self.find(region.index)
                if a != b and src.target == region.target and not self.indirectly_reaches(a, b):
                    self.union(a, b)


class _DropInnerAnnotations(ExprMutator):
    """Replace each ``compiler_begin(compiler_end(x))`` inside one merged region by ``x``."""

    def __init__(self, drop: set[RelayExpr]) -> None:
        super().__init__()
        self.drop = drop

    def skip(self, expr: RelayExpr) -> bool:
        return isinstance(expr, Function)

    def visit_call(self, e: Call) -> RelayExpr:
        if e in self.drop:
            return self.visit(e.args[0].args[0])  # type: ignore[attr-defined]
        return super().visit_call(e)


def merge_regions(func: Function, where: str) -> Function:
    """``func`` with its neighbouring regions of one compiler merged."""
    regions = RegionSet(func.body, where)
    merger = _Merger(regions)
    merger.merge_all()
    drop = set()
    for region in regions.regions:
        for begin in region.begins:
            end = begin.args[0]
            src = regions.end_region(end) if annotation_kind(end) == END else None
            consumers = regions.consumers.get(begin, [])
            if src is not None and all(merger.group_of(c) == merger.find(src.index)
                                       for c in consumers):
                drop.add(begin)
    if not drop:
        return func
    return with_body(func, _DropInnerAnnotations(drop).visit(func.body))


@dataclass(frozen=True)
class MergeCompilerRegions(ModulePass):
    """Merge neighbouring regions of one compiler (see the module docstring)."""

    name: ClassVar[str] = "MergeCompilerRegions"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        todo = annotated_functions(mod)
        if not todo:
            return mod
        out = mod.copy()
        for gv, func in todo:
            out.add(gv, merge_regions(func, f"MergeCompilerRegions: @{gv.name_hint}"))
        return InferType()(out)


register_pass("MergeCompilerRegions", MergeCompilerRegions)
