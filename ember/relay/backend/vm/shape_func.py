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

Sizes fixed by values. A few ops size their output from an input's *value* (``dyn.reshape``'s
newshape, ``arange``'s bounds, the other ``dyn.*`` ops: ``op/_value_dims.py``). Their compute
rules give such a dimension a formula that reads the value; the shape function then also
takes that input itself (``shape_func_args`` lists what it takes, for ManifestAlloc to pass
the same), computes the dimension from the formula, and first checks what the op requires of
the value (``check_value``: no negative size, a reshape that keeps the element count...).
"""
from __future__ import annotations

from typing import Any

from ....ir.expr import Call, Function, Var as RelayVar
from ....ir.op import Op
from ....ir.visitor import post_order
from ....runtime.dtype import DataType
from ....runtime.errors import CompileError
from ....te import tensor as te
from ....te.lower import lower as te_lower
from ....te.schedule import create_schedule
from ....tir import op as tir
from ....tir.expr import BufferLoad, IntImm, PrimExpr, ProducerLoad, Var
from ....tir.functor import free_vars, rewrite, substitute
from ....tir.functor import post_order as tir_post_order
from ....tir.stmt import Buffer, PrimFunc
from ...op._compute_common import tensor_types
from ...op._value_dims import collect_value_dims
from .._lower_te import guard, to_te
from ..te_compiler import LoweredFunc

SHAPE, DATA = "shape", "data"


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


def _param_fields(func: Function) -> list[list[Any]]:
    """The tensor types of each parameter's flattened fields."""
    out = []
    for p in func.params:
        ty = p.checked_type_ or p.type_annotation
        if ty is None:
            raise CompileError(f"shape function: parameter %{p.name_hint} has no type")
        out.append(tensor_types(ty))
    return out


def value_params(func: Function) -> set[RelayVar]:
    """Parameters of primitive ``func`` whose values its shape function reads: those passed
    to an op argument named in the op's ``defop(shape_data=...)``."""
    params = set(func.params)
    found: set[RelayVar] = set()
    for e in post_order(func.body):
        if isinstance(e, Call) and isinstance(e.op, Op):
            od = e.op.op_def
            for name in od.extra.get("shape_data", ()):
                arg = e.args[od.arg_names.index(name)]
                if arg in params:
                    found.add(arg)  # type: ignore[arg-type]
    return found


def shape_func_args(func: Function) -> list[tuple[int, int, str]]:
    """What the shape function of primitive ``func`` takes, in order, as (parameter index,
    field index in the parameter's flattened tensors, SHAPE or DATA): the shape of every
    field whose type has a ``?``, then, for a parameter whose value sizes the output, the
    parameter itself."""
    reads = value_params(func)
    out: list[tuple[int, int, str]] = []
    for i, (p, fields) in enumerate(zip(func.params, _param_fields(func))):
        out += [(i, k, SHAPE) for k, t in enumerate(fields) if not t.is_static]
        if p in reads:
            if len(fields) != 1:
                raise CompileError(f"shape function: parameter %{p.name_hint} sizes the output "
                                   "by its value, so it must be one tensor, not a tuple")
            out.append((i, 0, DATA))
    return out


class _Inputs:
    """The shape function's arguments and how the size variables of the kernel read them."""

    def __init__(self, func: Function, graph: Any) -> None:
        first, offsets = 0, []
        for fields in _param_fields(func):
            offsets.append(first)
            first += len(fields)
        self.args: list[te.Tensor] = []
        self.vmap: dict[Var, PrimExpr] = {}
        self.reads: dict[Var, tuple[str, int]] = {}
        for p, k, kind in shape_func_args(func):
            flat = offsets[p] + k
            t = graph.inputs[flat]
            if kind == DATA:
                self.args.append(t)
                continue
            ph = te.placeholder((len(t.shape),), "int64", f"in_shape{flat}")
            self.args.append(ph)
            for d, dim in enumerate(t.shape):
                if isinstance(dim, Var) and dim not in self.vmap:
                    self.vmap[dim] = tir.cast(ph[d], dim.dtype)
                    self.reads[dim] = (ph.op.name, d)


def lower_shape_func(lowered: LoweredFunc, name: str) -> PrimFunc:
    """The PrimFunc computing the shapes and byte sizes of ``lowered``'s dynamic outputs."""
    func = lowered.source_func
    with collect_value_dims() as found:  # a te graph of our own: the formulas come with it
        graph = to_te(func)
    inputs = _Inputs(func, graph)
    formulas = {v: substitute(f, inputs.vmap) for v, f in found.formulas.items()}
    sizes = {**inputs.vmap, **formulas}
    results: list[te.Tensor] = []
    for k in dynamic_outputs(lowered):
        out = graph.outputs[k]
        dims = [tir.cast(substitute(d, sizes), "int64") for d in out.shape]
        for dim in dims:
            _check_computable(lowered.name, k, dim, inputs)
        itemsize = tir.const(DataType(out.dtype).numpy_dtype.itemsize, "int64")
        size: PrimExpr = itemsize
        for dim in dims:
            size = size * dim
        results.append(te.compute((len(dims),), _select_chain(dims), name=f"out_shape{k}"))
        results.append(te.compute((), lambda s=size: s, name=f"out_nbytes{k}"))
    sch = create_schedule([t.op for t in results])
    prim = te_lower(sch, inputs.args + results, name)
    buffers = {b.name: b for b in prim.buffer_map.values()}
    checks = [(_loads(substitute(c, formulas), buffers), m) for c, m in found.checks]
    requirements = [(_loads(substitute(c, formulas), buffers), m)
                    for c, m in graph.requirements]
    conds = checks + requirements
    return guard(prim, conds, _size_binds(buffers, inputs.reads, conds))


def _check_computable(kernel: str, k: int, dim: PrimExpr, inputs: _Inputs) -> None:
    """A dimension must follow from the arguments' shapes and the values passed in."""
    unknown = [v for v in free_vars(dim) if isinstance(v, Var) and v not in inputs.vmap]
    args = {id(t) for t in inputs.args}
    loads = [n.producer for n in _producer_loads(dim) if id(n.producer) not in args]
    if unknown or any(isinstance(t.op, te.PlaceholderOp) for t in loads):
        raise CompileError(
            f"{kernel}: output {k} has a dimension ({dim}) that depends on tensor values, not "
            "only on input shapes; the VM cannot size it before running the kernel "
            "(data-dependent shapes are supported only for the values an op names with "
            "defop(shape_data=...))")


def _producer_loads(e: PrimExpr) -> list[ProducerLoad]:
    return [n for n in tir_post_order(e) if isinstance(n, ProducerLoad)]


def _loads(cond: PrimExpr, buffers: dict[str, Buffer]) -> PrimExpr:
    """``cond`` with each read of an argument tensor as a read of its buffer, and each read
    of a computed stage (an inlined scalar constant, a cast) as the stage's body."""
    def fn(n: Any) -> Any:
        if not isinstance(n, ProducerLoad):
            return None
        op = n.producer.op
        if isinstance(op, te.ComputeOp) and not op.reduce_axis:
            body = op.body[n.producer.value_index]
            return substitute(body, {iv.var: i for iv, i in zip(op.axis, n.indices)})
        if op.name in buffers:
            return BufferLoad(buffers[op.name], n.indices, n.dtype)
        raise CompileError(f"shape function: a check reads {op.name}, which is not an "
                           "argument of the shape function")
    return rewrite(cond, fn)


def _size_binds(buffers: dict[str, Buffer], reads: dict[Var, tuple[str, int]],
                requirements: list[Any]) -> list[tuple[Var, PrimExpr]]:
    """``n = (int32) in_shapeK[d]`` for each size variable that the requirements read."""
    used = {id(v) for cond, _ in requirements for v in free_vars(cond)}
    return [(v, tir.cast(BufferLoad(buffers[ph], (IntImm("int32", d),), "int64"), v.dtype))
            for v, (ph, d) in reads.items() if id(v) in used]
