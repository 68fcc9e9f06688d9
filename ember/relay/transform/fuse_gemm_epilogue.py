"""FuseGemmEpilogue: dense / matmul / batch_matmul and the elementwise ops after them become
one ``nn.contrib_gemm`` whose C kernel applies them while the output tile is in registers.

Each float32 product (no ``transpose_a``) becomes ``nn.contrib_gemm``, whether its sizes are
static or some are ``?`` (the kernel takes them at run time);
a constant 2-d weight is wrapped in ``nn.contrib_gemm_pack`` (the kernel's panel layout for
the build's SIMD level), which the FoldConstant after this pass folds, so packed weights are
constants of the model. Then, bottom-up, an op whose input is such a gemm used nowhere else
is absorbed into its epilogue ``act2(act1(alpha * acc + bias) + residual)``, in that order:

- ``multiply``/``divide`` by a scalar constant: ``alpha`` (before anything else), or the output
  scale of a GELU/hardswish just absorbed (the 0.5 of GELU often comes after);
- ``add`` of a scalar or a vector along the last axis: ``bias``; of a tensor of the output's
  type (or after the bias/activation, a scalar): ``residual``;
- ``nn.relu``, ``clip``, ``sigmoid``, ``tanh``, ``nn.leaky_relu``: an activation;
- the decomposed forms ``x * (1 + erf(x * c))`` (GELU, erf form; also ``(x * s) * ...``),
  ``x * (1 + tanh(c * (x + 0.044715 x^3)))`` (GELU, tanh form) and
  ``x * clip(x + 3, 0, 6)`` (hardswish), where every node but ``x`` has no other use.
"""
from __future__ import annotations

import dataclasses
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
from ._helpers import PassMutator, op_call, rewrite_functions, same_shape, use_counts

__all__ = ["FuseGemmEpilogue"]

_PRODUCTS = ("nn.dense", "nn.matmul", "nn.batch_matmul")
_SCALED = ("gelu_erf", "gelu_tanh", "hardswish")  # activations with an output scale p0


def _name(e: Any) -> str | None:
    return e.op.name if isinstance(e, Call) and isinstance(e.op, Op) else None


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


class _Fuser(PassMutator):
    def __init__(self, uses: dict[int, int], nr: int, epilogues: bool = True) -> None:
        super().__init__()
        self.uses, self.nr, self.epilogues = uses, nr, epilogues

    # -- entry points ----------------------------------------------------------------
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        name = _name(new)
        if name in _PRODUCTS:
            return self._start(orig, new) or new
        if not self.epilogues:
            return new
        for rule in (self._scale, self._add, self._activation, self._gelu_or_hardswish):
            out = rule(orig, new, name)
            if out is not None:
                return out
        return new

    def _gemm_arg(self, orig: Call, i: int) -> Call | None:
        """The rewritten argument i when it is a contrib_gemm with no other consumer."""
        src = orig.args[i]
        if self.uses.get(id(src), 0) != 1:
            return None
        new = self.visit(src)
        return new if _name(new) == "nn.contrib_gemm" else None

    # -- the product -----------------------------------------------------------------
    def _start(self, orig: Call, new: Call) -> RelayExpr | None:
        a, w = orig.args
        if not (_f32(orig.checked_type_) and _f32(a.checked_type_) and _f32(w.checked_type_)):
            return None
        attrs = new.attrs
        if getattr(attrs, "transpose_a", False) or getattr(attrs, "out_dtype", "") not in (
                "", "float32"):
            return None
        kind = {"nn.dense": "dense", "nn.matmul": "matmul"}.get(_name(new), "batch_matmul")
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
            g, s = self._gemm_arg(orig, i), _scalar(new.args[1 - i])
            if g is None or s is None or (name == "divide" and s == 0.0):
                continue
            s = s if name == "multiply" else 1.0 / s
            a, stage = g.attrs, _stage(g.attrs)
            if stage in ("empty", "alpha"):
                return self._with(g, alpha=a.alpha * s)
            if stage == "act1" and a.act1 in _SCALED:
                return self._with(g, p1=(a.p1[0] * s, a.p1[1]))
            if stage == "done" and a.act2 in _SCALED:
                return self._with(g, p2=(a.p2[0] * s, a.p2[1]))
        return None

    def _add(self, orig: Call, new: Call, name: str | None) -> RelayExpr | None:
        if name != "add":
            return None
        out_ty = orig.checked_type_
        for i in (0, 1):
            g, other, other_ty = self._gemm_arg(orig, i), new.args[1 - i], orig.args[1 - i]
            ty = other_ty.checked_type_
            if g is None or not _f32(ty) or not _f32(out_ty):
                continue
            stage, n = _stage(g.attrs), out_ty.shape[-1]
            # a bias is static (1 or n values); a residual has the output's shape (its ``?``
            # sizes taken as the output's: the kernel checks at run time that they are)
            size = int(np.prod(ty.shape)) if _static_f32(ty) else None
            vector = len(ty.shape) <= len(out_ty.shape) and ty.shape[-1:] == (n,) and size == n
            if stage in ("empty", "alpha") and (size == 1 or vector):
                bias = op_call("reshape", other, newshape=[] if size == 1 else [n])
                return self._with(g, (g.args[0], g.args[1], bias, g.args[3]), has_bias=True)
            full = same_shape(ty, out_ty)
            if stage not in ("residual", "done") and (full or size == 1):
                res = other if full else op_call("reshape", other, newshape=[])
                return self._with(g, (*g.args[:3], res), has_residual=True)
        return None

    def _set_act(self, g: Call, act: str, p: tuple[float, float]) -> Call | None:
        stage = _stage(g.attrs)
        if stage in ("empty", "alpha", "bias"):
            return self._with(g, act1=act, p1=p)
        if stage in ("act1", "residual"):
            return self._with(g, act2=act, p2=p)
        return None

    def _activation(self, orig: Call, new: Call, name: str | None) -> RelayExpr | None:
        table = {"nn.relu": lambda a: ("relu", (0.0, 0.0)),
                 "clip": lambda a: ("clip", (a.a_min, a.a_max)),
                 "sigmoid": lambda a: ("sigmoid", (0.0, 0.0)),
                 "tanh": lambda a: ("tanh", (0.0, 0.0)),
                 "nn.leaky_relu": lambda a: ("leaky_relu", (a.alpha, 0.0))}
        if name not in table or len(orig.args) != 1:
            return None
        g = self._gemm_arg(orig, 0)
        if g is None:
            return None
        act, p = table[name](new.attrs)
        return self._set_act(g, act, p)

    # -- GELU and hardswish: x * f(x) -------------------------------------------------
    def _gelu_or_hardswish(self, orig: Call, new: Call, name: str | None) -> RelayExpr | None:
        if name != "multiply":
            return None
        for i in (0, 1):
            x, f, scale = orig.args[i], orig.args[1 - i], 1.0
            split = _split_scalar(x)  # (x * s) * f(x)
            if split is not None and self.uses.get(id(x), 0) == 1:
                x, scale = split
            if self.uses.get(id(f), 0) != 1:
                continue
            found = _match_gelu_erf(x, f, self.uses) or _match_gelu_tanh(x, f, self.uses) or \
                _match_hardswish(x, f, self.uses)
            if found is None:
                continue
            act, p, x_uses = found
            g = self.visit(x)
            if _name(g) == "nn.contrib_gemm" and self.uses.get(id(x), 0) == x_uses:
                out = self._set_act(g, act, (p[0] * scale, p[1]))
                if out is not None:
                    return out
        return None


def _only(e: Any, uses: dict[int, int], *names: str) -> bool:
    return _name(e) in names and uses.get(id(e), 0) == 1


def _split_scalar(e: Any) -> tuple[Any, float] | None:
    """``e`` = other * c (either order) or other / c: (other, c)."""
    if _name(e) == "multiply":
        for i in (0, 1):
            s = _scalar(e.args[i])
            if s is not None:
                return e.args[1 - i], s
    if _name(e) == "divide":
        s = _scalar(e.args[1])
        if s:
            return e.args[0], 1.0 / s
    return None


def _one_plus(f: Any, uses: dict[int, int], inner: str) -> Any:
    """``f`` = 1 + inner(z) (either order): z, else None."""
    if _name(f) != "add":
        return None
    for i in (0, 1):
        if _scalar(f.args[i]) == 1.0 and _only(f.args[1 - i], uses, inner):
            return f.args[1 - i].args[0]
    return None


def _match_gelu_erf(x: Any, f: Any, uses: dict[int, int]) -> tuple | None:
    z = _one_plus(f, uses, "erf")
    if z is None or uses.get(id(z), 0) != 1:
        return None
    split = _split_scalar(z)
    if split is None or split[0] is not x:
        return None
    return "gelu_erf", (1.0, split[1]), 2


def _cube_uses(e: Any, x: Any, uses: dict[int, int]) -> int | None:
    """How many times x is read by e when e computes x^3 (power or products), else None."""
    if _name(e) == "power" and e.args[0] is x and _scalar(e.args[1]) == 3.0:
        return 1
    if _name(e) == "multiply":
        for i in (0, 1):
            sq = e.args[1 - i]
            if e.args[i] is x and _only(sq, uses, "multiply") and sq.args[0] is x and \
                    sq.args[1] is x:
                return 3
    return None


def _match_gelu_tanh(x: Any, f: Any, uses: dict[int, int]) -> tuple | None:
    w = _one_plus(f, uses, "tanh")
    if w is None or uses.get(id(w), 0) != 1:
        return None
    split = _split_scalar(w)  # c * (x + 0.044715 x^3)
    if split is None or not _only(split[0], uses, "add"):
        return None
    inner, c = split
    for i in (0, 1):
        cubic = inner.args[1 - i]
        if inner.args[i] is not x or uses.get(id(cubic), 0) != 1:
            continue
        part = _split_scalar(cubic)
        if part is None or not np.isclose(part[1], 0.044715, rtol=1e-5, atol=0):
            continue
        if uses.get(id(part[0]), 0) != 1:
            continue
        n = _cube_uses(part[0], x, uses)
        if n is not None:
            return "gelu_tanh", (1.0, c), 2 + n
    return None


def _match_hardswish(x: Any, f: Any, uses: dict[int, int]) -> tuple | None:
    if _name(f) != "clip" or (f.attrs.a_min, f.attrs.a_max) != (0.0, 6.0):
        return None
    a = f.args[0]
    if not _only(a, uses, "add"):
        return None
    for i in (0, 1):
        if a.args[i] is x and _scalar(a.args[1 - i]) == 3.0:
            return "hardswish", (1.0, 0.0), 2
    return None


@dataclass(frozen=True)
class FuseGemmEpilogue(ModulePass):
    """Rewrite dense/matmul/batch_matmul and their epilogues into ``nn.contrib_gemm``."""

    name: ClassVar[str] = "FuseGemmEpilogue"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        nr = panel_width()  # the SIMD level of Target.current(), $EMBER_MARCH or the host
        # A user who bounds fusion groups to one op (relay.FuseOps.max_depth=1) gets no
        # epilogue folded in either; the products still run on the packed-weight kernel.
        epilogues = int(ctx.config.get("relay.FuseOps.max_depth", 256)) != 1

        def rewrite(func: Any) -> Any:
            return _Fuser(use_counts(func), nr, epilogues).visit(func)

        return rewrite_functions(mod, rewrite)


register_pass("FuseGemmEpilogue", FuseGemmEpilogue)
