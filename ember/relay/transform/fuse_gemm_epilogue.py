"""FuseGemmEpilogue: dense / matmul / batch_matmul and the elementwise ops after them become
one ``nn.contrib_gemm`` whose C kernel applies them while the output tile is in registers.

Each float32 product (no ``transpose_a``) becomes ``nn.contrib_gemm``, whether its sizes are
static or some are ``?`` (the kernel takes them at run time);
a constant 2-d weight is wrapped in ``nn.contrib_gemm_pack`` (the kernel's panel layout for
the build's SIMD level), which the FoldConstant after this pass folds, so packed weights are
constants of the model. Then, bottom-up, an op whose input is such a gemm used nowhere else
is absorbed into its epilogue ``act2(act1(alpha * acc + bias) + residual)``, in that order:

- ``multiply``/``divide`` by a scalar constant: ``alpha`` (before anything else), or the output
  scale of a GELU/hardswish just absorbed;
- ``add`` of a scalar or a vector along the last axis: ``bias``; of a tensor of the output's
  type (or after the bias/activation, a scalar): ``residual``;
- ``nn.relu``, ``clip``, ``sigmoid``, ``tanh``, ``nn.leaky_relu``, ``nn.silu``, ``nn.mish``,
  ``nn.hardswish``, ``nn.hardsigmoid``, ``nn.gelu``: an activation (the forms exporters spell
  out are these ops after ``RecogniseActivations``, which runs before this pass).

The op may also read the gemm through a reshape with static shapes (``reshape``,
``contrib_reverse_reshape``, ``expand_dims``, ``squeeze``, itself used once): the importer
writes a MatMul of rank 4 (attention's ``Q @ K^T``) as a batch_matmul whose (heads, seq, seq)
product is reshaped back to (batch, heads, seq, seq), and the exporters' scale and mask come
after that. The op is then absorbed as above and the reshape moved after the gemm (a bias
only when the reshape keeps the last axis; a residual reshaped to the product's shape), so
BERT's ``softmax((Q @ K^T) / 8 + mask)`` keeps one kernel for the scores and FoldGemmViews
still finds the reshape after the product.

The constant weights of ``nn.lstm``/``nn.gru``/``nn.rnn`` are packed here too (into the same
panels: ``op/nn/recurrent.pack_constant_weights``), since their kernel runs ``ember_sgemm``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...topi.nn.gemm_kernel import panel_width
from ..op.nn.gemm import GemmAttrs
from ..op.nn.recurrent import OPS as _RECURRENT, pack_constant_weights
from ._helpers import (PassMutator, fusion_bounded, op_call, op_name, rewrite_functions, same_shape,
                       use_counts)

__all__ = ["FuseGemmEpilogue"]

_PRODUCTS = ("nn.dense", "nn.matmul", "nn.batch_matmul")
_SCALED = ("gelu_erf", "gelu_tanh", "hardswish")  # activations with an output scale p0



def _scalar(e: Any) -> float | None:
    """The value of a float constant with one element."""
    if isinstance(e, Constant) and e.data.numpy().size == 1 and e.data.dtype.startswith("float"):
        return float(e.data.numpy().reshape(()))
    return None


def _f32(ty: Any) -> bool:
    return isinstance(ty, TensorType) and ty.dtype == "float32"


def _static_f32(ty: Any) -> bool:
    return _f32(ty) and all(isinstance(d, int) for d in ty.shape)


def _stage(a: GemmAttrs) -> str:
    """How far the epilogue has got: the next slots still free."""
    if a.act2 != "none":
        return "done"
    if a.has_residual:
        return "residual"
    if a.act1 != "none":
        return "act1"
    return "bias" if a.has_bias else ("alpha" if a.alpha != 1.0 else "empty")


# reshapes an epilogue op may look through to the product (shapes static)
_RESHAPES = ("reshape", "contrib_reverse_reshape", "expand_dims", "squeeze")


@dataclass(frozen=True)
class _Product:
    """A contrib_gemm an epilogue op reads, directly or through ``reshape`` (a rewritten
    reshape call of it): ``ty`` is the gemm's own output type."""

    gemm: Call
    ty: Any
    reshape: Call | None = None


class _Fuser(PassMutator):
    def __init__(self, uses: dict[int, int], nr: int, epilogues: bool = True) -> None:
        super().__init__()
        self.uses, self.nr, self.epilogues = uses, nr, epilogues
        self.moved: dict[int, Any] = {}  # id of a gemm a reshape was moved after -> its type

    # -- entry points ----------------------------------------------------------------
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        name = op_name(new)
        if name in _RECURRENT.values():
            return pack_constant_weights(new, self.nr) or new
        if name in _PRODUCTS:
            return self._start(orig, new) or new
        if not self.epilogues:
            return new
        for rule in (self._scale, self._add, self._activation):
            out = rule(orig, new, name)
            if out is not None:
                return out
        return new

    def _gemm_arg(self, orig: Call, i: int) -> _Product | None:
        """Argument i when it is a contrib_gemm (after rewriting), or a reshape of one, with
        no other consumer."""
        src = orig.args[i]
        if self.uses.get(id(src), 0) != 1:
            return None
        new = self.visit(src)
        if op_name(new) == "nn.contrib_gemm":
            return _Product(new, src.checked_type_)
        if op_name(new) not in _RESHAPES or op_name(new.args[0]) != "nn.contrib_gemm":
            return None
        ty = self.moved.get(id(new.args[0]))  # a gemm an earlier op was absorbed into
        if ty is None and op_name(src) in _RESHAPES and self.uses.get(id(src.args[0]), 0) == 1:
            ty = src.args[0].checked_type_
        if ty is None or not _static_f32(ty) or not _static_f32(src.checked_type_):
            return None
        return _Product(new.args[0], ty, new)

    def _wrap(self, p: _Product, g: Call) -> Call:
        """``g`` (the gemm with an op absorbed) under the reshape the op read it through."""
        r = p.reshape
        if r is None:
            return g
        self.moved[id(g)] = p.ty
        return Call(r.op, (g, *r.args[1:]), r.attrs)

    # -- the product -----------------------------------------------------------------
    def _start(self, orig: Call, new: Call) -> RelayExpr | None:
        a, w = orig.args
        if not (_f32(orig.checked_type_) and _f32(a.checked_type_) and _f32(w.checked_type_)):
            return None
        attrs = new.attrs
        if getattr(attrs, "transpose_a", False) or getattr(attrs, "out_dtype", "") not in (
                "", "float32"):
            return None
        kind = {"nn.dense": "dense", "nn.matmul": "matmul"}.get(op_name(new), "batch_matmul")
        tb = True if kind == "dense" else bool(attrs.transpose_b)
        weight, packed_n = new.args[1], 0
        if kind != "batch_matmul" and isinstance(weight, Constant):  # static shape
            shape = w.checked_type_.shape
            packed_n = shape[0] if tb else shape[1]
            weight = op_call("nn.contrib_gemm_pack", weight, nr=self.nr, transpose=tb)
        zero = const(0.0, "float32")
        return Call(Op.get("nn.contrib_gemm"), (new.args[0], weight, zero, zero),
                    GemmAttrs(kind=kind, transpose_b=tb, packed_n=packed_n))

    @staticmethod
    def _with(g: Call, args: tuple | None = None, **changes: Any) -> Call:
        return Call(g.op, args or g.args, dataclasses.replace(g.attrs, **changes))

    # -- epilogue rules ----------------------------------------------------------------
    def _scale(self, orig: Call, new: Call, name: str | None) -> RelayExpr | None:
        if name not in ("multiply", "divide"):
            return None
        for i in ((0, 1) if name == "multiply" else (0,)):
            p, s = self._gemm_arg(orig, i), _scalar(new.args[1 - i])
            if p is None or s is None or (name == "divide" and s == 0.0):
                continue
            s = s if name == "multiply" else 1.0 / s
            g = p.gemm
            a, stage = g.attrs, _stage(g.attrs)
            if stage in ("empty", "alpha"):
                return self._wrap(p, self._with(g, alpha=a.alpha * s))
            if stage == "act1" and a.act1 in _SCALED:
                return self._wrap(p, self._with(g, p1=(a.p1[0] * s, a.p1[1])))
            if stage == "done" and a.act2 in _SCALED:
                return self._wrap(p, self._with(g, p2=(a.p2[0] * s, a.p2[1])))
        return None

    def _add(self, orig: Call, new: Call, name: str | None) -> RelayExpr | None:
        if name != "add":
            return None
        out_ty = orig.checked_type_
        for i in (0, 1):
            p, other, other_ty = self._gemm_arg(orig, i), new.args[1 - i], orig.args[1 - i]
            ty = other_ty.checked_type_
            # the product (as the add reads it) must be the sum's shape: a product broadcast
            # over the other operand (a U-Net's time embedding (1, C, 1, 1) onto a conv's
            # (1, C, H, W)) is no epilogue of it
            if (p is None or not _f32(ty) or not _f32(out_ty)
                    or not same_shape(orig.args[i].checked_type_, out_ty)):
                continue
            g, stage, n = p.gemm, _stage(p.gemm.attrs), out_ty.shape[-1]
            # a bias is static (1 or n values); a residual has the output's shape (its ``?``
            # sizes taken as the output's: the kernel checks at run time that they are)
            size = int(np.prod(ty.shape)) if _static_f32(ty) else None
            vector = (len(ty.shape) <= len(out_ty.shape) and ty.shape[-1:] == (n,) and size == n
                      and p.ty.shape[-1:] == (n,))
            if stage in ("empty", "alpha") and (size == 1 or vector):
                bias = op_call("reshape", other, newshape=[] if size == 1 else [n])
                return self._wrap(p, self._with(g, (g.args[0], g.args[1], bias, g.args[3]),
                                         has_bias=True))
            full = same_shape(ty, out_ty)
            if stage not in ("residual", "done") and (full or size == 1):
                if not full:  # one value
                    res = op_call("reshape", other, newshape=[])
                elif p.reshape is None:
                    res = other
                else:  # the sum's shape, laid out as the product's
                    res = op_call("reshape", other, newshape=list(p.ty.shape))
                return self._wrap(p, self._with(g, (*g.args[:3], res), has_residual=True))
        return None

    def _set_act(self, g: Call, act: str, p: tuple[float, float]) -> Call | None:
        stage = _stage(g.attrs)
        if stage in ("empty", "alpha", "bias"):
            return self._with(g, act1=act, p1=p)
        if stage in ("act1", "residual"):
            return self._with(g, act2=act, p2=p)
        return None

    def _activation(self, orig: Call, new: Call, name: str | None) -> RelayExpr | None:
        if name not in _ACTIVATIONS or len(orig.args) != 1:
            return None
        prod = self._gemm_arg(orig, 0)
        if prod is None:
            return None
        act, p = _ACTIVATIONS[name](new.attrs)
        g = self._set_act(prod.gemm, act, p)
        return None if g is None else self._wrap(prod, g)


# op -> (epilogue activation, its two parameters) from the call's attrs
_ACTIVATIONS: dict[str, Any] = {
    "nn.relu": lambda a: ("relu", (0.0, 0.0)),
    "clip": lambda a: ("clip", (a.a_min, a.a_max)),
    "sigmoid": lambda a: ("sigmoid", (0.0, 0.0)),
    "tanh": lambda a: ("tanh", (0.0, 0.0)),
    "nn.leaky_relu": lambda a: ("leaky_relu", (a.alpha, 0.0)),
    "nn.silu": lambda a: ("silu", (0.0, 0.0)),
    "nn.mish": lambda a: ("mish", (0.0, 0.0)),
    "nn.hardswish": lambda a: ("hardswish", (1.0 / 6.0, 0.0)),
    "nn.hardsigmoid": lambda a: ("hardsigmoid", (a.alpha, a.beta)),
    "nn.gelu": lambda a: ("gelu_erf", (0.5, 1.0 / math.sqrt(2.0))) if a.approximate == "none"
    else ("gelu_tanh", (0.5, math.sqrt(2.0 / math.pi))),
}


# the same table for the other kernels with these epilogues (FuseNormEpilogue)
EPILOGUE_ACTIVATIONS = _ACTIVATIONS


@dataclass(frozen=True)
class FuseGemmEpilogue(ModulePass):
    """Rewrite dense/matmul/batch_matmul and their epilogues into ``nn.contrib_gemm``."""

    name: ClassVar[str] = "FuseGemmEpilogue"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        nr = panel_width()  # the SIMD level of Target.current(), $EMBER_MARCH or the host
        # A user who bounds fusion groups to one op (relay.FuseOps.max_depth=1) gets no
        # epilogue folded in either; the products still run on the packed-weight kernel.
        epilogues = not fusion_bounded(ctx)

        def rewrite(func: Any) -> Any:
            return _Fuser(use_counts(func), nr, epilogues).visit(func)

        return rewrite_functions(mod, rewrite)


register_pass("FuseGemmEpilogue", FuseGemmEpilogue)
