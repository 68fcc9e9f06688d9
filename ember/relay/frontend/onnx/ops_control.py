"""Control flow: If and Loop, lowered for the VM.

If becomes a Relay ``If`` whose branches are the converted subgraphs (a condition known at
import time just imports the taken branch). Outputs whose static sizes differ between the
branches get ``?`` there; sequences of different lengths become Lists. Loop becomes a recursive
local function::

    let %loop = fn (%i, %cond, %v..., %scan..., %inv...) {
      if (%cond && %i < %M) { <body>; %loop(%i + 1, %cond_out, %v_out..., %scan ++ [%s]...,
                                            %inv...) }
      else { (%i, %cond, %v..., %scan...) }
    };
    %loop(0, cond, v_initial..., empty scans..., M, outer values read by the body...)

A loop-carried value whose shape changes between iterations gets ``?`` in those axes (found
by converting the body with the initial types, then again with the differing axes relaxed);
a carried sequence is a List whose element type is relaxed the same way, a carried optional
an Option (``_options``). Scan outputs grow
along a new first axis; one whose element shape is only known at run time is collected in a
List and stacked after the loop.

What the body reads from the enclosing graphs (and the trip count ``M``) is passed along as
the extra parameters ``%inv``: referenced directly, a value computed outside the loop would be
moved into its body by ToANormalForm (which binds a value in the innermost scope of all its
uses) and computed again at every iteration. Constants stay in the body, where later
converters can read them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ....ir.expr import const
from ....ir.types import Any as AnyDim
from ....ir.types import FuncType, ShapeVar, TensorType, TupleType
from ... import op as _op
from ._graph import subgraph_inputs
from ._node import Node
from ._options import content_fit, to_option, value_of
from ._sequences import (
    OptType,
    SeqType,
    ascribe,
    concat_list,
    element_fit,
    fresh_sizes,
    ir_type,
    items_of,
    list_var,
    to_list,
)

MAX_RELAX_ROUNDS = 8


# ---------------------------------------------------------------- If
def if_(node: Node) -> list[RelayExpr]:
    then_g, else_g = node.attr("then_branch"), node.attr("else_branch")
    known = node.value(0)
    if known is not None:
        taken = then_g if bool(np.asarray(known).reshape(-1)[0]) else else_g
        return node.scope.convert_subgraph(taken, {})
    cond = node.input(0, "cond")
    if node.dtype(0) != "bool" or _numel(node.type(0)) not in (1, None):
        raise node.fail(f"cond must be a one-element bool tensor, got {node.type(0)}")
    cond = _op.reshape(cond, []) if node.ndim(0) else cond
    then_outs = [node.finish(e) for e in node.scope.convert_subgraph(then_g, {})]
    else_outs = [node.finish(e) for e in node.scope.convert_subgraph(else_g, {})]
    if len(then_outs) != len(else_outs):
        raise node.fail(f"then_branch has {len(then_outs)} outputs, else_branch "
                        f"{len(else_outs)}")
    pairs = [_merge_branches(node, a, b, k)
             for k, (a, b) in enumerate(zip(then_outs, else_outs))]
    types = [ty for _, _, ty in pairs]
    if len(pairs) == 1:
        out = If(cond, pairs[0][0], pairs[0][1])
        node.declare(out, types[0])
        return [_fresh(node, out, types[0])]
    out = If(cond, Tuple(tuple(a for a, _, _ in pairs)), Tuple(tuple(b for _, b, _ in pairs)))
    node.declare(out, TupleType(tuple(types)))
    return [_fresh(node, TupleGetItem(out, k), ty) for k, ty in enumerate(types)]


def _numel(ty: TensorType) -> int | None:
    return int(np.prod(ty.concrete_shape)) if ty.is_static else None


def _fresh(node: Node, expr: RelayExpr, ty: Any) -> RelayExpr:
    """An output declared of ``ty``, its ``?`` sizes found from its own shape at run time."""
    if isinstance(ty, TensorType):
        return fresh_sizes(node, expr, ty)
    node.declare(expr, ty)
    return expr


def _merge_branches(node: Node, a: RelayExpr, b: RelayExpr, k: int
                    ) -> tuple[RelayExpr, RelayExpr, Any]:
    """Output k of both branches, made to have one type, and that type."""
    ta, tb = node.type_of(a), node.type_of(b)
    if isinstance(ta, OptType) or isinstance(tb, OptType):
        return _merge_optionals(node, a, b, ta, tb, k)
    if isinstance(ta, SeqType) and isinstance(tb, SeqType):
        return _merge_sequences(node, a, b, ta, tb, k)
    if isinstance(ta, SeqType) or isinstance(tb, SeqType):
        raise node.fail(f"output {k} is {ta} in then_branch but {tb} in else_branch")
    ty = _merge(node, ta, tb, k)
    if ty == ta and ty == tb:
        return a, b, ty
    imp = node.scope.importer
    return ascribe(a, ir_type(imp, ty)), ascribe(b, ir_type(imp, ty)), ty


def _merge_optionals(node: Node, a: RelayExpr, b: RelayExpr, ta: Any, tb: Any, k: int
                     ) -> tuple[RelayExpr, RelayExpr, Any]:
    """Optionals known at import merge when both branches hold a value (merged) or both are
    empty; otherwise both become Options (presence known at run time; a plain value in one
    branch is a present optional)."""
    both = isinstance(ta, OptType) and isinstance(tb, OptType)
    if both and not ta.runtime and not tb.runtime and ta.present == tb.present:
        if not ta.present:
            return a, b, ta
        va, vb, ty = _merge_branches(node, value_of(node, a), value_of(node, b), k)
        return Tuple((va,)), Tuple((vb,)), OptType(ty, ta.what)
    content = content_fit(node, _content(ta), _content(tb))
    if content is None:
        raise node.fail(f"output {k} is {ta} in then_branch and {tb} in else_branch: the "
                        "model gives no type for the optional's value")
    oa, ob = to_option(node, a, content), to_option(node, b, content)
    return oa, ob, node.type_of(oa)


def _content(ty: Any) -> Any:
    """The type of the value an optional (or a plain value) holds."""
    return ty.content if isinstance(ty, OptType) else ty


def _merge(node: Node, a: TensorType, b: TensorType, k: int) -> TensorType:
    """The type of output k of both branches: ``?`` where their sizes differ."""
    if a.dtype != b.dtype or a.ndim != b.ndim:
        raise node.unsupported(f"output {k} is {a} in then_branch but {b} in else_branch "
                               "(the branches must agree on dtype and rank)")
    dims = [x if x is y or (isinstance(x, int) and x == y) else AnyDim()
            for x, y in zip(a.shape, b.shape)]
    return TensorType(tuple(dims), a.dtype)


def _merge_sequences(node: Node, a: RelayExpr, b: RelayExpr, ta: SeqType, tb: SeqType,
                     k: int) -> tuple[RelayExpr, RelayExpr, SeqType]:
    if ta.dtype != tb.dtype:
        raise node.fail(f"output {k} is a sequence of {ta.dtype} in then_branch but of "
                        f"{tb.dtype} in else_branch")
    if ta.items is not None and tb.items is not None and len(ta.items) == len(tb.items):
        merged = [_merge_branches(node, x, y, k) for x, y in
                  zip(items_of(node, a, ta), items_of(node, b, tb))]
        items = tuple(t for _, _, t in merged)
        ty = SeqType(ta.dtype, element_fit(node, ta.elem, tb.elem), items)
        return Tuple(tuple(x for x, _, _ in merged)), Tuple(tuple(y for _, y, _ in merged)), ty
    elem = element_fit(node, ta.elem, tb.elem)
    return to_list(node, a, elem), to_list(node, b, elem), SeqType(ta.dtype, elem)


# ---------------------------------------------------------------- Loop
def loop(node: Node) -> list[RelayExpr]:
    body = node.attr("body")
    n_carried = node.num_inputs - 2
    if len(body.input) != n_carried + 2:
        raise node.fail(f"the body has {len(body.input)} inputs; expected {n_carried + 2} "
                        "(iteration number, condition, loop-carried values)")
    n_scan = len(body.output) - 1 - n_carried
    if n_scan < 0:
        raise node.fail(f"the body has {len(body.output)} outputs, fewer than the "
                        f"{n_carried + 1} needed (condition and loop-carried values)")
    init = [node.input(2 + k, f"v_initial[{k}]") for k in range(n_carried)]
    return _build_loop(node, body, init, [_as_carried(node, node.type_of(e)) for e in init])


def _as_carried(node: Node, ty: Any) -> Any:
    """The type a loop carries a value of type ``ty`` as: a sequence always as a List, an
    optional as an Option (the body may give a plain value for it: a present one)."""
    if isinstance(ty, OptType):
        content = content_fit(node, ty.content, None)
        if content is None:
            raise node.fail(f"the loop carries an {ty} of a type the model does not give")
        return OptType(content, ty.what, runtime=True)
    return SeqType(ty.dtype, element_fit(node, ty.elem, None)) if isinstance(ty, SeqType) else ty


def _carry(node: Node, value: RelayExpr, ty: Any) -> RelayExpr:
    """``value`` as the loop carries it, of carried type ``ty``."""
    if isinstance(ty, OptType):
        return to_option(node, value, ty.value)
    return to_list(node, value, ty.elem) if isinstance(ty, SeqType) else value


def _body_scalar(node: Node, i: int, dtype: str, default: Any) -> RelayExpr:
    """Input i (M or cond) as a 0-d tensor, or ``default`` when absent."""
    if not node.has_input(i):
        return const(np.array(default, dtype))
    x = node.input(i)
    return _op.reshape(x, []) if node.ndim(i) else x


class _Body:
    """One conversion of the loop body: its parameters (iteration number, condition, carried
    values), the outer values it reads as parameters of their own, and its outputs."""

    def __init__(self, node: Node, graph: Any, carried: list[Any]) -> None:
        imp = node.scope.importer
        types = [_scalar_t("int64"), _scalar_t("bool"), *carried]
        self.params = [_var(imp, vi.name or "loop_var", ty) for vi, ty in zip(graph.input, types)]
        bindings = {vi.name: p for vi, p in zip(graph.input, self.params) if vi.name}
        self.outer: list[RelayExpr] = []  # values computed outside, read inside
        self.inner: list[Var] = []  # their parameters
        for name in sorted(subgraph_inputs(graph) - set(bindings)):
            if not node.scope.defines(name):
                continue  # (the node order check names it)
            value = node.scope.lookup(name)
            if isinstance(value, Constant) or node.scope.known_value(name) is not None:
                continue
            bindings[name] = _var(imp, name, node.type_of(value))
            self.outer.append(value)
            self.inner.append(bindings[name])
        self.outs = [node.finish(e) for e in node.scope.convert_subgraph(graph, bindings)]


def _var(imp: Any, name: str, ty: Any) -> Var:
    if isinstance(ty, OptType):
        var = Var(name, ir_type(imp, ty))
        imp.typer.declare(var, ty)
        return var
    if isinstance(ty, SeqType):
        if ty.items is None:
            return list_var(imp, name, ty)
        var = Var(name, ir_type(imp, ty))
        imp.typer.declare(var, ty)
        return var
    return imp.tensor_var(name, ty.dtype, ty.shape)


def _build_loop(node: Node, graph: Any, init: list[RelayExpr], init_types: list[Any]
                ) -> list[RelayExpr]:
    sizes = node.scope.importer.sizes
    before = set(sizes.source)
    carried = list(init_types)
    relaxed: set[ShapeVar] = set()
    for _ in range(MAX_RELAX_ROUNDS):
        body = _Body(node, graph, carried)
        out_types = [node.type_of(e) for e in body.outs]
        wider = [_relax(node, t, o, k, relaxed) for k, (t, o) in
                 enumerate(zip(carried, out_types[1:1 + len(carried)]))]
        if all(w is t for w, t in zip(wider, carried)):
            break
        carried = wider
    else:
        raise node.unsupported("loop-carried shapes did not settle")
    scans = [_Scan(node, t, k) for k, t in enumerate(out_types[1 + len(carried):])]
    loop_var, func = _recursive_loop(node, body, carried, scans)
    init = [_carry(node, e, t) for e, t in zip(init, carried)]
    args = [const(np.array(0, "int64")), _body_scalar(node, 1, "bool", True), *init,
            *[s.start for s in scans], *body.outer]
    if node.has_input(0):  # the trip count, the loop function's last parameter
        args.append(_body_scalar(node, 0, "int64", 0))
    result = Let(loop_var, func, Call(loop_var, args))
    ret = TupleType((_scalar_t("int64"), _scalar_t("bool"), *carried, *[s.ty for s in scans]))
    node.declare(result, ret)
    outputs = []
    new_vars = set(sizes.source) - before
    for k, ty in enumerate(carried):
        out = TupleGetItem(result, 2 + k)
        node.declare(out, _rebind(sizes, out, ty, new_vars))
        outputs.append(out)
    for k, scan in enumerate(scans):
        out = TupleGetItem(result, 2 + len(carried) + k)
        node.declare(out, scan.ty)
        outputs.append(scan.finish(node, out, new_vars))
    return outputs


def _scalar_t(dtype: str) -> TensorType:
    return TensorType((), dtype)


def _relax(node: Node, before: Any, after: Any, k: int, relaxed: set[ShapeVar]) -> Any:
    """``before`` with the axes that differ from ``after`` made dynamic (same if none)."""
    if isinstance(before, OptType):
        content = content_fit(node, before.value, _content(after))
        return before if content == before.value else OptType(content, before.what, True)
    if isinstance(before, SeqType) or isinstance(after, SeqType):
        if not (isinstance(before, SeqType) and isinstance(after, SeqType)) or (
                before.dtype != after.dtype):
            raise node.fail(f"loop-carried value {k} changes from {before} to {after}")
        elem = element_fit(node, before.elem, after.elem)
        return before if elem == before.elem else SeqType(before.dtype, elem)
    if before.dtype != after.dtype or before.ndim != after.ndim:
        raise node.unsupported(f"loop-carried value {k} changes from {before} to {after} "
                               "(its dtype and rank must stay the same)")
    sizes = node.scope.importer.sizes

    def keep(x: Any, y: Any) -> bool:  # an axis made dynamic by an earlier round stays so
        return x is y or (isinstance(x, int) and x == y) or x in relaxed

    if all(keep(x, y) for x, y in zip(before.shape, after.shape)):
        return before
    dims = []
    for x, y in zip(before.shape, after.shape):
        if not keep(x, y):
            x = sizes.named(None)
            relaxed.add(x)
        dims.append(x)
    return TensorType(tuple(dims), before.dtype)


class _Scan:
    """One scan output: a tensor grown by one row per iteration when its element shape is
    static, else a List of the elements (newest first) stacked after the loop."""

    def __init__(self, node: Node, elem: Any, k: int) -> None:
        if not isinstance(elem, TensorType):
            raise node.fail(f"scan output {k} is a {elem}; scan outputs are tensors")
        imp = node.scope.importer
        self.elem = elem
        self.listed = not elem.is_static
        if self.listed:
            self.ty: Any = SeqType(elem.dtype, element_fit(node, None, elem))
            self.start: RelayExpr = imp.prelude.nil()
            node.declare(self.start, self.ty)
        else:
            self.ty = TensorType((imp.sizes.named(None), *elem.shape), elem.dtype)
            self.start = _op.zeros((0, *elem.shape), elem.dtype)
        self.var = _var(imp, f"scan{k}", self.ty)

    def grow(self, node: Node, value: RelayExpr) -> RelayExpr:
        if self.listed:
            p = node.scope.importer.prelude
            return p.cons(ascribe(value, ir_type(node.scope.importer, self.ty.elem)), self.var)
        return _op.concatenate([self.var, _op.expand_dims(value, 0)], 0)

    def finish(self, node: Node, out: RelayExpr, new_vars: set[ShapeVar]) -> RelayExpr:
        """The scan output as the Loop gives it."""
        if not self.listed:
            node.declare(out, _rebind(node.scope.importer.sizes, out, self.ty, new_vars))
            return out
        imp = node.scope.importer
        rev = Call(imp.prelude.get_global_var("rev"), (out,))
        node.declare(rev, self.ty)
        empty = tuple(d if isinstance(d, int) else 0 for d in self.elem.shape)
        return concat_list(node, rev, self.ty.elem, 0, True,
                           empty=_op.zeros((0, *empty), self.elem.dtype))


def _recursive_loop(node: Node, body: _Body, carried: list[Any], scans: list[_Scan]
                    ) -> tuple[Var, Function]:
    """The loop function: state parameters, then the body's outer values, then ``M`` when
    the Loop has a trip count."""
    imp = node.scope.importer
    n = len(carried)
    inv = list(body.inner)
    i, cond = body.params[0], body.params[1]
    go: RelayExpr = cond
    if node.has_input(0):
        trips = imp.tensor_var("M", "int64", ())
        inv.append(trips)
        go = _op.logical_and(cond, _op.less(i, trips))
    state = [*body.params, *[s.var for s in scans]]
    all_params = [*state, *inv]
    ir_types = [ir_type(imp, imp.typer.types[p]) for p in all_params]
    ret = TupleType(tuple(ir_types[:len(state)]))
    loop_var = Var("loop", FuncType(tuple(ir_types), ret))
    imp.typer.declare(loop_var, FuncType(tuple(imp.typer.types[p] for p in all_params),
                                         TupleType(tuple(imp.typer.types[p] for p in state))))
    outs = body.outs
    cond_out = outs[0]
    if node.type_of(cond_out).ndim:
        cond_out = _op.reshape(cond_out, [])
    values = [_carry(node, v, t) for v, t in zip(outs[1:1 + n], carried)]
    grown = [s.grow(node, e) for s, e in zip(scans, outs[1 + n:])]
    step = Call(loop_var, [_op.add(i, const(np.array(1, "int64"))), cond_out, *values, *grown,
                           *inv])
    func = Function(tuple(all_params), If(go, step, Tuple(tuple(state))), ret)
    return loop_var, func


def _rebind(sizes: Any, expr: RelayExpr, ty: Any, inner: set[ShapeVar]) -> Any:
    """``ty`` with sizes that only exist inside the loop replaced by sizes of ``expr``."""
    if not isinstance(ty, TensorType):
        return ty
    dims = []
    for axis, d in enumerate(ty.shape):
        if isinstance(d, ShapeVar) and (d in inner or d not in sizes.source):
            d = sizes.named(None)
            sizes.source[d] = (expr, axis)
        dims.append(d)
    return TensorType(tuple(dims), ty.dtype)
