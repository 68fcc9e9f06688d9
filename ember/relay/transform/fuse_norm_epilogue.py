"""FuseNormEpilogue: the per-row affine and the activation after a layer normalisation become
one ``nn.contrib_layer_norm_act``, whose C kernel applies them to each normalised row while it
is in registers / L1 (``ember/include/ember/kernels/norm.h``).

A GroupNorm of one channel per group (wav2vec2's feature extractor), an InstanceNorm over one
axis, or a layer norm is ``nn.layer_norm`` after FuseLayerNorm; its gamma/beta along the
normalised axis are folded there. What follows it, a per-channel affine (GroupNorm's own
gamma/beta, which run across rows) and an activation (GELU, SiLU, ReLU...), was one more
elementwise kernel: one more pass over a tensor that is often too big for the cache
(wav2vec2's first norm: 512 x 3199 floats).

Runs after AlterOpLayout, so a blocked norm (NCHW[L]c) and its blocked constants are seen as
they will run. Bottom-up, an op whose input is such a norm used nowhere else (float32) is
absorbed while ``act(norm * row_scale + row_shift)`` can still express it:

- ``multiply`` by a constant that is one value per row: it broadcasts along the normalised
  axis and its other sizes are one contiguous run of the rows' dimensions (a scalar; (C, 1, 1)
  for (N, C, 1, T) over T; [1, C/L, 1, 1, L] in NCHW[L]c when H is 1): scale and shift both
  scale;
- ``add`` of such a constant: the shift grows;
- ``nn.relu``, ``clip``, ``sigmoid``, ``tanh``, ``nn.leaky_relu``, ``nn.silu``, ``nn.mish``,
  ``nn.hardswish``, ``nn.hardsigmoid``, ``nn.gelu``: the activation, which ends the epilogue
  (FuseGemmEpilogue's table, so the parameters mean what they mean there).

Vectors of two different row patterns (say per channel and per batch) do not combine; the
second stays a separate op. Run-time (``?``) sizes are fine before the constant's dimensions
(the batch); those from its first dimension on must be static.
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
from ..op.nn.norm import LayerNormActAttrs
from ._helpers import UsesMutator, fusion_bounded, op_name, rewrite_functions, use_counts
from .fuse_gemm_epilogue import EPILOGUE_ACTIVATIONS

__all__ = ["FuseNormEpilogue"]

_NORMS = ("nn.layer_norm", "nn.contrib_layer_norm_act")



def _f32_shape(e: RelayExpr) -> tuple | None:
    ty = e.checked_type_
    return tuple(ty.shape) if isinstance(ty, TensorType) and ty.dtype == "float32" else None


@dataclass(frozen=True)
class _Rows:
    """One value per row: row r reads values[(r // div) % len(values)]."""

    values: np.ndarray
    div: int = 1

    def compatible(self, other: _Rows) -> bool:
        return len(self.values) == 1 or len(other.values) == 1 or (
            len(self.values) == len(other.values) and self.div == other.div)

    def combine(self, other: _Rows, fn: Any) -> _Rows:
        """fn(self, other) elementwise, in the pattern of the one that is not a scalar."""
        div = other.div if len(self.values) == 1 else self.div
        return _Rows(fn(self.values, other.values).astype("float32"), div)


def row_vector(c: RelayExpr, shape: tuple, axis: int) -> _Rows | None:
    """The float32 constant ``c`` as one value per row of a ``shape`` tensor normalised over
    ``axis`` (rows: the other positions in row-major order), else None."""
    if not isinstance(c, Constant) or c.data.dtype != "float32":
        return None
    arr = c.data.numpy()
    rank = len(shape)
    if arr.ndim > rank:
        return None
    padded = (1,) * (rank - arr.ndim) + tuple(arr.shape)
    if padded[axis] != 1:
        return None
    kept = [i for i in range(rank) if i != axis and padded[i] != 1]
    if any(padded[i] != shape[i] for i in kept):
        return None
    if not kept:
        return _Rows(arr.reshape(-1).astype("float32"))
    between = range(kept[0], kept[-1] + 1)
    if any(shape[i] != 1 for i in between if i != axis and i not in kept):
        return None  # not one contiguous run of the rows' dimensions
    after = [shape[i] for i in range(kept[-1] + 1, rank) if i != axis]
    if not all(isinstance(d, int) for d in after):
        return None
    return _Rows(arr.reshape(-1).astype("float32"), math.prod(after))


class _Fuser(UsesMutator):
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        name = op_name(new)
        if name in ("multiply", "add"):
            return self._affine(orig, new, name) or new
        if name in EPILOGUE_ACTIVATIONS and len(orig.args) == 1:
            return self._activation(orig, new, name) or new
        return new

    def _norm_arg(self, orig: Call, i: int) -> Call | None:
        """The rewritten argument i when it is a float32 norm still open to an epilogue, with
        no other consumer, of the call's own shape."""
        src = orig.args[i]
        if self.uses.get(id(src), 0) != 1 or _f32_shape(src) is None or \
                _f32_shape(orig) != _f32_shape(src):
            return None
        new = self.visit(src)
        if op_name(new) not in _NORMS or _f32_shape(new.args[0]) is None:
            return None
        if op_name(new) == "nn.contrib_layer_norm_act" and new.attrs.activation != "none":
            return None
        return new

    @staticmethod
    def _as_act(norm: Call) -> tuple[tuple, LayerNormActAttrs]:
        """The args and attrs of ``norm`` as nn.contrib_layer_norm_act."""
        if op_name(norm) == "nn.contrib_layer_norm_act":
            return tuple(norm.args), norm.attrs
        a = norm.attrs
        zero = const(0.0, "float32")
        return (*norm.args, zero, zero), LayerNormActAttrs(a.axis, a.epsilon, a.center, a.scale)

    @staticmethod
    def _rows(arg: RelayExpr, used: bool, attrs: LayerNormActAttrs) -> _Rows | None:
        return _Rows(arg.data.numpy().reshape(-1), attrs.row_div) if used else None

    def _affine(self, orig: Call, new: Call, name: str) -> Call | None:
        for i in (0, 1):
            norm = self._norm_arg(orig, i)
            if norm is None:
                continue
            shape = _f32_shape(norm)
            vec = row_vector(new.args[1 - i], shape, norm.attrs.axis % len(shape))
            if vec is None:
                continue
            args, attrs = self._as_act(norm)
            scale = self._rows(args[3], attrs.has_row_scale, attrs)
            shift = self._rows(args[4], attrs.has_row_shift, attrs)
            if any(v is not None and not v.compatible(vec) for v in (scale, shift)):
                continue
            if name == "multiply":
                scale = vec if scale is None else scale.combine(vec, np.multiply)
                shift = None if shift is None else shift.combine(vec, np.multiply)
            else:
                shift = vec if shift is None else shift.combine(vec, np.add)
            return self._with(args, attrs, scale, shift)
        return None

    @staticmethod
    def _with(args: tuple, attrs: LayerNormActAttrs, scale: _Rows | None,
              shift: _Rows | None) -> Call:
        """The fused call with row vectors ``scale`` / ``shift`` (a scalar one taking the
        other's pattern, so both are indexed alike)."""
        rows = [v for v in (scale, shift) if v is not None]
        wide = max(rows, key=lambda v: len(v.values))
        count, div = len(wide.values), wide.div

        def arg(v: _Rows | None, old: RelayExpr) -> RelayExpr:
            if v is None:
                return old
            return const(np.broadcast_to(v.values, (count,)).astype("float32"))

        new_args = (*args[:3], arg(scale, args[3]), arg(shift, args[4]))
        new_attrs = dataclasses.replace(attrs, has_row_scale=scale is not None,
                                        has_row_shift=shift is not None, row_count=count,
                                        row_div=div)
        return Call(Op.get("nn.contrib_layer_norm_act"), new_args, new_attrs)

    def _activation(self, orig: Call, new: Call, name: str) -> Call | None:
        norm = self._norm_arg(orig, 0)
        if norm is None:
            return None
        act, params = EPILOGUE_ACTIVATIONS[name](new.attrs)
        args, attrs = self._as_act(norm)
        attrs = dataclasses.replace(attrs, activation=act, params=tuple(map(float, params)))
        return Call(Op.get("nn.contrib_layer_norm_act"), args, attrs)


@dataclass(frozen=True)
class FuseNormEpilogue(ModulePass):
    """Fold a norm's per-row affine and activation into ``nn.contrib_layer_norm_act``."""

    name: ClassVar[str] = "FuseNormEpilogue"
    opt_level: ClassVar[int] = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # fusion groups bounded to one op (relay.FuseOps.max_depth=1): nothing folded either
        if fusion_bounded(ctx):
            return mod

        def rewrite(func: Any) -> Any:
            return _Fuser(use_counts(func)).visit(func)

        return rewrite_functions(mod, rewrite)


register_pass("FuseNormEpilogue", FuseNormEpilogue)
