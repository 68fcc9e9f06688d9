"""DynamicToStatic: each ``dyn.*`` op whose shape-fixing values are known becomes its static op.

``dyn.reshape(%x, %s)`` becomes ``reshape(%x, newshape=...)`` when the value of ``%s`` is
known at compile time: a constant, or computed from constants and static shapes
(``shape_of`` of a tensor whose type is static is its shape, and the ops after it are
evaluated with their numpy references: ``take``, ``concatenate``, ``multiply``...). Only
those small integer subexpressions are evaluated (up to 2**16 elements each); nothing else
is folded (FoldConstant does that later).

A rewrite makes the types after it more precise (a ``?`` becomes a size), which can make the
values of later dyn ops known, so the pass repeats (InferType, rewrite) until nothing
changes, as TVM's does. It runs early in ``relay.optimize`` (before type-dependent folding),
so a model imported with symbolic axes and then given static shapes builds for every
executor; a dyn op left over needs the VM.

Values that the static op cannot take are refused here with the dyn op's message (a
reshape that loses elements, a zero stride); the few that the static ops do not express
(allowzero zeros in a reshape of a symbolic input, a one-hot depth of 0) stay dynamic.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, Constant, Function, Let, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...ir.visitor import ExprMutator, is_primitive, post_order
from ...runtime.errors import TVMError
from .. import op as _op
from ..op.dyn import algorithm as _dyn_algorithm
from ..op.dyn import image as _dyn_image
from ..op.dyn._common import label
from ..op.dyn.transform import resolve_newshape
from ._helpers import infer

__all__ = ["DynamicToStatic", "dynamic_ops"]

LIMIT = 1 << 16  # largest value (elements) evaluated to decide a shape
INT32_MAX = 2**31 - 1


def dynamic_ops(mod: IRModule) -> list[str]:
    """The names of the ``dyn.*`` ops called in ``mod`` (each once, in order)."""
    found: dict[str, None] = {}
    for func in mod.functions.values():
        if isinstance(func, Function):
            for e in post_order(func):
                if isinstance(e, Call) and isinstance(e.op, Op) and e.op.name.startswith("dyn."):
                    found[e.op.name] = None
    return list(found)


# ---------------------------------------------------------------- known values
def _numel(ty: Any) -> int | None:
    if isinstance(ty, TensorType) and ty.is_static:
        return int(np.prod(ty.concrete_shape, dtype=np.int64))
    return None


class _Known:
    """Values of small integer subexpressions computable at compile time (None otherwise),
    evaluated children first from an explicit stack and memoised."""

    def __init__(self, func: Function) -> None:
        self.lets = {e.var: e.value for e in post_order(func) if isinstance(e, Let)}
        self.memo: dict[int, Any] = {}

    def value(self, expr: RelayExpr) -> Any:
        stack: list[tuple[RelayExpr, bool]] = [(expr, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in self.memo:
                continue
            kids = self._inputs(e)
            if kids is None:
                self.memo[id(e)] = None
            elif not ready and any(id(k) not in self.memo for k in kids):
                stack.append((e, True))
                stack.extend((k, False) for k in kids if id(k) not in self.memo)
            else:
                self.memo[id(e)] = self._eval(e, [self.memo[id(k)] for k in kids])
        return self.memo[id(expr)]

    def _inputs(self, e: RelayExpr) -> list[RelayExpr] | None:
        """What ``e``'s value is computed from; None when it cannot be known."""
        if isinstance(e, Constant):
            return []
        if isinstance(e, Var):
            return [self.lets[e]] if e in self.lets else None
        if isinstance(e, Tuple):
            return list(e.fields)
        if isinstance(e, TupleGetItem):
            return [e.tuple_value]
        if not (isinstance(e, Call) and isinstance(e.op, Op)):
            return None
        od = e.op.op_def
        if od.reference is None or od.extra.get("stateful"):
            return None
        if e.op.name == "shape_of":
            return []
        size = _numel(e.checked_type_)
        return list(e.args) if size is not None and size <= LIMIT else None

    def _eval(self, e: RelayExpr, args: list[Any]) -> Any:
        if isinstance(e, Constant):
            return e.data.numpy()
        if isinstance(e, Var):
            return args[0]
        if any(a is None for a in args):
            return None
        if isinstance(e, Tuple):
            return tuple(args)
        if isinstance(e, TupleGetItem):
            return args[0][e.index] if isinstance(args[0], tuple) else None
        call: Call = e  # type: ignore[assignment]
        if call.op.name == "shape_of":  # type: ignore[union-attr]
            ty = call.args[0].checked_type_
            if not (isinstance(ty, TensorType) and ty.is_static):
                return None
            return np.array(ty.concrete_shape, dtype=call.checked_type.dtype)  # type: ignore
        try:
            return call.op.op_def.reference(*args, attrs=call.attrs)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001  (the op fails at run time with its own message)
            return None


# ---------------------------------------------------------------- the rewrites
def _ints(v: np.ndarray) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _clamped(v: np.ndarray) -> list[int]:
    """Slice bounds in the int32 range the static kernels index with (same slices)."""
    return [max(min(x, INT32_MAX), -INT32_MAX - 1) for x in _ints(v)]


def _reshape(call: Call, vals: list[Any]) -> RelayExpr | None:
    x, attrs, newshape = call.args[0], call.attrs, _ints(vals[1])
    ty = x.checked_type_
    if isinstance(ty, TensorType) and ty.is_static:
        shape = resolve_newshape(ty.concrete_shape, newshape, attrs.allowzero,  # type: ignore
                                 label("dyn.reshape", attrs))
        return _op.reshape(x, shape)
    if attrs.allowzero and 0 in newshape:  # type: ignore[union-attr]
        return None  # a literal 0 that reshape would read as "copy"
    return _op.reshape(x, newshape)


def _tile(call: Call, vals: list[Any]) -> RelayExpr:
    x, reps = call.args[0], _ints(vals[1])
    out = _op.tile(x, [max(r, 1) for r in reps])
    empty = [k + max(0, call.args[0].checked_type.ndim - len(reps))  # type: ignore[union-attr]
             for k, r in enumerate(reps) if r == 0]
    if empty:  # a repetition of 0: tile once, keep nothing of those axes
        out = _op.strided_slice(out, [0] * len(empty), [0] * len(empty), axes=empty)
    return out


def _strided_slice(call: Call, vals: list[Any]) -> RelayExpr:
    a = call.attrs
    return _op.strided_slice(call.args[0], _clamped(vals[1]), _clamped(vals[2]),
                             _clamped(vals[3]), a.axes, a.slice_mode)  # type: ignore[union-attr]


def _pad(call: Call, vals: list[Any]) -> RelayExpr:
    """Negative widths crop: pad by the positive part, then slice (the same elements)."""
    x, value = call.args[0], call.args[2]
    widths = np.asarray(vals[1], np.int64).reshape(-1, 2).tolist()
    out = _op.nn.pad(x, [(max(b, 0), max(e, 0)) for b, e in widths], value,
                     call.attrs.pad_mode)  # type: ignore[union-attr]
    if any(b < 0 or e < 0 for b, e in widths):
        out = _op.strided_slice(out, [max(-b, 0) for b, _ in widths],
                                [e if e < 0 else INT32_MAX for _, e in widths])
    return out


def _one_hot(call: Call, vals: list[Any]) -> RelayExpr | None:
    depth, a = _ints(vals[3])[0], call.attrs
    if depth <= 0:
        return None  # one_hot's depth is positive
    return _op.one_hot(*call.args[:3], depth, a.axis, a.dtype)  # type: ignore[union-attr]


def _topk(call: Call, vals: list[Any]) -> RelayExpr:
    attrs = _dyn_algorithm.static_attrs(call.attrs, _ints(vals[1])[0])  # type: ignore[arg-type]
    return Call(Op.get("topk"), (call.args[0],), attrs)


def _resize(call: Call, vals: list[Any]) -> RelayExpr:
    size = tuple(_ints(vals[1]))
    scales = tuple(float(s) for s in np.asarray(vals[2]).reshape(-1))
    attrs = _dyn_image.static_attrs(call.attrs, size, scales)  # type: ignore[arg-type]
    return Call(Op.get("image.resize2d"), (call.args[0],), attrs)


def _init(name: str) -> Callable[[Call, list[Any]], RelayExpr]:
    def rewrite(call: Call, vals: list[Any]) -> RelayExpr:
        dtype = call.attrs.dtype or "float32"  # type: ignore[union-attr]
        return getattr(_op, name)(_ints(vals[0]), dtype)
    return rewrite


Rewrite = Callable[[Call, list[Any]], "RelayExpr | None"]
# dyn op -> (the arguments whose values it needs, the rewrite given them)
REWRITES: dict[str, tuple[tuple[int, ...], Rewrite]] = {
    "dyn.reshape": ((1,), _reshape),
    "dyn.broadcast_to": ((1,), lambda c, v: _op.broadcast_to(c.args[0], _ints(v[1]))),
    "dyn.tile": ((1,), _tile),
    "dyn.strided_slice": ((1, 2, 3), _strided_slice),
    "dyn.full": ((1,), lambda c, v: _op.full(c.args[0], _ints(v[1]),
                                             c.attrs.dtype)),  # type: ignore[union-attr]
    "dyn.zeros": ((0,), _init("zeros")),
    "dyn.ones": ((0,), _init("ones")),
    "dyn.one_hot": ((3,), _one_hot),
    "dyn.topk": ((1,), _topk),
    "dyn.nn.pad": ((1,), _pad),
    "dyn.image.resize2d": ((1, 2), _resize),
    "dyn.squeeze": ((1,), lambda c, v: _op.squeeze(c.args[0], _ints(v[1]))),
    "dyn.expand_dims": ((1,), lambda c, v: _op.expand_dims(
        c.args[0], _ints(v[1])[0], c.attrs.num_newaxis)),  # type: ignore[union-attr]
}


class _ToStatic(ExprMutator):
    """One sweep over a typed function (fused functions left alone)."""

    def __init__(self, func: Function) -> None:
        super().__init__()
        self.known = _Known(func)
        self.changed = False

    def skip(self, expr: RelayExpr) -> bool:
        return is_primitive(expr)

    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        entry = REWRITES.get(orig.op.name) if isinstance(orig.op, Op) else None
        if entry is None:
            return new
        needed, rewrite = entry
        vals: list[Any] = [None] * len(orig.args)
        for i in needed:
            vals[i] = self.known.value(orig.args[i])
            if vals[i] is None:
                return new
        try:
            out = rewrite(new, vals)
        except TVMError as err:
            where = label(orig.op.name, orig.attrs)
            msg = str(err)
            raise type(err)(msg if where in msg else f"{where}: {msg}") from None
        if out is None:
            return new
        self.changed = True
        return out


def _candidates(mod: IRModule) -> list[str]:
    """The global functions a pass may rewrite (as FunctionPass picks them), by name."""
    return [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, Function)
            and not (f.get_attr("Primitive", 0) or f.get_attr("Compiler")
                     or f.get_attr("SkipOptimization", 0))]


@dataclass(frozen=True)
class DynamicToStatic(ModulePass):
    """Replace the ``dyn.*`` ops whose values are known by their static ops (see the module
    docstring). Runs at every opt_level: a graph or AOT build needs the static forms."""

    name: ClassVar[str] = "DynamicToStatic"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if not dynamic_ops(mod):
            return mod
        mod = infer(mod)
        for name in _candidates(mod):
            while True:  # each sweep may make more values known
                sweep = _ToStatic(mod[name])
                new = sweep.visit(mod[name])
                if not sweep.changed:
                    break
                mod = mod.copy()
                mod[name] = new
                mod = infer(mod)
        return mod


register_pass("DynamicToStatic", DynamicToStatic)
