"""Relay primitive function -> tensor expressions: placeholders for the parameters, each call's
compute rule in post order, the outputs (the te half of the TE compiler).

Dimensions that are ``?`` (``Any``) or shape variables become ``te.size_var``s, so the kernel
reads them from its arguments at run time; one ShapeVar is one size variable everywhere.
Scalar constants become inlined constant stages; larger constants are lifted into extra inputs
(``constants``) that the caller passes after the parameters.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ...ir.expr import Call, Constant, Function, Let, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.op import Op
from ...ir.printer import short_text
from ...ir.types import ShapeVar, TensorType, Type, map_tuple_leaves
from ...ir.visitor import post_order
from ...runtime.errors import InternalError, OpNotImplemented, TVMError, add_note
from ...te import tensor as te
from ...topi.layout_nchwc import copied_back_result
from ...tir import op as tir
from ...tir import expr as tir_expr
from ...tir.expr import IntImm, PrimExpr, StringImm
from ...tir.simplify import simplify
from ...tir.stmt import AssertStmt, LetStmt, PrimFunc, Stmt
from ..op._compute_common import Requirement, collect_requirements, tensor_types
from ..op._reg import resolve_attrs
from .name_transforms import to_c_identifier

Value = Any  # a te.Tensor, or a list of Values for a tuple


def flatten(v: Value) -> list[te.Tensor]:
    """The tensors of a value in field order (tuples as lists, possibly nested)."""
    out: list[te.Tensor] = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(reversed(x))
        else:
            out.append(x)
    return out


def _unflatten(ty: Type, flat: list[te.Tensor]) -> Value:
    """``flat`` (tensors in field order) shaped as a value of type ``ty``."""
    it = iter(flat)
    return map_tuple_leaves(ty, lambda t: next(it), list)


@dataclass
class TEGraph:
    """The te form of one primitive function."""

    inputs: list[te.Tensor]
    outputs: list[te.Tensor]
    constants: list[te.Tensor] = field(default_factory=list)
    constant_values: list[Any] = field(default_factory=list)
    op_names: list[str] = field(default_factory=list)
    # conditions on the ``?`` sizes that the kernel checks first (see op/_compute_common.require)
    requirements: list[Requirement] = field(default_factory=list)


class LowerToTE:
    """Walk one primitive function's body, calling each op's compute rule."""

    def __init__(self, func: Function) -> None:
        self.func = func
        self.memo: dict[int, Value] = {}
        self.size_vars: dict[int, te.Var] = {}
        self.used: set[str] = set()
        self.graph = TEGraph([], [])
        self.lets: dict[int, RelayExpr] = {}

    def _name(self, hint: str) -> str:
        base = to_c_identifier(hint or "p")
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def _dim(self, d: Any) -> Any:
        if isinstance(d, int):
            return d
        if not isinstance(d, ShapeVar):  # every ? is a size of its own
            return te.size_var(self._name("any_dim"))
        if id(d) not in self.size_vars:
            self.size_vars[id(d)] = te.size_var(self._name(d.name))
        return self.size_vars[id(d)]

    def _placeholder(self, ty: TensorType, hint: str) -> te.Tensor:
        return te.placeholder(tuple(self._dim(d) for d in ty.shape), ty.dtype, self._name(hint))

    def _param(self, p: Var) -> Value:
        ty = p.checked_type_ or p.type_annotation
        if ty is None:
            raise TVMError(f"te compiler: parameter %{p.name_hint} has no type")
        fields = tensor_types(ty)
        hints = [p.name_hint] if len(fields) == 1 else [f"{p.name_hint}_{i}"
                                                        for i in range(len(fields))]
        flat = [self._placeholder(f, h) for f, h in zip(fields, hints)]
        self.graph.inputs += flat
        return _unflatten(ty, list(flat))

    # -- the walk ---------------------------------------------------------------------------
    def run(self) -> TEGraph:
        for p in self.func.params:
            self.memo[id(p)] = self._param(p)
        for node in self._post_order(self.func.body):
            self.memo[id(node)] = self.visit(node)
        self.graph.outputs = flatten(self.memo[id(self.func.body)])
        return self.graph

    def _post_order(self, root: RelayExpr) -> list[RelayExpr]:
        # Only dataflow edges (not a Call's op), and a Let's value before its body reads the
        # bound var: _children gives that order and records the lets.
        return list(post_order(root, kids=self._children, done=self.memo))

    def _children(self, e: RelayExpr) -> tuple[RelayExpr, ...]:
        if isinstance(e, Call):
            return tuple(e.args)
        if isinstance(e, Tuple):
            return tuple(e.fields)
        if isinstance(e, TupleGetItem):
            return (e.tuple_value,)
        if isinstance(e, Let):
            self.lets[id(e.var)] = e.value
            return (e.value, e.body)
        return ()

    def visit(self, e: RelayExpr) -> Value:
        if isinstance(e, Var):
            if id(e) not in self.lets:
                raise TVMError(f"te compiler: free variable %{e.name_hint} in a primitive "
                               "function (only its parameters may be read)")
            return self.memo[id(self.lets[id(e)])]
        if isinstance(e, Constant):
            return self.constant(e)
        if isinstance(e, Tuple):
            return [self.memo[id(f)] for f in e.fields]
        if isinstance(e, TupleGetItem):
            return self.memo[id(e.tuple_value)][e.index]
        if isinstance(e, Let):
            return self.memo[id(e.body)]
        if isinstance(e, Call):
            return self.call(e)
        raise TVMError(f"te compiler: a primitive function cannot contain "
                       f"{type(e).__name__} ({short_text(e, self.func)})")

    def constant(self, c: Constant) -> Value:
        arr = c.data.numpy()
        dtype = str(arr.dtype)
        if arr.ndim == 0:
            v = tir.const(arr.item(), dtype)
            return te.compute((), lambda: v, name="compile_engine_const", tag="broadcast")
        t = te.placeholder(arr.shape, dtype, self._name(f"constant_{len(self.graph.constants)}"))
        self.graph.constants.append(t)
        self.graph.constant_values.append(c.data)
        return t

    def call(self, call: Call) -> Value:
        if not isinstance(call.op, Op):
            raise TVMError(f"te compiler: primitive functions call operators only, got "
                           f"{short_text(call, self.func)}")
        name = call.op.name
        op_def = call.op.op_def
        if op_def.compute is None:
            raise OpNotImplemented(f"{name}: operator has no compute rule, so it cannot be "
                                   "lowered to C")
        self.graph.op_names.append(name)
        inputs = [t for a in call.args for t in flatten(self.memo[id(a)])]
        out_type = call.checked_type
        attrs = resolve_attrs(name, op_def.attrs_type, call.attrs)
        try:
            with collect_requirements() as required:
                outs = list(op_def.compute(attrs, inputs, out_type))
        except (TVMError, ValueError, TypeError, IndexError, KeyError) as err:
            add_note(err, f"while lowering {short_text(call, self.func)}")
            raise
        shapes = ", ".join(_show_shape(t) for t in inputs)
        self.graph.requirements += [(c, f"{name}: {m} (argument shapes {shapes})")
                                    for c, m in required]
        types = tensor_types(out_type)
        if len(outs) != len(types):
            raise InternalError(f"{name}: the compute rule gave {len(outs)} tensors for type "
                                f"{out_type}")
        outs = [_check_output(name, t, ty) for t, ty in zip(outs, types)]
        return _unflatten(out_type, outs)


def _show_shape(t: te.Tensor) -> str:
    return "(" + ", ".join(str(d.value) if isinstance(d, IntImm) else "?" for d in t.shape) + ")"


def guard(prim: PrimFunc, requirements: list[Requirement],
          binds: list[tuple[tir_expr.Var, PrimExpr]] = ()) -> PrimFunc:
    """``prim`` checking ``requirements`` before its body runs (``binds`` first defines the
    size variables they read, for functions that get sizes as values, not from buffers)."""
    if not requirements:
        return prim
    body: Stmt = prim.body
    for cond, msg in reversed(requirements):
        cond = simplify(cond)  # once per call, but readable: ((n * 1) + 0) / 1 is n
        if not (isinstance(cond, IntImm) and cond.value):
            body = AssertStmt(cond, StringImm(msg), body)
    for var, value in reversed(list(binds)):
        body = LetStmt(var, value, body)
    return dataclasses.replace(prim, body=body)


def _check_output(op: str, t: te.Tensor, ty: TensorType) -> te.Tensor:
    """Cast to the type's dtype when a rule's natural dtype differs; shapes must agree."""
    if len(t.shape) != ty.ndim or any(
            isinstance(d, int) and isinstance(e, IntImm) and e.value != d
            for d, e in zip(ty.shape, t.shape)):
        raise InternalError(f"{op}: the compute rule gave shape {[str(d) for d in t.shape]} "
                            f"but the type is {ty}")
    if t.dtype != ty.dtype:
        src = t
        t = te.compute(src.shape, lambda *i: tir.cast(src(*i), ty.dtype), name="T_cast",
                       tag="elemwise")
    return t


def to_te(func: Function) -> TEGraph:
    """The te graph of primitive function ``func`` (which must carry its types)."""
    graph = LowerToTE(func).run()
    seen: set[int] = set()
    outs = []
    for t in graph.outputs:  # every output needs its own stage (not an input, not shared)
        t = copied_back_result(t) or t
        if isinstance(t.op, te.PlaceholderOp) or id(t) in seen:
            t = te.compute(t.shape, lambda *i, src=t: src(*i), name="T_copy", tag="elemwise")
        seen.add(id(t))
        outs.append(t)
    graph.outputs = outs
    return graph


__all__ = ["LowerToTE", "TEGraph", "flatten", "guard", "to_te"]
