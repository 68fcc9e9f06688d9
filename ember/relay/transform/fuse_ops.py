"""FuseOps: group operators into fused ``Primitive`` functions, as TVM's FuseOps does.

The grouping (indexed dataflow graph, post-dominator tree, three fusion phases) is in
``_fuse_graph``. This module turns each group into ``fn (%p0, ..., Primitive=1,
func_name_hint="fused_nn_conv2d_add_nn_relu") { ... }`` called where the group's root was.
Arguments that come from outside the group become parameters ``%p0, %p1, ...`` in the order
a depth-first walk of the group meets them (TVM's order); scalar constants are inlined, other
constants are passed in (or inlined with the config ``relay.FuseOps.link_params``). A group
of reshape-like ops only also gets ``relay.reshape_only=1`` (a graph executor may run it as a
no-op on shared storage; the VM makes it a view, ``dyn.reshape`` included, whose target shape
its shape function computes). ``annotation.stop_fusion`` ends a group and is then dropped.

``func_name_hint`` is ember's addition, readable by lowering and code generation (TVM
recomputes the same name while lowering). Names are not unique: two groups with the same ops
share one, and the code generator numbers them. Names longer than 80 characters are cut and
suffixed with a hash of the full name.

``fuse_opt_level=-1`` takes the PassContext's opt_level; at level 0 every op gets its own
function. ``relay.FuseOps.max_depth`` (default 256) bounds the ops in one group.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.attrs import DictAttrs
from ...ir.expr import Call, Constant, Function, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import FunctionPass, PassContext, register_pass
from ...ir.types import Type
from ...ir.visitor import is_primitive, rebuild, walk_children
from ...ir.visitor import post_order as ir_post_order
from ._fuse_graph import ELEMWISE, Group, Partitioner, _constant_pattern, build_graph
from ._helpers import infer, map_functions

__all__ = ["FuseOps", "fused_function_name"]

MAX_NAME = 80
_RESHAPE_LIKE = frozenset({"reshape", "contrib_reverse_reshape", "squeeze", "expand_dims",
                           "nn.batch_flatten", "reshape_like", "dyn.reshape"})


def fused_function_name(func: Function) -> str:
    """``fused_`` + the names of the ops in ``func``'s body, children first, ``.`` -> ``_``."""
    ops = [e.op.name.replace(".", "_") for e in ir_post_order(func.body)
           if isinstance(e, Call) and isinstance(e.op, Op)]
    name = "_".join(["fused", *ops])
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        name = f"{name[:MAX_NAME]}_{digest}"
    return name


class _GroupInfo:
    """Parameters of one fused function and the outside values bound to them."""

    def __init__(self) -> None:
        self.params: list[Var] = []
        self.args: list[RelayExpr] = []

    def param_for(self, value: RelayExpr, ty: Type | None) -> Var:
        for p, a in zip(self.params, self.args):
            if a is value:
                return p
        p = Var(f"p{len(self.params)}", ty)
        self.params.append(p)
        self.args.append(value)
        return p


def _uses_params(e: RelayExpr) -> bool:
    """Nodes whose arguments may become parameters of their group's function."""
    if isinstance(e, Call):
        return isinstance(e.op, Op) and e.op.name != "annotation.stop_fusion"
    return isinstance(e, (Tuple, TupleGetItem))


class _Fuser:
    """Rebuild a function with every group turned into a call of a fused function.

    An iterative depth-first walk: a parameter is allocated right after the argument it
    stands for has been rebuilt, which gives TVM's parameter order.
    """

    def __init__(self, groups: dict[int, Group], link_params: bool) -> None:
        self.groups = groups
        self.link_params = link_params
        self.info: dict[int, _GroupInfo] = {}
        self.inner: dict[int, RelayExpr] = {}  # a node as its own group's body sees it
        self.outer: dict[int, RelayExpr] = {}  # a node as everything else sees it
        self.keep: list[RelayExpr] = []

    def group(self, e: RelayExpr) -> Group | None:
        g = self.groups.get(id(e))
        return None if g is None else g.find_root()

    def arg(self, g: Group | None, a: RelayExpr) -> RelayExpr:
        if g is not None and self.group(a) is g:
            return self.inner[id(a)]
        value = self.outer[id(a)]
        if g is None or (isinstance(value, Constant) and (
                self.link_params or _constant_pattern(value) == ELEMWISE)):
            return value  # scalars are inlined even into ops that fuse nothing (opaque ones)
        return self.info.setdefault(id(g), _GroupInfo()).param_for(value, a.checked_type_)

    def run(self, expr: RelayExpr) -> RelayExpr:
        stack: list[tuple[RelayExpr, int]] = [(expr, 0)]
        while stack:
            node, i = stack[-1]
            kids = () if is_primitive(node) else self._kids(node)
            if i < len(kids):
                child = kids[i]
                if id(child) not in self.inner and id(child) not in self.outer:
                    stack.append((child, 0))
                    continue
                if _uses_params(node):
                    self.arg(self.group(node), child)  # allocate the parameter now
                stack[-1] = (node, i + 1)
                continue
            stack.pop()
            self.keep.append(node)
            self._finish(node)
        return self.outer[id(expr)]

    @staticmethod
    def _kids(node: RelayExpr) -> tuple[RelayExpr, ...]:
        if isinstance(node, Call) and isinstance(node.op, Op):
            return node.args
        return walk_children(node)

    def _finish(self, node: RelayExpr) -> None:
        g = self.group(node)
        key = id(node)
        if is_primitive(node):
            self.inner[key] = self.outer[key] = node
        elif isinstance(node, Call) and isinstance(node.op, Op):
            if node.op.name == "annotation.stop_fusion":
                self.outer[key] = self.outer[id(node.args[0])]
                return
            new: RelayExpr = Call(node.op, tuple(self.arg(g, a) for a in node.args), node.attrs,
                                  node.type_args, span=node.span)
            self._place(node, g, new)
        elif isinstance(node, Tuple) and g is not None and g.root_ref is not node:
            self.inner[key] = Tuple(tuple(self.arg(g, f) for f in node.fields), span=node.span)
        elif isinstance(node, TupleGetItem) and g is not None and not (
                g.root_ref is node and self.group(node.tuple_value) is not g):
            # (A root projection of a tuple made elsewhere is left as it is.)
            new = TupleGetItem(self.arg(g, node.tuple_value), node.index, span=node.span)
            self._place(node, g, new)
        else:
            out = rebuild(node, [self.outer[id(c)] for c in walk_children(node)], keep_type=False)
            self.inner[key] = self.outer[key] = out

    def _place(self, node: RelayExpr, g: Group | None, new: RelayExpr) -> None:
        if g is None or g.root_ref is not node:
            self.inner[id(node)] = new
            return
        self.outer[id(node)] = self._make_function(g, node.checked_type_, new)

    def _make_function(self, g: Group, ret_type: Type | None, body: RelayExpr) -> Call:
        info = self.info.get(id(g), _GroupInfo())
        ops = [e.op.name for e in ir_post_order(body) if isinstance(e, Call)
               and isinstance(e.op, Op)]
        func = Function(tuple(info.params), body, ret_type)
        attrs: dict[str, Any] = {"Primitive": int(bool(ops))}
        attrs["func_name_hint"] = fused_function_name(func)
        if ops and all(name in _RESHAPE_LIKE for name in ops):
            attrs["relay.reshape_only"] = 1
        func = Function(func.params, body, ret_type, attrs=DictAttrs(attrs))
        return Call(func, tuple(info.args))


def fuse_function(func: Function, opt_level: int, max_depth: int = 256,
                  link_params: bool = False) -> Function:
    """``func`` (typed) with its operators grouped into Primitive functions."""
    graph = build_graph(func)
    groups = Partitioner(graph, opt_level, max_depth).partition()
    by_id = {id(n.ref): g for n, g in zip(graph.nodes, groups)}
    return _Fuser(by_id, link_params).run(func)  # type: ignore[return-value]


@dataclass(frozen=True)
class FuseOps(FunctionPass):
    """Fuse operators into Primitive functions (see the module docstring).

    ``fuse_opt_level`` -1 uses the PassContext's opt_level; 0 leaves every op alone in its
    own function.
    """

    name: ClassVar[str] = "FuseOps"
    opt_level: ClassVar[int] = 0
    fuse_opt_level: int = -1

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if not isinstance(self.fuse_opt_level, int) or self.fuse_opt_level < -1:
            raise ValueError(f"FuseOps: fuse_opt_level must be -1 or a level >= 0, got "
                             f"{self.fuse_opt_level!r}")
        level = ctx.opt_level if self.fuse_opt_level == -1 else self.fuse_opt_level
        max_depth = int(ctx.config.get("relay.FuseOps.max_depth", 256))
        if max_depth < 1:
            raise ValueError(f"FuseOps: relay.FuseOps.max_depth must be >= 1, got {max_depth}")
        link = bool(ctx.config.get("relay.FuseOps.link_params", False))
        mod = infer(mod)
        out = map_functions(mod, lambda f: fuse_function(f, level, max_depth, link))
        return infer(out)


register_pass("FuseOps", FuseOps)
