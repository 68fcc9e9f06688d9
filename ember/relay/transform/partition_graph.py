"""PartitionGraph: lift each annotated region into a global function for its compiler.

Every region of a compiler other than ``default`` (see ``_regions.py``) becomes a global
function ``@tvmgen_<mod_name>_<compiler>_main_<n>`` (``n`` counts the module's partitioned
functions, in the order they are found) with the attributes ``Primitive=1``,
``Compiler="<compiler>"`` and ``global_symbol`` = its name, as in the Relay era. Its
parameters ``%<compiler>_<n>_i<k>`` are the region's distinct inputs (what its
``compiler_begin`` annotations wrap), its result the region's output, or a tuple of them when
the region has several (each ``compiler_end`` then becomes a projection of the call). The call
replaces the region in the caller; the annotations of ``default`` regions are simply removed.
Constants used inside a region stay inside the function, and composite functions
(MergeComposite) stay as the callees of their calls inside it.

The executors run each partitioned function through the codegen its ``Compiler`` names
(``relay.ext.<compiler>``; the built-in ``ccompiler`` emits C), see ``docs/byoc.md``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...ir.expr import Call, Constant, Function, GlobalVar, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.visitor import post_order, rebuild, walk_children
from ...runtime.errors import TVMError
from ._regions import BEGIN, DEFAULT, Region, RegionSet, annotation_kind, opaque_function
from .annotate_target import annotated_functions, with_body
from .type_infer import InferType

__all__ = ["PartitionGraph"]


@dataclass
class _Lifted:
    """One region as a global function: its GlobalVar, the caller-side inputs (original
    nodes), and which output each end annotation gives."""

    gv: GlobalVar
    func: Function
    inputs: list[RelayExpr]
    output_of_end: dict[RelayExpr, int]
    num_outputs: int


def _lift(region: Region, name: str, index: int) -> _Lifted:
    params: dict[RelayExpr, Var] = {}  # caller-side input -> parameter
    for begin in region.begins:
        source = begin.args[0]
        if source not in params and not isinstance(source, Constant):
            params[source] = Var(f"{region.target}_{index}_i{len(params)}", begin.checked_type_)
    new: dict[RelayExpr, RelayExpr] = {}

    def inside(node: RelayExpr) -> RelayExpr:
        if annotation_kind(node) == BEGIN:  # a constant input is bound inside, as in TVM
            source = node.args[0]  # type: ignore[attr-defined]
            return source if isinstance(source, Constant) else params[source]
        return new.get(node, node)  # a leaf (constant, op, composite function) stays

    for node in region.nodes:
        new[node] = rebuild(node, [inside(c) for c in walk_children(node)], keep_type=False)
    producers = list(dict.fromkeys(end.args[0] for end in region.ends))
    outputs = [new[p] for p in producers]
    body = outputs[0] if len(outputs) == 1 else Tuple(tuple(outputs))
    func = Function(tuple(params.values()), body)
    for key, value in (("Primitive", 1), ("Compiler", region.target), ("global_symbol", name)):
        func = func.with_attr(key, value)
    output_of_end = {end: producers.index(end.args[0]) for end in region.ends}
    return _Lifted(GlobalVar(name), func, list(params), output_of_end, len(outputs))


class _Partitioner:
    """Partition the functions of one module, numbering the lifted functions in order."""

    def __init__(self, mod: IRModule, mod_name: str) -> None:
        self.mod, self.prefix = mod, f"tvmgen_{mod_name}" if mod_name else "tvmgen"
        self.taken = {gv.name_hint for gv in mod.functions}
        self.count = 0
        self.lifted: list[_Lifted] = []

    def _name(self, target: str) -> tuple[str, int]:
        while True:
            index, self.count = self.count, self.count + 1
            name = f"{self.prefix}_{target}_main_{index}"
            if name not in self.taken:
                self.taken.add(name)
                return name, index

    def partition(self, func: Function, where: str) -> Function:
        regions = RegionSet(func.body, where)
        by_end: dict[RelayExpr, _Lifted] = {}
        for region in regions.regions:
            if region.target != DEFAULT:
                lifted = _lift(region, *self._name(region.target))
                self.lifted.append(lifted)
                by_end.update({end: lifted for end in region.ends})
        return with_body(func, _replace_regions(func.body, by_end, regions))


def _replace_regions(body: RelayExpr, by_end: dict[RelayExpr, _Lifted],
                     regions: RegionSet) -> RelayExpr:
    """``body`` with each lifted region's ends replaced by (projections of) its call and every
    remaining annotation removed. A lifted end's children in the walk are the region's
    inputs, so the region's insides are never rebuilt in the caller."""

    def kids(node: RelayExpr) -> tuple[RelayExpr, ...]:
        lifted = by_end.get(node)
        return tuple(lifted.inputs) if lifted is not None else walk_children(node)

    new: dict[RelayExpr, RelayExpr] = {}
    calls: dict[int, RelayExpr] = {}
    for node in post_order(body, skip=opaque_function, kids=kids):
        lifted = by_end.get(node)
        if lifted is not None:
            key = id(lifted)
            if key not in calls:
                calls[key] = Call(lifted.gv, tuple(new[i] for i in lifted.inputs))
            call = calls[key]
            new[node] = call if lifted.num_outputs == 1 else TupleGetItem(
                call, lifted.output_of_end[node])
        elif annotation_kind(node) is not None:
            new[node] = new[node.args[0]]  # type: ignore[attr-defined]
        elif opaque_function(node) or not walk_children(node):
            new[node] = node
        else:
            new[node] = rebuild(node, [new[c] for c in walk_children(node)], keep_type=False)
    return new[body]


@dataclass(frozen=True)
class PartitionGraph(ModulePass):
    """Lift each annotated region into a ``Compiler`` function (see the module docstring).

    ``mod_name`` names the lifted functions (``tvmgen_<mod_name>_<compiler>_main_<n>``); use
    the ``mod_name`` the module will be built with."""

    name: ClassVar[str] = "PartitionGraph"
    opt_level: ClassVar[int] = 0
    mod_name: str = "default"

    def __post_init__(self) -> None:
        if not isinstance(self.mod_name, str) or (self.mod_name and
                                                  not self.mod_name.isidentifier()):
            raise ValueError(f"PartitionGraph: mod_name must be a C identifier (it prefixes "
                             f"the function names), got {self.mod_name!r}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = InferType()(mod)
        partitioner = _Partitioner(mod, self.mod_name)
        todo = annotated_functions(mod)
        if not todo:
            return mod
        out = mod.copy()
        for gv, func in todo:
            out.add(gv, partitioner.partition(func, f"PartitionGraph: @{gv.name_hint}"))
        for lifted in partitioner.lifted:
            out.add(lifted.gv, lifted.func)
        try:
            return InferType()(out)
        except TVMError as err:
            raise TVMError(f"PartitionGraph: the partitioned module does not type-check: "
                           f"{err}") from err


register_pass("PartitionGraph", PartitionGraph)
