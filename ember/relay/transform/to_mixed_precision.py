"""ToMixedPrecision: run as much of a float32 model as it is safe to in float16.

Each operator call is placed by its op's rule (``ember.relay.transform.mixed_precision`` has
the defaults and says how to override them): an ALWAYS op gets its float arguments cast to the
mixed type; a FOLLOW op does too when each of its float arguments already has the mixed type
or is a variable or constant (which cost one cast), and otherwise runs in float32; a NEVER
op, and any call of a function rather than an operator, gets its arguments cast back to
float32. When the op runs in the mixed type, an ``out_dtype`` attribute (conv2d, dense,
batch_matmul) or the ``dtype`` of zeros/ones/full is set to the rule's accumulation dtype, and
if that differs from the rule's output dtype the result is cast to the output dtype: by
default convolutions and dense layers accumulate in float32 and hand float16 on.

Casts are shared: a value is cast to a dtype once, and casting a cast back gives the original.
Only float32 and mixed-type values are ever cast (float64 or integer tensors stay as they are).
Function parameters keep their types; results come out in whatever type their last op ran
in, unless the config ``relay.ToMixedPrecision.keep_orig_output_dtype`` is True, which casts
each function's result back to its original types. Let-bound variables take their value's new
type. ``match`` (algebraic data types) is not supported, as in TVM.

``missing_op_mode``: ops with no rule are treated as FOLLOW; 0 raises an error naming them,
1 (default) warns once per op with its count, 2 is silent.
"""
from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.adt import Match
from ...ir.expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import FuncType, TensorType, TupleType, Type
from ...ir.visitor import ExprMutator, is_primitive
from ...runtime.errors import TVMError
from ..op.attrs import InitOpAttrs
from ..op.mixed_precision import get_mixed_precision_conversion
from . import mixed_precision
from ._helpers import infer

__all__ = ["ToMixedPrecision"]

KEEP_OUTPUT = "relay.ToMixedPrecision.keep_orig_output_dtype"
ALWAYS, FOLLOW, NEVER = (mixed_precision.MIXED_PRECISION_ALWAYS,
                         mixed_precision.MIXED_PRECISION_FOLLOW,
                         mixed_precision.MIXED_PRECISION_NEVER)
_FLOATS = ("float16", "bfloat16", "float32", "float64")


class _Converter(ExprMutator):
    """Children first: each node is rebuilt with its new type recorded in ``types``."""

    def __init__(self, mixed: str, missing: Counter[str]) -> None:
        super().__init__()
        self.mixed, self.missing = mixed, missing
        self.types: dict[int, tuple[RelayExpr, Type]] = {}
        self.casts: dict[tuple[int, str], RelayExpr] = {}

    # -- types of new nodes ---------------------------------------------------------------------
    def type_of(self, e: RelayExpr) -> Type:
        known = self.types.get(id(e))
        if known is not None:
            return known[1]
        ty = e.checked_type_ or (e.type_annotation if isinstance(e, Var) else None)
        if ty is None:
            raise TVMError(f"ToMixedPrecision: no type for {type(e).__name__} (internal)")
        return ty

    def typed(self, e: RelayExpr, ty: Type) -> RelayExpr:
        self.types[id(e)] = (e, ty)
        return e

    # -- casts -----------------------------------------------------------------------------------
    def cast(self, e: RelayExpr, want: str) -> RelayExpr:
        """``e`` in dtype ``want`` (tuples field by field); only float32/mixed values move."""
        ty = self.type_of(e)
        if isinstance(ty, TupleType):
            fields = [self.cast(self.typed(TupleGetItem(e, i), f), want)
                      for i, f in enumerate(ty.fields)]
            if all(isinstance(f, TupleGetItem) and f.tuple_value is e for f in fields):
                return e
            return self.typed(Tuple(tuple(fields)), TupleType([self.type_of(f) for f in fields]))
        if not isinstance(ty, TensorType) or ty.dtype == want:
            return e
        if ty.dtype not in ("float32", self.mixed) or want not in ("float32", self.mixed):
            return e
        key = (id(e), want)
        if key not in self.casts:
            out = self.typed(Call(Op.get("cast"), (e,), Op.get("cast").make_attrs(dtype=want)),
                             TensorType(ty.shape, want))
            self.casts[key] = out
            self.casts[(id(out), ty.dtype)] = e  # casting back gives the original
        return self.casts[key]

    def is_mixed(self, e: RelayExpr) -> bool:
        ty = self.type_of(e)
        if isinstance(ty, TupleType):
            return all(self._float_ok(f) for f in ty.fields)
        return self._float_ok(ty)

    def _float_ok(self, ty: Type) -> bool:
        if isinstance(ty, TupleType):
            return all(self._float_ok(f) for f in ty.fields)
        return not isinstance(ty, TensorType) or not ty.dtype.startswith(("float", "bfloat")) \
            or ty.dtype == self.mixed

    # -- nodes -----------------------------------------------------------------------------------
    def skip(self, expr: RelayExpr) -> bool:
        return is_primitive(expr)

    def visit_call(self, call: Call) -> RelayExpr:
        args = [self.visit(a) for a in call.args]
        op = call.op
        if not isinstance(op, Op):
            new_op = self.visit(op)
            return self._call_function(call, new_op, [self.cast(a, "float32") for a in args])
        category, acc, out = self._rule(call)
        if category == FOLLOW:
            compatible = all(self.is_mixed(a) or isinstance(a, (Var, Constant)) for a in args)
            category = ALWAYS if compatible else NEVER
        if category == ALWAYS:
            new_args = [self.cast(a, self.mixed) for a in args]
            attrs = _accumulate_in(call.attrs, acc)
        else:
            new_args, attrs = [self.cast(a, "float32") for a in args], call.attrs
        new = Call(op, tuple(new_args), attrs, span=call.span)
        self.typed(new, op.op_def.type_rel([self.type_of(a) for a in new_args], attrs))
        if category == ALWAYS and acc != out:
            return self.cast(new, out)
        return new

    def _rule(self, call: Call) -> tuple[int, str, str]:
        name = call.op.name  # type: ignore[union-attr]
        rule = get_mixed_precision_conversion(name)
        if rule is None:
            self.missing[name] += 1
            return FOLLOW, self.mixed, self.mixed
        got = list(rule(call, self.mixed))
        if len(got) != 3 or got[0] not in (0, 1, 2):
            raise TVMError(f"ToMixedPrecision: the mixed-precision rule of {name} returned "
                           f"{got!r}; expected [category (0, 1 or 2), accumulation_dtype, "
                           "output_dtype]")
        return int(got[0]), str(got[1]), str(got[2])

    def _call_function(self, call: Call, fn: RelayExpr, args: list[RelayExpr]) -> RelayExpr:
        new = Call(fn, tuple(args), call.attrs, call.type_args, span=call.span)
        known = self.types.get(id(fn))
        fty = known[1] if known is not None else fn.checked_type_
        ret = fty.ret_type if isinstance(fty, FuncType) else call.checked_type
        return self.typed(new, ret)

    def visit_var(self, var: Var) -> RelayExpr:
        value = self.let_value(var)
        if value is None:
            return var
        ty = self.type_of(value)
        return self.typed(Var(var.name_hint, ty, span=var.span), ty)

    def visit_let(self, let: Let) -> RelayExpr:
        new = self.visit(let.var), self.visit(let.value), self.visit(let.body)
        out = Let(*new, span=let.span)  # type: ignore[arg-type]
        return self.typed(out, self.type_of(new[2]))

    def visit_tuple(self, tup: Tuple) -> RelayExpr:
        fields = tuple(self.visit(f) for f in tup.fields)
        return self.typed(Tuple(fields, span=tup.span),
                          TupleType([self.type_of(f) for f in fields]))

    def visit_tuple_getitem(self, item: TupleGetItem) -> RelayExpr:
        value = self.visit(item.tuple_value)
        ty = self.type_of(value)
        return self.typed(TupleGetItem(value, item.index, span=item.span),
                          ty.fields[item.index])  # type: ignore[attr-defined]

    def visit_if(self, node: If) -> RelayExpr:
        cond, t, f = (self.visit(node.cond), self.visit(node.true_branch),
                      self.visit(node.false_branch))
        if not _same_type(self.type_of(t), self.type_of(f)):
            t, f = self.cast(t, "float32"), self.cast(f, "float32")
        return self.typed(If(cond, t, f, span=node.span), self.type_of(t))

    def visit_function(self, func: Function) -> RelayExpr:
        body = self.visit(func.body)
        new = Function(func.params, body, None, func.type_params, func.attrs, span=func.span)
        return self.typed(new, FuncType([self.type_of(p) for p in func.params],
                                        self.type_of(body)))

    def visit_match(self, match: Match) -> RelayExpr:
        raise TVMError("ToMixedPrecision: match expressions (algebraic data types) are not "
                       "supported")


def _same_type(a: Type, b: Type) -> bool:
    from ...ir.structural import structural_equal

    return structural_equal(a, b)


def _accumulate_in(attrs: Any, acc: str) -> Any:
    """Attrs with the accumulation dtype written where the op reads it."""
    if attrs is None:
        return attrs
    if hasattr(attrs, "out_dtype") and (attrs.out_dtype == "" or
                                        attrs.out_dtype.startswith(("float", "bfloat"))):
        return dataclasses.replace(attrs, out_dtype=acc)
    if isinstance(attrs, InitOpAttrs) and (attrs.dtype == "" or attrs.dtype.startswith("float")):
        return dataclasses.replace(attrs, dtype=acc)
    return attrs


@dataclass(frozen=True)
class ToMixedPrecision(ModulePass):
    """Rewrite a float32 module to run in ``mixed_precision_type`` where safe (module
    docstring)."""

    name: ClassVar[str] = "ToMixedPrecision"
    opt_level: ClassVar[int] = 0
    mixed_precision_type: str = "float16"
    missing_op_mode: int = 1

    def __post_init__(self) -> None:
        if self.mixed_precision_type not in _FLOATS:
            raise ValueError(f"ToMixedPrecision: mixed_precision_type must be a floating-point "
                             f"dtype ({', '.join(_FLOATS)}), got {self.mixed_precision_type!r}")
        if self.missing_op_mode not in (0, 1, 2) or isinstance(self.missing_op_mode, bool):
            raise ValueError(f"ToMixedPrecision: missing_op_mode must be 0, 1 or 2, got "
                             f"{self.missing_op_mode!r}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = infer(mod)
        keep = bool(ctx.config.get(KEEP_OUTPUT, False))
        missing: Counter[str] = Counter()
        out = mod.copy()
        for gv, func in mod.functions.items():
            if not isinstance(func, Function) or is_primitive(func) or func.get_attr("Compiler"):
                continue
            conv = _Converter(self.mixed_precision_type, missing)
            body = conv.visit(func.body)
            if keep:
                body = _cast_like(conv, body, func.body.checked_type)
            out.add(gv, Function(func.params, body, None, func.type_params, func.attrs,
                                 span=func.span))
        self._report(missing)
        return infer(out)

    def _report(self, missing: Counter[str]) -> None:
        if not missing or self.missing_op_mode == 2:
            return
        listing = ", ".join(f"{op} ({n}x)" for op, n in sorted(missing.items()))
        if self.missing_op_mode == 0:
            raise TVMError(f"ToMixedPrecision: ops without a mixed-precision rule: {listing}; "
                           "register one with register_mixed_precision_conversion or use "
                           "missing_op_mode=1")
        for op, n in sorted(missing.items()):
            warnings.warn(f"ToMixedPrecision: op {op} has no mixed-precision rule "
                          f"(FTVMMixedPrecisionConversionType); it appears {n} time(s) and "
                          "is treated as FOLLOW", stacklevel=3)


def _cast_like(conv: _Converter, e: RelayExpr, ty: Type) -> RelayExpr:
    """``e`` cast back to the original type ``ty`` (field by field for tuples)."""
    if isinstance(ty, TupleType):
        now: TupleType = conv.type_of(e)  # type: ignore[assignment]
        fields = [_cast_like(conv, conv.typed(TupleGetItem(e, i), t), f)
                  for i, (t, f) in enumerate(zip(now.fields, ty.fields))]
        return Tuple(tuple(fields))
    if isinstance(ty, TensorType):
        return conv.cast(e, ty.dtype)
    return e


register_pass("ToMixedPrecision", ToMixedPrecision)
