"""ManifestAlloc: make every allocation explicit, and share storage where lifetimes allow.

Input: a typed module in A-normal form whose kernels are fused primitive functions in call
position (ToANormalForm + InlinePrimitives). Each ``let %x = %prim(%a, %b)`` becomes
destination-passing code over the VM ops of ``_ops.py``::

    let %x = memory.alloc_tensor(%arena, offset=256, shape=[1, 64], dtype="float32");
    let %_ = vm.invoke_tvm_op(%prim, (%a, %b), (%x));

An output whose type has a ``?`` dimension gets its shape at run time from the primitive
function's shape function (``shape_func.py``), which also returns its size in bytes::

    let %s0 = vm.shape_of(%a);                    # one per input with a ? dimension
                                                  # (and the input itself where its value
                                                  # sizes the output: dyn.reshape's newshape)
    let %_ = vm.shape_func(%prim, (%s0), (%shape, %nbytes));
    let %st = memory.alloc_storage(%nbytes);
    let %x = memory.alloc_tensor_reg(%st, %shape, dtype="float32");

A fused function that is only ``concatenate`` of tensors along an axis whose preceding axes
have extent 1 (each input one contiguous byte range of the output) makes no call when the
output and its inputs are static tensors of the scope's arena (below): each input is
allocated at its offset in the output, so its producer writes it there (``_place_concats``;
the PassContext option ``relay.backend.concat_in_place`` off keeps the copy). Where the sizes
are known only at run time the call stays, and the compiler lists the kernel
(``run_time_concat_order``, ``Program.concat_kernels``): a VM plan, which knows every size
once its shape phase ran, then drops the call and places the parts itself
(``runtime/vm/plan_concat.py``); the interpreter copies.

A fused function of reshapes only (FuseOps marks it ``relay.reshape_only``) becomes a view of
its input, ``vm.reshape_tensor(%a, %newshape)``, with no kernel and no copy; the input is then
treated as escaping (a view must not outlive the bytes it looks at). A ``dyn.reshape`` whose
target is a run-time value is a view too: its shape function computes ``%newshape``.

A fused function that is ``shape_of`` alone (int64) becomes ``vm.shape_of`` of its input: no
kernel reads the tensor's bytes for its shape. The small integer tensors that kernels compute
from such shapes and constants alone (``take`` of a dimension, arithmetic, ``concatenate`` into a
reshape target, a slice's ends) are placed like shape-function results (below): a VM plan then
computes them in its shape phase, from the arguments' shapes, with the shape functions that
read their values.

Storage planning, per *scope* (a function body, an ``if`` branch, a ``match`` clause): a static
tensor that never leaves the scope (it is only read by kernels, shape functions, allocation
ops or as an ``if`` condition) lives in one arena allocated when the scope starts, at an offset
chosen first-fit over the lifetimes (position of its allocation .. position of its last
reader), so tensors that are never live together share bytes. The results of shape functions
(the int64 shapes and sizes above) get a second arena of the scope, each its own bytes for the
whole scope: a tensor of symbolic shape reads its shape there for as long as it lives, and a
VM plan runs all shape functions first, into memory no kernel writes. A tensor that escapes (returned,
put in a tuple or ADT, passed to a function, captured by a closure) gets a storage block of
its own, so nothing the caller keeps aliases memory that is reused. The VM's pooled allocator
recycles whole blocks between runs, so a model in steady state allocates nothing.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ....ir.adt import Clause, Match, PatternVar
from ....ir.expr import (Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var,
                         const)
from ....ir.module import IRModule
from ....ir.trampoline import Step, run
from ....ir.transform import ModulePass, PassContext
from ....ir.types import TensorType, TupleType, Type, map_tuple_leaves
from ....ir.visitor import children, is_primitive
from ....runtime.dtype import DataType
from ....runtime.errors import InternalError, TVMError
from . import _ops
from .shape_func import DATA, shape_func_args

_PENDING = Call(_ops.ALLOC_TENSOR, ())  # placeholder value of a static allocation


@dataclass(eq=False)
class _Alloc:
    var: Var
    index: int
    shape: tuple[int, ...] | None  # None: a dynamic tensor in its own ``storage``
    dtype: str
    last: int = -1
    escapes: bool = False
    storage: Var | None = None
    shape_var: Var | None = None  # a dynamic tensor's shape (a static allocation)
    view: bool = False  # a reshape view (vm.reshape_tensor), tracked for its shape's sake
    pinned: bool = False  # a shape function's result: lives to the end of the scope
    # the output of a concatenation its producers may write in place (_place_concats): its
    # inputs in output order, and the binding of its kernel call (dropped if placed)
    concat: tuple[list[RelayExpr], int] | None = None

    @property
    def nbytes(self) -> int:
        assert self.shape is not None, "a dynamic tensor has no static size"
        return int(np.prod(self.shape, dtype=np.int64)) * DataType(self.dtype).numpy_dtype.itemsize


def flat_types(ty: Type, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...],
                                                                       TensorType]]:
    """(tuple-field path, tensor type) of every tensor in a possibly nested tuple type."""
    stack = [(ty, path)]
    while stack:
        t, p = stack.pop()
        if isinstance(t, TupleType):
            stack.extend((f, p + (i,)) for i, f in reversed(list(enumerate(t.fields))))
        elif isinstance(t, TensorType):
            yield p, t
        else:
            raise TVMError(f"ManifestAlloc: a fused function takes or returns tensors and "
                           f"tuples only, got {t}")


def is_prim_call(e: RelayExpr) -> bool:
    return isinstance(e, Call) and is_primitive(e.op)


def _type_of(e: RelayExpr) -> Type | None:
    return e.checked_type_ if e.checked_type_ is not None else getattr(e, "type_annotation", None)


def _ret_type(call: Call) -> Type:
    ty = call.checked_type_
    prim: Any = call.op
    if ty is None and prim.checked_type_ is not None:
        ty = prim.checked_type_.ret_type
    if ty is None:
        ty = prim.ret_type
    if ty is None:
        raise InternalError("ManifestAlloc: a call of a fused function has no type; the VM "
                            "compiler runs InferType before this pass")
    return ty


def _restructure(ty: Type, flat: list[Var]) -> RelayExpr:
    it = iter(flat)
    out: RelayExpr = map_tuple_leaves(ty, lambda t: next(it), lambda items: Tuple(tuple(items)))
    return out


class _Manifest:
    """Rewrites one global function, scope by scope (nested scopes through the trampoline:
    ifs and closures may nest deeply)."""

    def __init__(self) -> None:
        self.count = 0
        # id -> (rewritten if/match/closure, its reads of variables bound outside it): a scope
        # reads a nested one through this summary instead of walking it again, so planning
        # nested scopes is linear in the program, not in depth times size.
        self.summaries: Summaries = {}
        # values computed from shapes and constants alone (vm.shape_of, then small integer
        # kernels over them: Gather, Concat, arithmetic): pinned like shape-function results,
        # so a VM plan computes them in its shape phase, before the kernels that they size
        self.derived: set[Var] = set()

    def fresh(self, hint: str, ty: Type | None = None) -> Var:
        self.count += 1
        return Var(f"{hint}{self.count}", ty)

    def function(self, func: Function) -> Function:
        return dataclasses.replace(func, body=run(self.scope(func.body)))

    def nested(self, e: RelayExpr) -> Step[RelayExpr]:
        if isinstance(e, If):
            then = yield self.scope(e.true_branch)
            other = yield self.scope(e.false_branch)
            return self.summarise(dataclasses.replace(e, true_branch=then, false_branch=other))
        if isinstance(e, Match):
            clauses = []
            for c in e.clauses:
                clauses.append(Clause(c.lhs, (yield self.scope(c.rhs))))
            return self.summarise(dataclasses.replace(e, clauses=tuple(clauses)))
        if isinstance(e, Function) and not is_primitive(e):
            return self.summarise(dataclasses.replace(e, body=(yield self.scope(e.body))))
        return e

    def summarise(self, e: RelayExpr) -> RelayExpr:
        """Keep what nested scope ``e`` reads of the variables bound outside it."""
        found: dict[Var, bool] = {}
        for var, benign in reads(e, self.summaries):
            found[var] = found.get(var, True) and benign
        for var in _binders(e, self.summaries):
            found.pop(var, None)
        self.summaries[id(e)] = (e, found)
        return e

    def scope(self, expr: RelayExpr) -> Step[RelayExpr]:
        bindings: list[tuple[Var, RelayExpr]] = []
        allocs: list[_Alloc] = []
        e = expr
        while isinstance(e, Let):
            value = yield self.nested(e.value)
            if is_prim_call(value):
                self.expand(e.var, value, bindings, allocs)  # type: ignore[arg-type]
            else:
                if self.is_derived(value):
                    self.derived.add(e.var)
                bindings.append((e.var, value))
            e = e.body
        result = yield self.nested(e)
        if is_prim_call(result):
            var = self.fresh("ret")
            self.expand(var, result, bindings, allocs)  # type: ignore[arg-type]
            result = var
        for var, value in reversed(plan(bindings, result, allocs, self)):
            result = Let(var, value, result)
        return result

    def is_derived(self, e: RelayExpr) -> bool:
        """Whether ``e`` is computed from shapes and constants alone (see ``derived``): a
        constant, such a variable, a field of one, or a flat tuple of those."""
        items = e.fields if isinstance(e, Tuple) else (e,)
        for item in items:
            if isinstance(item, TupleGetItem):
                item = item.tuple_value
            if not (isinstance(item, Constant) or isinstance(item, Var) and item in self.derived):
                return False
        return True

    def static(self, var: Var, ty: TensorType, bindings: list[tuple[Var, RelayExpr]],
               allocs: list[_Alloc], pinned: bool = False) -> Var:
        bindings.append((var, _PENDING))
        allocs.append(_Alloc(var, len(bindings) - 1, ty.concrete_shape, ty.dtype, pinned=pinned))
        return var

    def expand(self, var: Var, call: Call, bindings: list[tuple[Var, RelayExpr]],
               allocs: list[_Alloc]) -> None:
        prim: Any = call.op
        ret = _ret_type(call)
        if _shape_of_only(prim, ret, call):
            # vm.shape_of reads the argument's shape, not its bytes: a VM plan then computes
            # what is derived from it (Shape -> Gather -> a slice's ends) in its shape phase
            # instead of running kernels on the data between the model's kernels.
            bindings.append((var, _ops.shape_of(call.args[0])))
            self.derived.add(var)
            return
        outs = [t for _, t in flat_types(ret)]
        derived = all(self.is_derived(a) for a in call.args) and \
            all(_small_integer(t) for t in outs)
        single = isinstance(ret, TensorType)
        shapes: dict[int, tuple[Var, Var]] = {}
        if any(not t.is_static for t in outs):
            in_shapes: list[RelayExpr] = []
            for i, k, kind in shape_func_args(prim):
                arg = call.args[i]
                if kind == DATA:  # the shape function reads this argument's value
                    in_shapes.append(arg)
                    continue
                path = list(flat_types(_type_of(prim.params[i]) or _type_of(arg)))[k][0]
                target = arg
                for j in path:
                    target = TupleGetItem(target, j)
                sv = self.fresh("in_shape")
                bindings.append((sv, _ops.shape_of(target)))
                in_shapes.append(sv)
            results: list[RelayExpr] = []
            for k, t in enumerate(outs):
                if not t.is_static:
                    s = self.static(self.fresh("shape"), TensorType((t.ndim,), "int64"),
                                    bindings, allocs, pinned=True)
                    n = self.static(self.fresh("nbytes"), TensorType((), "int64"), bindings,
                                    allocs, pinned=True)
                    shapes[k] = (s, n)
                    results += [s, n]
            bindings.append((self.fresh("_"), _ops.shape_func(prim, in_shapes, results)))
        source = _view_source(prim, ret, call)
        if source is not None and (shapes or len(call.args) == 1):
            shape: RelayExpr = (shapes[0][0] if shapes else
                                const(np.array(outs[0].concrete_shape, dtype="int64")))
            bindings.append((var, _ops.reshape_tensor(source, shape)))
            if derived and not shapes:
                self.derived.add(var)  # (a view of derived bytes)
            if shapes:
                allocs.append(_Alloc(var, len(bindings) - 1, None, outs[0].dtype,
                                     shape_var=shapes[0][0], view=True))
            return
        out_vars: list[RelayExpr] = []
        for k, t in enumerate(outs):
            v = var if single else self.fresh(f"{var.name_hint}_", t)
            if k in shapes:
                st = self.fresh("storage")
                bindings.append((st, _ops.alloc_storage(shapes[k][1], t.dtype)))
                bindings.append((v, _ops.alloc_tensor_reg(st, shapes[k][0], t.dtype)))
                allocs.append(_Alloc(v, len(bindings) - 1, None, t.dtype, storage=st,
                                     shape_var=shapes[k][0]))
            else:
                self.static(v, t, bindings, allocs, pinned=derived)
                if derived:
                    self.derived.add(v)
            out_vars.append(v)
        bindings.append((self.fresh("_"), _ops.invoke_tvm_op(prim, list(call.args), out_vars)))
        parts = _concat_parts(prim, call, ret) if single and not shapes and not derived else None
        if parts is not None:
            allocs[-1].concat = (parts, len(bindings) - 1)
        if not single:
            bindings.append((var, _restructure(ret, list(out_vars))))  # type: ignore[arg-type]


def _concat_parts(prim: Any, call: Call, ret: Type) -> list[RelayExpr] | None:
    """The arguments of a call of a fused function that is only ``concatenate`` of its params
    (each once) along an axis whose preceding axes have extent 1, in output order: each is
    then one contiguous byte range of the output; else None."""
    from .._in_place import concat_fields
    from .._liveness import CONCAT_IN_PLACE_CONFIG

    if not PassContext.current().config.get(CONCAT_IN_PLACE_CONFIG, True):
        return None
    spec = concat_fields(prim)
    if spec is None or not isinstance(ret, TensorType) or not ret.is_static:
        return None
    fields, axis = spec
    shape = ret.concrete_shape
    axis = axis + len(shape) if axis < 0 else axis
    whole = [_nbytes_of(prim.params[k].checked_type_) for k, _, _ in fields]
    # whole params only: a slice of one (yolov8's C2f) would need an offset view of it
    order = [k for (k, offset, nbytes), n in zip(fields, whole, strict=True)
             if offset == 0 and nbytes == n]
    if (len(order) != len(fields) or len(set(order)) != len(order)
            or any(d != 1 for d in shape[:axis])):
        return None
    return [call.args[k] for k in order]


def run_time_concat_order(prim: Any) -> tuple[int, ...] | None:
    """For a fused function that is only ``concatenate`` of its params (each once, all of
    them) along an axis whose preceding axes have extent 1, of a shape known only at run time:
    the params' indices in output order, each then one contiguous byte range of the output at
    the offset of the earlier ones' bytes. A VM plan drops such a call and has the producers
    write the parts in place once their sizes are known (``runtime/vm/plan_concat.py``); the
    call stays in the code, so the interpreter still copies. None otherwise, and when the
    PassContext option ``relay.backend.concat_in_place`` is off."""
    from .._liveness import CONCAT_IN_PLACE_CONFIG

    if not PassContext.current().config.get(CONCAT_IN_PLACE_CONFIG, True):
        return None
    body = getattr(prim, "body", None)
    if not (isinstance(body, Call) and getattr(body.op, "name", None) == "concatenate"
            and isinstance(body.args[0], Tuple)):
        return None
    ret = body.checked_type_
    index = {id(p): k for k, p in enumerate(prim.params)}
    order = tuple(index.get(id(f), -1) for f in body.args[0].fields)
    if (not isinstance(ret, TensorType) or ret.is_static or sorted(order) !=
            list(range(len(prim.params))) or DataType(ret.dtype).lanes != 1
            or DataType(ret.dtype).bits % 8):
        return None
    axis = int(body.attrs.axis)
    axis = axis + len(ret.shape) if axis < 0 else axis
    if not 0 <= axis < len(ret.shape) or any(d != 1 for d in ret.shape[:axis]):
        return None
    return order


def _nbytes_of(ty: Type | None) -> int | None:
    if not isinstance(ty, TensorType) or not ty.is_static:
        return None
    return int(np.prod(ty.concrete_shape, dtype=np.int64)) * DataType(ty.dtype).numpy_dtype.itemsize


def _place_concats(allocs: list[_Alloc], by_var: dict[Var, _Alloc]
                   ) -> tuple[dict[Var, tuple[_Alloc, int]], set[int]]:
    """Concatenations whose inputs their producers write in place: part -> (the output's
    alloc, byte offset in it), and the kernel calls to drop. The output and every part are
    static tensors of this scope's arena (not escaping, not shape results, not views);
    a part is a distinct, single tensor used by no other placed concatenation. The output's
    bytes are then live from its first part's allocation to the last read of any part."""
    moved: dict[Var, tuple[_Alloc, int]] = {}
    dropped: set[int] = set()

    for out in allocs:
        if out.concat is None or out.escapes or out.pinned:
            continue
        args, invoke = out.concat
        parts = [by_var.get(v) if isinstance(v, Var) else None for v in args]
        if (any(p is None or p.var in moved or p.shape is None or p.escapes or p.pinned
                or p.view or p.concat is not None or p.dtype != out.dtype
                or p.index > out.index for p in parts)
                or len({id(p) for p in parts}) != len(parts)):
            continue
        at = 0
        for p in parts:
            moved[p.var] = (out, at)  # type: ignore[union-attr]
            at += p.nbytes  # type: ignore[union-attr]
        out.index = min(p.index for p in parts)  # type: ignore[union-attr]
        out.last = max([out.last] + [p.last for p in parts])  # type: ignore[union-attr]
        dropped.add(invoke)
    return moved, dropped


def _small_integer(ty: TensorType) -> bool:
    """A static integer tensor of at most 64 items: a shape, a size, a slice's ends."""
    return ty.is_static and DataType(ty.dtype).numpy_dtype.kind in "iu" and \
        int(np.prod(ty.concrete_shape, dtype=np.int64)) <= 64


def _shape_of_only(prim: Any, ret: Type, call: Call) -> bool:
    """Whether ``prim`` is ``shape_of`` of its one tensor parameter, as int64 (the dtype of
    ``vm.shape_of``)."""
    body = prim.body
    return (isinstance(body, Call) and getattr(body.op, "name", None) == "shape_of"
            and len(call.args) == 1 and len(prim.params) == 1 and body.args[0] is prim.params[0]
            and isinstance(ret, TensorType) and ret.dtype == "int64"
            and isinstance(_type_of(call.args[0]), TensorType))


def _view_source(prim: Any, ret: Type, call: Call) -> RelayExpr | None:
    """The argument that a ``relay.reshape_only`` call is a view of: the parameter its chain
    of reshapes starts from (first operands). Other parameters only size the result (a
    ``dyn.reshape`` target, a ``reshape_like`` template), which the shape function reads."""
    if not int(prim.get_attr("relay.reshape_only", 0) or 0) or not isinstance(ret, TensorType):
        return None
    node = prim.body
    while isinstance(node, Call) and not isinstance(node.op, Function):
        node = node.args[0]
    index = next((i for i, p in enumerate(prim.params) if p is node), None)
    if index is None:
        return None
    source = call.args[index]
    return source if isinstance(_type_of(source), TensorType) else None


_BENIGN_ARGS = {_ops.RESHAPE_TENSOR: (1,), _ops.SHAPE_OF: (0,), _ops.ALLOC_STORAGE: (0,),
                _ops.ALLOC_TENSOR_REG: (1,), _ops.KILL: (0,)}


def _push(stack: list[tuple[RelayExpr, bool]], e: RelayExpr, captured: bool) -> None:
    # A benign read of a variable is marked by wrapping it in a _Benign.
    if isinstance(e, Var) and not captured:
        stack.append((_Benign(e), False))  # type: ignore[arg-type]
    else:
        stack.append((e, captured))


class _Benign:
    __slots__ = ("var",)

    def __init__(self, var: Var) -> None:
        self.var = var


Summaries = dict[int, tuple[RelayExpr, dict[Var, bool]]]


def reads(expr: RelayExpr, summaries: Summaries | None = None
          ) -> Iterator[tuple[Var, bool]]:
    """(variable, benign) for every variable read in ``expr``. A benign read cannot make the
    value outlive the scope: kernel and shape-function operands, allocation sizes and shapes,
    ``if`` conditions. Every read inside a closure is an escape (the value is captured). A
    nested scope with an entry in ``summaries`` is read from it (what it binds itself is not
    read outside it)."""
    stack: list[Any] = [(expr, False)]
    while stack:
        e, captured = stack.pop()
        known = summaries.get(id(e)) if summaries else None
        if known is not None and known[0] is e:
            for var, benign in known[1].items():
                yield var, benign and not captured
        elif isinstance(e, _Benign):
            yield e.var, True
        elif isinstance(e, Var):
            yield e, False
        elif isinstance(e, Function):
            if not is_primitive(e):
                stack.append((e.body, True))
        elif not captured and isinstance(e, Call) and e.op in (_ops.INVOKE_TVM_OP,
                                                               _ops.SHAPE_FUNC):
            for tup in e.args[1:]:
                for f in tup.fields:  # type: ignore[attr-defined]
                    _push(stack, f, captured)
        elif not captured and isinstance(e, Call) and e.op in _BENIGN_ARGS:
            benign = _BENIGN_ARGS[e.op]
            for i, a in enumerate(e.args):
                if i in benign:
                    _push(stack, a, captured)
                else:
                    stack.append((a, captured))
        elif not captured and isinstance(e, If):
            _push(stack, e.cond, captured)
            stack += [(e.true_branch, captured), (e.false_branch, captured)]
        else:
            stack += [(c, captured) for c in children(e)]


def _binders(expr: RelayExpr, summaries: Summaries) -> Iterator[Var]:
    """The variables bound in ``expr`` (lets, closure parameters, match patterns), outside
    the nested scopes that have a summary."""
    stack: list[Any] = [expr]
    while stack:
        e = stack.pop()
        known = summaries.get(id(e)) if e is not expr else None
        if known is not None and known[0] is e:
            continue
        if isinstance(e, Let):
            yield e.var
        elif isinstance(e, Function):
            yield from e.params
        elif isinstance(e, Match):
            pats = [c.lhs for c in e.clauses]
            while pats:
                p = pats.pop()
                if isinstance(p, PatternVar):
                    yield p.var
                pats.extend(getattr(p, "patterns", ()))
        stack.extend(children(e))


def first_fit(allocs: list[_Alloc]) -> tuple[dict[Var, int], int]:
    """Offsets (multiples of the alignment) such that tensors live at the same time never
    overlap; and the arena size."""
    align = _ops.ALIGNMENT
    placed: list[tuple[int, int, int]] = []  # (offset, size, last)
    offsets: dict[Var, int] = {}
    for a in sorted(allocs, key=lambda a: a.index):
        size = -(-max(a.nbytes, 1) // align) * align
        off = 0
        for o, s, _ in sorted(p for p in placed if p[2] >= a.index):
            if off + size <= o:
                break
            off = max(off, o + s)
        placed.append((off, size, a.last))
        offsets[a.var] = off
    return offsets, max((o + s for o, s, _ in placed), default=0)


def plan(bindings: list[tuple[Var, RelayExpr]], result: RelayExpr, allocs: list[_Alloc],
         names: _Manifest) -> list[tuple[Var, RelayExpr]]:
    """Replace the pending static allocations of one scope by arena or own-storage ones."""
    if not allocs:
        return bindings
    by_var = {a.var: a for a in allocs}
    pending = {a.var for a in allocs if a.shape is not None}  # (views are bound already)
    values = [(i, value) for i, (v, value) in enumerate(bindings) if v not in pending]
    for i, value in values + [(len(bindings), result)]:
        for var, benign in reads(value, names.summaries):
            a = by_var.get(var)
            if a is not None:
                a.last = max(a.last, i)
                a.escapes = a.escapes or not benign
    for a in allocs:
        a.last = max(a.last, a.index)
    # A dynamic tensor's (or view's) shape lives as long as the tensor: a VM plan points the
    # tensor's DLTensor shape at it (static_plan.py), so its bytes must not be reused before.
    for a in allocs:
        if a.shape_var is not None and a.shape_var in by_var:
            held = by_var[a.shape_var]
            held.last = max(held.last, a.last)
            held.escapes = held.escapes or a.escapes
    # A shape function's results live to the end of the scope, in an arena of their own: no
    # two share bytes and no kernel writes there, so a VM plan may run every shape function
    # first, as one native call, instead of keeping them between the kernels in program order.
    for a in allocs:
        if a.pinned:
            a.last = len(bindings)
    moved, dropped = _place_concats(allocs, by_var)
    local = [a for a in allocs if not a.escapes and a.shape is not None and a.var not in moved]
    # A dynamic tensor that stays in the scope: clear its registers after its last reader,
    # so its storage returns to the pool before the scope ends (loops, long chains).
    kills: dict[int, list[Var]] = {}
    for a in allocs:
        if a.shape is None and not a.view and not a.escapes and a.last < len(bindings):
            kills.setdefault(a.last, []).extend([a.var, a.storage])  # type: ignore[list-item]
    out: list[tuple[Var, RelayExpr]] = []
    place: dict[Var, tuple[Var, int]] = {}  # tensor -> (its arena, offset)
    for pinned, hint in ((False, "arena"), (True, "shapes")):
        group = [a for a in local if a.pinned == pinned]
        arena = names.fresh(hint)
        if group:
            offsets, total = first_fit(group)
            out.append((arena, _ops.alloc_storage(const(total, "int64"))))
            place.update((a.var, (arena, offsets[a.var])) for a in group)
    for var, (concat, at) in moved.items():  # in place: at its offset in the output
        arena, offset = place[concat.var]
        place[var] = (arena, offset + at)
    for i, (var, value) in enumerate(bindings):
        if i in dropped:
            continue
        if value is not _PENDING:
            out.append((var, value))
            out += [(names.fresh("_"), _ops.kill(v)) for v in kills.get(i, ())]
            continue
        a = by_var[var]
        if a.escapes:
            st = names.fresh("storage")
            out.append((st, _ops.alloc_storage(const(a.nbytes, "int64"), a.dtype)))
            out.append((var, _ops.alloc_tensor(st, 0, a.shape or (), a.dtype)))
        else:
            arena, offset = place[var]
            out.append((var, _ops.alloc_tensor(arena, offset, a.shape or (), a.dtype)))
    return out


@dataclass(frozen=True)
class ManifestAlloc(ModulePass):
    """Explicit allocation and destination-passing kernel calls (see the module doc)."""

    name: ClassVar[str] = "ManifestAlloc"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and not is_primitive(func):
                out.add(gv, _Manifest().function(func))
        return out
