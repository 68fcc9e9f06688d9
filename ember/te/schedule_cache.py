"""cache_read and cache_write: new stages that stage a tensor through another buffer.

Both rewrite the dataflow as TVM's do: a reader stage gets a new ComputeOp (same axes, body
reading the cache), kept under the same Stage, so ``s[C]`` and the tensors the caller already
holds still name it (:meth:`Schedule.current` maps an old tensor to the stage's op now).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..runtime.errors import OpError
from ..tir.expr import ProducerLoad, Var
from ..tir.functor import substitute, transform
from .tensor import ComputeOp, IterVar, Operation, Range, Tensor

if TYPE_CHECKING:
    from .schedule import Schedule, Stage

_CPU_SCOPES = ("global", "local")
_GPU_SCOPES = ("shared", "warp", "local.fragment", "wmma.matrix_a", "wmma.matrix_b",
               "wmma.accumulator", "texture")


def check_scope(scope: Any, where: str) -> str:
    """``scope`` if the host CPU has it; a message naming the alternative otherwise."""
    if scope in _CPU_SCOPES:
        return str(scope)
    if isinstance(scope, str) and (scope in _GPU_SCOPES or scope.startswith(("shared",
                                                                               "texture"))):
        raise OpError(f"{where}: memory scope {scope!r} exists only on GPUs, and ember compiles "
                      "for the host CPU only; use 'local' (a buffer inside the loop nest, with "
                      "compute_at) or 'global'")
    raise OpError(f"{where}: unknown memory scope {scope!r}; the host CPU has 'global' and "
                  "'local'")


def _stage_of(sch: Schedule, t: Any, what: str) -> Stage:
    if not isinstance(t, (Tensor, Operation)):
        raise OpError(f"{what}: expected a te tensor, got {type(t).__name__}")
    return sch[t]


def insert_before(sch: Schedule, st: Stage, new: Stage) -> None:
    sch.stages.insert(sch.stages.index(st), new)
    sch.stage_map[id(new.op)] = new


def replace_op(sch: Schedule, st: Stage, new_op: Operation) -> None:
    # The old op stays a key of stage_map: s[old tensor] and loads of it keep working.
    sch.outputs = [new_op if o is st.op else o for o in sch.outputs]
    st.op = new_op
    sch.stage_map[id(new_op)] = st


def cache_read(sch: Schedule, tensor: Tensor, scope: str, readers: Any) -> Tensor:
    from .schedule import Stage

    where = f"cache_read of {getattr(tensor, 'name', tensor)}"
    scope = check_scope(scope, where)
    _stage_of(sch, tensor, where)
    tensor = sch.current(tensor)
    readers = list(readers) if isinstance(readers, (list, tuple)) else [readers]
    if not readers:
        raise OpError(f"{where}: needs at least one reader stage")
    reader_stages = [_stage_of(sch, r, where) for r in readers]
    for rs in reader_stages:
        if not isinstance(rs.op, ComputeOp) or not any(
                sch.current(t) is tensor for t in rs.op.input_tensors):
            raise OpError(f"{where}: {rs.op.name} does not read {tensor.name} (readers must "
                          "be compute stages that read it)")
    axis = [IterVar(Range.from_min_extent(0, s), Var(f"ax{d}", "int32"), IterVar.DataPar)
            for d, s in enumerate(tensor.shape)]
    body = ProducerLoad(tensor, tuple(iv.var for iv in axis), tensor.dtype)
    cache_op = ComputeOp(f"{tensor.name}.{scope}", "", {}, axis, [], [body])
    cache = cache_op.output(0)

    def to_cache(n: Any) -> Any:
        if isinstance(n, ProducerLoad) and sch.current(n.producer) is tensor:
            return dataclasses.replace(n, producer=cache)
        return None

    for rs in reader_stages:
        op = rs.op
        new_op = ComputeOp(op.name, op.tag, op.attrs, op.axis, op.reduce_axis,
                           [transform(b, to_cache) for b in op.body])
        replace_op(sch, rs, new_op)
    new = Stage(cache_op)
    new.scope = scope
    first = min(sch.stages.index(rs) for rs in reader_stages)
    insert_before(sch, sch.stages[first], new)
    return cache


def cache_write(sch: Schedule, tensor: Any, scope: str) -> Any:
    from .schedule import Stage

    multi = isinstance(tensor, (list, tuple))
    tensors = list(tensor) if multi else [tensor]
    where = f"cache_write of {getattr(tensors[0], 'name', tensors[0])}"
    scope = check_scope(scope, where)
    st = _stage_of(sch, tensors[0], where)
    op = st.op
    if not isinstance(op, ComputeOp):
        raise OpError(f"{where}: only a compute stage can be cached, {op.name} is "
                      f"{type(op).__name__}")
    if st.relations or st.iter_var_attrs or st.pragmas or st.attach_type != "root" or (
            [id(x) for x in st.leaf_iter_vars] != [id(x) for x in op.axis + op.reduce_axis]):
        raise OpError(f"{where}: call cache_write before scheduling {op.name} (its loops were "
                      "already split, reordered, annotated or attached; cache_write replaces "
                      "them)")
    new_axis = [IterVar(iv.dom, Var(f"{iv.var.name}.c", "int32"), iv.iter_type)
                for iv in op.axis]
    vmap = {iv.var: n.var for iv, n in zip(op.axis, new_axis)}
    cache_op = ComputeOp(f"{op.name}.{scope}", op.tag, op.attrs, new_axis, op.reduce_axis,
                         [substitute(b, vmap) for b in op.body])
    idx = tuple(iv.var for iv in op.axis)
    copy_op = ComputeOp(op.name, op.tag, op.attrs, op.axis, [],
                        [ProducerLoad(cache_op.output(i), idx, b.dtype)
                         for i, b in enumerate(op.body)])
    replace_op(sch, st, copy_op)
    st.all_iter_vars = list(op.axis)
    st.leaf_iter_vars = list(op.axis)
    new = Stage(cache_op)
    new.scope = scope
    insert_before(sch, st, new)
    outs = [cache_op.output(i) for i in range(cache_op.num_outputs)]
    return outs if multi else outs[0]
