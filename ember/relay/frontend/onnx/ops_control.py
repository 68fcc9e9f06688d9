"""Control flow: If and Loop, lowered for the VM.

If becomes a Relay ``If`` whose branches are the converted subgraphs (a condition known at
import time just imports the taken branch). Loop becomes a recursive local function::

    let %loop = fn (%i, %cond, %v..., %scan...) {
      if (%cond && %i < %M) { <body>; %loop(%i + 1, %cond_out, %v_out..., %scan ++ [%s]...) }
      else { (%i, %cond, %v..., %scan...) }
    };
    %loop(0, cond, v_initial..., empty scans...)

A loop-carried value whose shape changes between iterations gets ``?`` in those axes (found
by converting the body with the initial types, then again with the differing axes relaxed).
Scan outputs grow along a new first axis and need static element shapes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import Call, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var, const
from ....ir.types import Any as AnyDim
from ....ir.types import FuncType, ShapeVar, TensorType, TupleType
from ... import op as _op
from ._node import Node

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
    types = [_merge(node, node.type_of(a), node.type_of(b), k)
             for k, (a, b) in enumerate(zip(then_outs, else_outs))]
    if len(then_outs) == 1:
        out = If(cond, then_outs[0], else_outs[0])
        node.declare(out, types[0])
        return [out]
    out = If(cond, Tuple(tuple(then_outs)), Tuple(tuple(else_outs)))
    node.declare(out, TupleType(tuple(types)))
    return [TupleGetItem(out, k) for k in range(len(types))]


def _numel(ty: TensorType) -> int | None:
    return int(np.prod(ty.concrete_shape)) if ty.is_static else None


def _merge(node: Node, a: TensorType, b: TensorType, k: int) -> TensorType:
    """The type of output k of both branches."""
    if a.dtype != b.dtype or a.ndim != b.ndim:
        raise node.fail(f"output {k} is {a} in then_branch but {b} in else_branch")
    dims = []
    for x, y in zip(a.shape, b.shape):
        if x is y or (isinstance(x, int) and x == y):
            dims.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            raise node.unsupported(f"output {k} has shape {a.shape} in then_branch but "
                                   f"{b.shape} in else_branch (branches must agree on static "
                                   "sizes)")
        else:
            dims.append(AnyDim())
    return TensorType(tuple(dims), a.dtype)


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
    init_types = [node.type_of(e) for e in init]
    return _build_loop(node, body, init, init_types, n_scan)


def _body_scalar(node: Node, i: int, dtype: str, default: Any) -> RelayExpr:
    """Input i (M or cond) as a 0-d tensor, or ``default`` when absent."""
    if not node.has_input(i):
        return const(np.array(default, dtype))
    x = node.input(i)
    return _op.reshape(x, []) if node.ndim(i) else x


def _build_loop(node: Node, body: Any, init: list[RelayExpr], init_types: list[TensorType],
                n_scan: int) -> list[RelayExpr]:
    sizes = node.scope.importer.sizes
    before = set(sizes.source)
    carried = list(init_types)
    relaxed: set[ShapeVar] = set()
    for _ in range(MAX_RELAX_ROUNDS):
        params, outs = _convert_body(node, body, carried)
        out_types = [node.type_of(e) for e in outs]
        wider = [_relax(node, t, o, k, relaxed) for k, (t, o) in
                 enumerate(zip(carried, out_types[1:1 + len(carried)]))]
        if all(w is t for w, t in zip(wider, carried)):
            break
        carried = wider
    else:
        raise node.unsupported("loop-carried shapes did not settle")
    scan_types = [_scan_type(node, t, k) for k, t in enumerate(out_types[1 + len(carried):])]
    loop_var, func = _recursive_loop(node, params, outs, carried, scan_types)
    args = [const(np.array(0, "int64")), _body_scalar(node, 1, "bool", True), *init,
            *[_op.zeros((0, *t.shape[1:]), t.dtype) for t in scan_types]]
    result = Let(loop_var, func, Call(loop_var, args))
    ret = TupleType((_scalar_t("int64"), _scalar_t("bool"), *carried, *scan_types))
    node.declare(result, ret)
    outputs = []
    new_vars = set(sizes.source) - before
    for k, ty in enumerate([*carried, *scan_types]):
        out = TupleGetItem(result, 2 + k)
        node.declare(out, _rebind(sizes, out, ty, new_vars))
        outputs.append(out)
    return outputs


def _scalar_t(dtype: str) -> TensorType:
    return TensorType((), dtype)


def _convert_body(node: Node, body: Any, carried: list[TensorType]
                  ) -> tuple[list[Var], list[RelayExpr]]:
    """Fresh parameters (i, cond, v...) and the body's converted outputs."""
    imp = node.scope.importer
    types = [_scalar_t("int64"), _scalar_t("bool"), *carried]
    params = []
    for vi, ty in zip(body.input, types):
        params.append(imp.tensor_var(vi.name or "loop_var", ty.dtype, ty.shape))
    bindings = {vi.name: p for vi, p in zip(body.input, params) if vi.name}
    outs = [node.finish(e) for e in node.scope.convert_subgraph(body, bindings)]
    return params, outs


def _relax(node: Node, before: TensorType, after: TensorType, k: int,
           relaxed: set[ShapeVar]) -> TensorType:
    """``before`` with the axes that differ from ``after`` made dynamic (same if none)."""
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


def _scan_type(node: Node, elem: TensorType, k: int) -> TensorType:
    if not elem.is_static:
        raise node.unsupported(f"scan output {k} has a dynamic element shape {elem.shape}")
    return TensorType((node.scope.importer.sizes.named(None), *elem.shape), elem.dtype)


def _ir_type(ty: TensorType) -> TensorType:
    """A type as the IR states it: symbolic sizes are ``?``."""
    return TensorType(tuple(AnyDim() if isinstance(d, ShapeVar) else d for d in ty.shape),
                      ty.dtype)


def _recursive_loop(node: Node, params: list[Var], outs: list[RelayExpr],
                    carried: list[TensorType], scan_types: list[TensorType]
                    ) -> tuple[Var, Function]:
    imp = node.scope.importer
    n = len(carried)
    scans = [imp.tensor_var(f"scan{k}", t.dtype, t.shape) for k, t in enumerate(scan_types)]
    all_params = [*params, *scans]
    ir_types = [_ir_type(imp.typer.types[p]) for p in all_params]
    ret = TupleType(tuple(ir_types))
    loop_var = Var("loop", FuncType(tuple(ir_types), ret))
    imp.typer.declare(loop_var, FuncType(tuple(imp.typer.types[p] for p in all_params),
                                         TupleType(tuple(imp.typer.types[p]
                                                         for p in all_params))))
    i, cond = params[0], params[1]
    go = cond
    if node.has_input(0):
        go = _op.logical_and(cond, _op.less(i, _body_scalar(node, 0, "int64", 0)))
    cond_out = outs[0]
    if node.type_of(cond_out).ndim:
        cond_out = _op.reshape(cond_out, [])
    grown = [_op.concatenate([s, _op.expand_dims(e, 0)], 0) for s, e in zip(scans, outs[1 + n:])]
    step = Call(loop_var, [_op.add(i, const(np.array(1, "int64"))), cond_out, *outs[1:1 + n],
                           *grown])
    func = Function(tuple(all_params), If(go, step, Tuple(tuple(all_params))), ret)
    return loop_var, func


def _rebind(sizes: Any, expr: RelayExpr, ty: TensorType, inner: set[ShapeVar]) -> TensorType:
    """``ty`` with sizes that only exist inside the loop replaced by sizes of ``expr``."""
    dims = []
    for axis, d in enumerate(ty.shape):
        if isinstance(d, ShapeVar) and (d in inner or d not in sizes.source):
            d = sizes.named(None)
            sizes.source[d] = (expr, axis)
        dims.append(d)
    return TensorType(tuple(dims), ty.dtype)
