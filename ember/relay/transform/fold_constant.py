"""FoldConstant: evaluate every operator call whose inputs are all constants.

Calls are evaluated with the operator's numpy ``reference`` (the interpreter's oracle), and
the result is stored with exactly the dtype type inference gave the call. Also folded:

- ``shape_of(x)`` whenever ``x`` has a static shape, whatever ``x`` is;
- a field of a literal tuple, ``(a, b).1`` -> ``b``; an op returning a tuple of constants
  gives a Tuple of Constants, so its projections fold too;
- ``let %x = <constant>; body``: the constant replaces ``%x`` and the let goes.

Left alone, as in TVM: calls with no arguments (``zeros``/``ones``: folding them would turn a
tiny call into a huge constant), ops marked stateful (``OpDef.extra["stateful"]``), the
bodies of fused (``Primitive``) functions, and calls of functions rather than operators.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, Constant, Function, Let, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import FunctionPass, PassContext, register_pass
from ...ir.types import TensorType, TupleType, Type
from ...runtime.errors import InternalError, TVMError
from ...runtime.ndarray import array as nd_array
from ._helpers import PassMutator, infer, map_functions

__all__ = ["FoldConstant", "FoldConstantExpr", "fold_constant"]

# Ops whose folding would be wrong or useless even on constant inputs.
_NEVER_FOLD = frozenset({"annotation.stop_fusion"})


def _is_static_tensor(ty: Type | None) -> bool:
    return isinstance(ty, TensorType) and all(isinstance(d, int) for d in ty.shape)


def _is_const_arg(e: RelayExpr) -> bool:
    if isinstance(e, Tuple):
        return all(isinstance(f, Constant) for f in e.fields)
    return isinstance(e, Constant)


def _np_arg(e: RelayExpr) -> Any:
    if isinstance(e, Tuple):
        return tuple(f.data.numpy() for f in e.fields)  # type: ignore[attr-defined]
    return e.data.numpy()  # type: ignore[attr-defined]


def constant_of(value: Any, ty: TensorType, where: str) -> Constant:
    """A Constant holding ``value`` as exactly ``ty`` (dtype cast, shape checked)."""
    arr = np.asarray(value)
    if arr.dtype != np.dtype(ty.dtype):
        arr = arr.astype(ty.dtype)
    if tuple(arr.shape) != tuple(ty.shape):
        raise InternalError(f"FoldConstant: {where} gave shape {arr.shape}, but its type is "
                            f"{ty}; the op's numpy reference disagrees with its type relation")
    return Constant(nd_array(arr))


def _result(value: Any, ty: Type, where: str) -> RelayExpr | None:
    if isinstance(ty, TensorType):
        return constant_of(value, ty, where) if _is_static_tensor(ty) else None
    if isinstance(ty, TupleType) and isinstance(value, tuple) and len(value) == len(ty.fields):
        fields = [_result(v, t, where) for v, t in zip(value, ty.fields)]
        return None if any(f is None for f in fields) else Tuple(tuple(fields))  # type: ignore
    return None


class ConstantFolder(PassMutator):
    """The rewrite behind FoldConstant (usable on a typed expression)."""

    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        op = new.op
        if not isinstance(op, Op):
            return new
        if op.name == "shape_of":
            return self._shape_of(orig, new)
        if (not new.args or op.name in _NEVER_FOLD or op.op_def.extra.get("stateful")
                or op.op_def.reference is None or not all(map(_is_const_arg, new.args))):
            return new
        ty = orig.checked_type_
        if ty is None:
            return new
        try:
            value = op.op_def.reference(*map(_np_arg, new.args), attrs=new.attrs)
        except (InternalError, TVMError):
            raise
        except Exception as err:  # the error names the op; say that folding ran it
            raise TVMError(f"FoldConstant: evaluating {op.name} on constant inputs failed: "
                           f"{type(err).__name__}: {err}") from err
        out = _result(value, ty, op.name)
        return new if out is None else out

    def _shape_of(self, orig: Call, new: Call) -> RelayExpr:
        ty = new.args[0].checked_type_ or orig.args[0].checked_type_
        out_ty = orig.checked_type_
        if not _is_static_tensor(ty) or not isinstance(out_ty, TensorType):
            return new  # a dynamic shape is only known at run time
        return constant_of(np.array(ty.shape), out_ty, "shape_of")  # type: ignore[union-attr]

    def visit_tuple_getitem(self, orig: TupleGetItem) -> RelayExpr:
        new: TupleGetItem = super().visit_tuple_getitem(orig)
        if isinstance(new.tuple_value, Tuple):
            return new.tuple_value.fields[new.index]
        return new

    def visit_var(self, orig: Var) -> RelayExpr:
        value = self.let_value(orig)
        return value if isinstance(value, Constant) else orig

    def visit_let(self, orig: Let) -> RelayExpr:
        new: Let = super().visit_let(orig)
        return new.body if isinstance(new.value, Constant) else new


def fold_constant(expr: RelayExpr, mod: IRModule | None = None) -> RelayExpr:
    """Fold the constants of ``expr``; a typed copy is made first (against ``mod``) if it has
    no type."""
    if expr.checked_type_ is None:
        from .type_infer import infer_type

        expr = infer_type(expr, mod)
    return ConstantFolder().visit(expr)


FoldConstantExpr = fold_constant  # TVM's name: relay.transform.FoldConstantExpr(expr, mod)


@dataclass(frozen=True)
class FoldConstant(FunctionPass):
    """Evaluate constant subexpressions at compile time (see the module docstring).

    ``fold_qnn`` is accepted for TVM compatibility; ember has no QNN ops.
    """

    name: ClassVar[str] = "FoldConstant"
    opt_level: ClassVar[int] = 2
    fold_qnn: bool = False

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = infer(mod)
        out = map_functions(mod, lambda f: ConstantFolder().visit(f))  # type: ignore
        return infer(out)

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return ConstantFolder().visit(func)  # type: ignore[no-any-return]


register_pass("FoldConstant", FoldConstant)
