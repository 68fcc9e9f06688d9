"""SimplifyInference: rewrite training-shaped ops into the primitive ops of their inference form.

- ``nn.batch_norm(x, gamma, beta, mean, var).0`` becomes ``x * scale + shift`` with
  ``scale = 1 / sqrt(var + eps) [* gamma]`` and ``shift = -mean * scale [+ beta]``, both
  reshaped to broadcast along ``axis``. When the statistics are constants, FoldConstant then
  leaves exactly one multiply and one add (which FoldScaleAxis can push into a conv).
  Fields ``.1`` / ``.2`` (the moving statistics, returned unchanged at inference) become
  ``mean`` / ``var``, so no batch_norm call survives.
- ``nn.dropout(x).0`` becomes ``x``.
- ``nn.layer_norm(x, gamma, beta)`` becomes ``(x - mean(x)) / sqrt(variance(x) + eps)
  [* gamma] [+ beta]`` over ``axis``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ...ir.expr import Call, RelayExpr, TupleGetItem, const
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ._helpers import PassMutator, expand_to_axis, op_call, rewrite_functions

__all__ = ["SimplifyInference"]


def _data_type(call: Call) -> TensorType | None:
    ty = call.args[0].checked_type_
    return ty if isinstance(ty, TensorType) else None


def batch_norm_unpacked(call: Call, ty: TensorType) -> RelayExpr:
    """The inference form of ``nn.batch_norm`` output 0 (``call`` is the batch_norm call)."""
    data, gamma, beta, mean, var = call.args
    attrs = call.attrs
    ndim = len(ty.shape)
    axis = attrs.axis % ndim  # type: ignore[union-attr]
    eps = const(attrs.epsilon, ty.dtype)  # type: ignore[union-attr]
    scale = op_call("divide", const(1.0, ty.dtype), op_call("sqrt", op_call("add", var, eps)))
    if attrs.scale:  # type: ignore[union-attr]
        scale = op_call("multiply", scale, gamma)
    shift = op_call("multiply", op_call("negative", mean), scale)
    if attrs.center:  # type: ignore[union-attr]
        shift = op_call("add", shift, beta)
    # both calls name the batch norm's node: either may be folded away or fused alone
    out = replace(op_call("multiply", data, expand_to_axis(scale, ndim, axis)), span=call.span)
    return replace(op_call("add", out, expand_to_axis(shift, ndim, axis)), span=call.span)


def layer_norm_unpacked(call: Call, ty: TensorType) -> RelayExpr:
    """The primitive-op form of ``nn.layer_norm``."""
    data, gamma, beta = call.args
    attrs = call.attrs
    ndim = len(ty.shape)
    axis = attrs.axis % ndim  # type: ignore[union-attr]
    mean = op_call("mean", data, axis=(axis,), keepdims=True)
    var = op_call("variance", data, mean, axis=(axis,), keepdims=True)
    denom = op_call("sqrt", op_call("add", var, const(attrs.epsilon, ty.dtype)))  # type: ignore
    out = op_call("divide", op_call("subtract", data, mean), denom)
    if attrs.scale:  # type: ignore[union-attr]
        out = op_call("multiply", out, expand_to_axis(gamma, ndim, axis))
    if attrs.center:  # type: ignore[union-attr]
        out = op_call("add", out, expand_to_axis(beta, ndim, axis))
    return out


def _is_call_of(e: RelayExpr, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


class _Simplifier(PassMutator):
    def visit_tuple_getitem(self, orig: TupleGetItem) -> RelayExpr:
        new: TupleGetItem = super().visit_tuple_getitem(orig)
        tup = new.tuple_value
        if _is_call_of(tup, "nn.batch_norm"):
            ty = _data_type(orig.tuple_value)  # type: ignore[arg-type]
            if new.index == 0 and ty is not None:
                return batch_norm_unpacked(tup, ty)  # type: ignore[arg-type]
            if new.index in (1, 2):
                return tup.args[new.index + 2]  # type: ignore[attr-defined]
        if _is_call_of(tup, "nn.dropout") and new.index == 0:
            return tup.args[0]  # type: ignore[attr-defined]
        return new

    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        if _is_call_of(new, "nn.layer_norm"):
            ty = _data_type(orig)
            if ty is not None:
                return layer_norm_unpacked(new, ty)
        return new


@dataclass(frozen=True)
class SimplifyInference(ModulePass):
    """Replace batch_norm, dropout and layer_norm by their inference-time primitive ops."""

    name: ClassVar[str] = "SimplifyInference"
    opt_level: ClassVar[int] = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return rewrite_functions(mod, lambda f: _Simplifier().visit(f))


register_pass("SimplifyInference", SimplifyInference)
