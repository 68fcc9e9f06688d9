"""Shape functions: kernels that compute the output shapes of a fused function at run time.

Design. TVM registers a separate shape function per operator and composes them per fused
function. ember derives them instead from the one place that already knows: each op's
compute rule. Lowering a fused function with a ``?`` dimension gives tensor expressions whose
output shapes are expressions of the inputs' size variables (``max(n0, n1)`` for a broadcast,
``n0 * 3`` for a reshape, ``n0 + n1`` for a concatenate...: see the ``compute=`` rules in
``relay/op``). The shape function substitutes, for each size variable, a read of the
matching input's shape tensor, and is compiled by the same te -> C path as the kernels::

    vm_mod_fused_nn_dense_add_shape_func(in_shape0: int64[2],
                                         out_shape0: int64[2], out_nbytes0: int64[])

Inputs: the shape (``vm.shape_of``) of each flattened input whose type has a ``?``; outputs,
for each flattened output whose type has a ``?``: its shape and its size in bytes (what
``alloc_storage`` needs). So the kernel and its shape function can never disagree, every op
with a compute rule gets a shape function for free, and an exported model needs no compiler
(the shape functions are C in the same library). An output dimension that depends on tensor
*values* (data-dependent shapes) is refused at compile time with the kernel's name.

The shape function also checks the requirements the compute rules made on the sizes
(broadcast compatibility, matching reduction lengths, windows that fit...: ``require`` in
``op/_compute_common.py``), as the kernel does, so that a bad call fails before anything is
allocated, with the op's message.
"""
from __future__ import annotations

from typing import Any

from ....runtime.dtype import DataType
from ....runtime.errors import CompileError
from ....te import tensor as te
from ....te.lower import lower as te_lower
from ....te.schedule import create_schedule
from ....tir import op as tir
from ....tir.expr import BufferLoad, IntImm, PrimExpr, Var
from ....tir.functor import free_vars, substitute
from ....tir.stmt import PrimFunc
from .._lower_te import guard
from ..te_compiler import LoweredFunc


def _select_chain(dims: list[PrimExpr]) -> Any:
    """``i -> dims[i]`` as a te compute body (a chain of selects on the index)."""

    def body(i: Any) -> PrimExpr:
        e: PrimExpr = dims[-1]
        for k in range(len(dims) - 2, -1, -1):
            e = tir.Select_(i == k, dims[k], e)
        return e
    return body


def dynamic_outputs(lowered: LoweredFunc) -> list[int]:
    """Indices of the flattened outputs whose shape is only known at run time."""
    return [k for k, t in enumerate(lowered.outputs) if any(isinstance(d, str) for d in t.shape)]


def lower_shape_func(lowered: LoweredFunc, name: str) -> PrimFunc:
    """The PrimFunc computing the shapes and byte sizes of ``lowered``'s dynamic outputs."""
    graph = lowered.te_graph
    if graph is None:
        raise CompileError(f"{lowered.name}: no tensor expressions kept to derive a shape "
                           "function from")
    vmap: dict[Var, PrimExpr] = {}
    reads: dict[Var, tuple[str, int]] = {}
    shape_inputs: list[te.Tensor] = []
    for k, t in enumerate(graph.inputs):
        if all(isinstance(d, IntImm) for d in t.shape):
            continue
        ph = te.placeholder((len(t.shape),), "int64", f"in_shape{k}")
        shape_inputs.append(ph)
        for d, dim in enumerate(t.shape):
            if isinstance(dim, Var) and dim not in vmap:
                vmap[dim] = tir.cast(ph[d], dim.dtype)
                reads[dim] = (ph.op.name, d)
    results: list[te.Tensor] = []
    for k in dynamic_outputs(lowered):
        out = graph.outputs[k]
        dims = [tir.cast(substitute(d, vmap), "int64") for d in out.shape]
        for dim in dims:
            unknown = [v for v in free_vars(dim) if isinstance(v, Var) and v not in vmap]
            if unknown:
                raise CompileError(
                    f"{lowered.name}: output {k} has a dimension ({dim}) that depends on tensor "
                    f"values, not only on input shapes; the VM cannot size it before running "
                    "the kernel (data-dependent shapes are not supported)")
        itemsize = tir.const(DataType(out.dtype).numpy_dtype.itemsize, "int64")
        size: PrimExpr = itemsize
        for dim in dims:
            size = size * dim
        results.append(te.compute((len(dims),), _select_chain(dims), name=f"out_shape{k}"))
        results.append(te.compute((), lambda s=size: s, name=f"out_nbytes{k}"))
    sch = create_schedule([t.op for t in results])
    prim = te_lower(sch, shape_inputs + results, name)
    return guard(prim, graph.requirements, _size_binds(prim, reads, graph.requirements))


def _size_binds(prim: PrimFunc, reads: dict[Var, tuple[str, int]],
                requirements: list[Any]) -> list[tuple[Var, PrimExpr]]:
    """``n = (int32) in_shapeK[d]`` for each size variable that the requirements read."""
    used = {id(v) for cond, _ in requirements for v in free_vars(cond)}
    buffers = {b.name: b for b in prim.buffer_map.values()}
    return [(v, tir.cast(BufferLoad(buffers[ph], (IntImm("int32", d),), "int64"), v.dtype))
            for v, (ph, d) in reads.items() if id(v) in used]
