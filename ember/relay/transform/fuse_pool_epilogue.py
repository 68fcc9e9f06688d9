"""FusePoolEpilogue: a blocked max pool and the per-channel affine and relu after it become
one ``nn.contrib_max_pool2d_NCHWc_fused``, whose C kernel applies them to each output vector
in registers.

Runs after AlterOpLayout (the pool is then in NCHW[L]c and the batch norm's constants are
blocked ``[1, C/L, 1, 1, L]``). Bottom-up, an op whose input is such a pool used nowhere else
is absorbed, while the epilogue ``relu?(pool * scale + shift)`` can still express it:

- ``multiply`` by a per-channel (or scalar) constant, before the relu: scale and shift both
  scale (``(p * s + b) * c = p * (s c) + b c``);
- ``add`` of a per-channel (or scalar) constant, before the relu: the shift grows;
- ``nn.relu``: ends the epilogue.

Without this, FuseOps puts them in the pool's kernel as a second loop: the pool's result is
written to a workspace, read back and written again (resnet18's stem pool 64x56x56: 70 us of
its 315 in the model).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from ...ir.expr import Call, Constant, RelayExpr, const
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...topi.nn.pool_nchwc import blocked_lanes
from ..op.nn.pool_nchwc_fused import OP, MaxPool2DNCHWcFusedAttrs
from ._helpers import UsesMutator, fusion_bounded, op_name, rewrite_functions, use_counts

__all__ = ["FusePoolEpilogue"]



def _blocked_shape(e: RelayExpr) -> tuple[int, ...] | None:
    """The static float32 NCHW[L]c shape of ``e``'s type, else None."""
    ty = e.checked_type_
    if not isinstance(ty, TensorType) or ty.dtype != "float32" or ty.ndim != 5:
        return None
    if not all(isinstance(d, int) for d in ty.shape[1:]):
        return None
    return tuple(ty.shape)


def _channel_vector(c: RelayExpr, shape: tuple[int, ...]) -> np.ndarray | None:
    """A float32 constant that broadcasts along channels only ([1, C/L, 1, 1, L], a scalar),
    as the [C] vector of its values; else None."""
    if not isinstance(c, Constant) or c.data.dtype != "float32":
        return None
    arr = c.data.numpy()
    per_channel = (1, shape[1], 1, 1, shape[4])
    if arr.ndim > 5 or any(d not in (1, w) for d, w in zip(arr.shape[::-1], per_channel[::-1])):
        return None
    return np.broadcast_to(arr, per_channel).reshape(-1).astype("float32")


class _Fuser(UsesMutator):
    def visit_call(self, orig: Call) -> RelayExpr:
        new: Call = super().visit_call(orig)
        name = op_name(new)
        if name in ("multiply", "add"):
            for i in (0, 1):
                fused = self._affine(orig, new, name, i)
                if fused is not None:
                    return fused
        if name == "nn.relu":
            found = self._pool_arg(orig, 0)
            if found is not None:
                return self._fused(*found, relu=True)
        return new

    def _pool_arg(self, orig: Call, i: int) -> tuple[Call, np.ndarray, np.ndarray] | None:
        """(the pool, its scale, its shift) when argument i is a blocked max pool, or a fused
        one without its relu, that nothing else reads."""
        src = orig.args[i]
        if self.uses.get(id(src), 0) != 1 or _blocked_shape(src) is None:
            return None
        new = self.visit(src)
        shape = _blocked_shape(src)
        if op_name(new) == "nn.max_pool2d" and blocked_lanes(new.attrs.layout) == shape[4]:
            channels = shape[1] * shape[4]
            return new, np.ones(channels, "float32"), np.zeros(channels, "float32")
        if op_name(new) == OP and not new.attrs.relu:
            return new, new.args[1].data.numpy(), new.args[2].data.numpy()
        return None

    def _affine(self, orig: Call, new: Call, name: str, i: int) -> RelayExpr | None:
        found = self._pool_arg(orig, i)
        shape = _blocked_shape(orig)
        if found is None or shape is None or _blocked_shape(orig.args[i]) != shape:
            return None  # (a constant that broadcasts the pool to a bigger shape stays out)
        vec = _channel_vector(new.args[1 - i], shape)
        if vec is None:
            return None
        pool, scale, shift = found
        if name == "multiply":
            return self._fused(pool, scale * vec, shift * vec, relu=False)
        return self._fused(pool, scale, shift + vec, relu=False)

    @staticmethod
    def _fused(pool: Call, scale: np.ndarray, shift: np.ndarray, relu: bool) -> Call:
        """The fused pool of ``pool``'s data (no span: the mutator gives it the spans of the
        pool and of every op it absorbed)."""
        if op_name(pool) == OP:
            attrs = replace(pool.attrs, relu=relu)
        else:
            a = pool.attrs
            attrs = MaxPool2DNCHWcFusedAttrs(a.pool_size, a.strides, a.dilation, a.padding,
                                             a.layout, a.out_layout, a.ceil_mode, relu)
        return Call(Op.get(OP), (pool.args[0], const(scale.astype("float32")),
                                 const(shift.astype("float32"))), attrs)


@dataclass(frozen=True)
class FusePoolEpilogue(ModulePass):
    """Rewrite blocked max pools and their per-channel affine and relu into
    ``nn.contrib_max_pool2d_NCHWc_fused``."""

    name: ClassVar[str] = "FusePoolEpilogue"
    opt_level: ClassVar[int] = 3

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # a user who bounds fusion groups to one op (relay.FuseOps.max_depth=1) keeps them apart
        if fusion_bounded(ctx):
            return mod
        return rewrite_functions(mod, lambda func: _Fuser(use_counts(func)).visit(func))


register_pass("FusePoolEpilogue", FusePoolEpilogue)
