"""rfactor: split a reduction into partial reductions over one of its (split) reduce loops.

``BF = s.rfactor(B, ki)`` (TVM's semantics): BF (named ``B.rf``) has B's axes plus one of
``ki``'s extent at ``factor_axis``, and reduces over B's other reduce loops; B then reduces BF
over a new axis ``ki.v``. The reduce loops' values come from the stage's split relations, a
split that does not divide adds its guard to BF's condition. B's stage is reset, as in TVM.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..runtime.errors import OpError
from ..tir import op as _op
from ..tir.expr import PrimExpr, ProducerLoad, Reduce, Var
from ..tir.functor import substitute
from ..tir.simplify import simplify
from .tensor import ComputeOp, IterVar, Range

if TYPE_CHECKING:
    from .schedule import Schedule, Stage


def _reduce_values(st: Stage, where: str) -> tuple[dict, dict, list[PrimExpr]]:
    """Extents of the reduce loops, the root reduce vars' values in the leaf vars (named
    after the leaves), and the guards of splits that may not divide."""
    from .schedule import Split, split_extents

    op = st.op
    ext: dict[int, PrimExpr] = {id(iv): iv.dom.extent for iv in op.reduce_axis}
    splits = []
    for rel in st.relations:
        if not isinstance(rel, Split):
            if id(rel.outer) in ext:
                raise OpError(f"{where}: reduce loops fused together are not supported; "
                              "rfactor a loop made by split")
            continue
        if id(rel.parent) not in ext:
            continue
        ext[id(rel.outer)], ext[id(rel.inner)] = split_extents(rel, ext[id(rel.parent)])
        splits.append(rel)
    val: dict[int, PrimExpr] = {id(lf): Var(lf.var.name, "int32")
                                for lf in st.leaf_iter_vars if id(lf) in ext}
    guards: list[PrimExpr] = []
    for rel in reversed(splits):
        val[id(rel.parent)] = val[id(rel.outer)] * ext[id(rel.inner)] + val[id(rel.inner)]
        whole = simplify(ext[id(rel.outer)] * ext[id(rel.inner)])
        if str(whole) != str(ext[id(rel.parent)]):
            guards.append(val[id(rel.parent)] < ext[id(rel.parent)])
    return ext, val, guards


def rfactor(sch: Schedule, tensor: Any, axis: IterVar, factor_axis: int = 0) -> Any:
    from .schedule import Stage
    from .schedule_cache import insert_before, replace_op

    where = f"rfactor of {getattr(tensor, 'name', tensor)}"
    st = sch[tensor]
    op = st.op
    if not isinstance(op, ComputeOp) or not op.reduce_axis:
        raise OpError(f"{where}: needs a reduction stage")
    red = op.body[0]
    if op.num_outputs != 1 or not isinstance(red, Reduce) or red.init:
        raise OpError(f"{where}: only a single-value reduction without init can be factored")
    if not isinstance(factor_axis, int) or not 0 <= factor_axis <= len(op.axis):
        raise OpError(f"{where}: factor_axis must be in [0, {len(op.axis)}], got "
                      f"{factor_axis!r}")
    ext, val, guards = _reduce_values(st, where)
    leaves = [lf for lf in st.leaf_iter_vars if id(lf) in ext]
    if not any(lf is axis for lf in leaves):
        raise OpError(f"{where}: {getattr(axis, 'var', axis)} is not a reduce loop of the stage "
                      f"(reduce loops: {[lf.var.name for lf in leaves]})")
    rf_axis = IterVar(Range.from_min_extent(0, ext[id(axis)]), val[id(axis)], IterVar.DataPar)
    rest = [IterVar(Range.from_min_extent(0, ext[id(lf)]), val[id(lf)], IterVar.CommReduce)
            for lf in leaves if lf is not axis]
    spatial = [IterVar(iv.dom, Var(iv.var.name, "int32"), IterVar.DataPar) for iv in op.axis]
    vmap: dict[Var, PrimExpr] = {iv.var: n.var for iv, n in zip(op.axis, spatial)}
    vmap.update({iv.var: iv.dom.min + val[id(iv)] for iv in op.reduce_axis})
    cond = substitute(red.condition, vmap)
    if guards:
        cond = _op.all(cond, *guards)
    source = tuple(substitute(s, vmap) for s in red.source)
    rf_axes = spatial[:factor_axis] + [rf_axis] + spatial[factor_axis:]
    if rest:
        rf_body: PrimExpr = Reduce(red.combiner, source, tuple(rest), simplify(cond), 0,
                                   red.dtype)
    else:  # nothing left to reduce: each partial result is one element (or the identity)
        rf_body = _op.if_then_else(simplify(cond), source[0], red.combiner.identity_element[0])
    rf_op = ComputeOp(f"{op.name}.rf", op.tag, op.attrs, rf_axes, rest, [rf_body])
    # B now reduces the partial results over ``<axis>.v``.
    kv = IterVar(Range.from_min_extent(0, ext[id(axis)]), Var(f"{axis.var.name}.v", "int32"),
                 IterVar.CommReduce)
    idx = [iv.var for iv in op.axis]
    idx.insert(factor_axis, kv.var)
    load = ProducerLoad(rf_op.output(0), tuple(idx), red.dtype)
    body = Reduce(red.combiner, (load,), (kv,), _op.const(True), 0, red.dtype)
    new_op = ComputeOp(op.name, op.tag, op.attrs, op.axis, [kv], [body])
    replace_op(sch, st, new_op)
    st.all_iter_vars = [*op.axis, kv]
    st.leaf_iter_vars = [*op.axis, kv]
    st.relations, st.iter_var_attrs, st.pragmas = [], {}, {}
    insert_before(sch, st, Stage(rf_op))
    return rf_op.output(0)
