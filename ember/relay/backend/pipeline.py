"""The build pipeline every executor's compile side shares: the module and target checks,
``optimize`` (the Relay passes up to fusion), and the build stages with their listeners.

``optimize``: InferType -> bind params -> the optimisation passes (each runs when the
PassContext's opt_level reaches its own; ``optimize_passes``) -> FuseOps -> InferType.
``EMBER_DEBUG=1`` prints each stage with its time.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ...ir.expr import Function
from ...ir.module import IRModule
from ...ir.transform import Pass, Sequential
from ...runtime.env import debug_level
from ...runtime.errors import TVMError
from ...runtime.ndarray import NDArray
from ...runtime.ndarray import array as nd_array
from ...target import Target
from ..transform import (
    AlterOpLayout,
    CanonicalizeOps,
    DynamicToStatic,
    EliminateCommonSubexpr,
    FoldConstant,
    FoldExplicitPadding,
    FoldGemmViews,
    FuseAttention,
    FoldScaleAxis,
    FoldChannelShuffle,
    FoldTokenLayouts,
    FuseGemmEpilogue,
    FuseLayerNorm,
    FuseNormEpilogue,
    FuseOps,
    FusePoolEpilogue,
    FuseQAddEpilogue,
    HoistActivations,
    InferType,
    RecogniseActivations,
    SimplifyExpr,
    SimplifyInference,
)
from ..transform.bind_params import bind_params_by_name
from .tensor_limit import check_tensor_sizes

# Called with (stage name, None) when a stage starts and (stage name, seconds) when it ends.
StageListener = Callable[[str, "float | None"], None]
_LISTENERS: list[StageListener] = []


def optimize_passes() -> list[Pass]:
    """The optimisation passes, in TVM's order; each runs if the PassContext's opt_level
    reaches its own (SimplifyInference and DynamicToStatic 0, FoldConstant,
    RecogniseActivations, FuseLayerNorm, FuseGemmEpilogue, FuseQAddEpilogue and
    FuseNormEpilogue 2, the others 3).
    DynamicToStatic turns the ``dyn.*`` ops whose values are now known (``input_shapes``
    bound the sizes they read) into static ones before anything folds or fuses.
    RecogniseActivations turns exporters' spelled-out activations (hardswish, hardsigmoid,
    SiLU, GELU, mish) and softmax into ops, before FoldScaleAxis moves their constants into
    the next layer's weights; FuseLayerNorm puts back together the layer norms
    SimplifyInference (or an ONNX exporter) decomposed; FuseGemmEpilogue packs constant
    weights (the FoldConstant after it folds the packing); FuseQAddEpilogue folds a quantized
    residual add into the int8 conv before it; FoldGemmViews turns the head
    transposes around batched GEMMs into strides; FuseAttention makes scores, mask, softmax
    and the second product of attention one kernel; FoldExplicitPadding makes a zero pad
    before a conv the conv's own padding; HoistActivations moves an activation after
    transposes, reshapes and a concatenation onto the values they rearrange (a detector
    head's sigmoid into its convs' epilogues); AlterOpLayout plans blocked conv layouts
    for the current target (``relay/transform/alter_op_layout.py``); FoldTokenLayouts makes
    each crossing between a blocked map and a transformer's tokens (or a detector head's
    channels-last view) one blocked copy; FoldChannelShuffle computes ShuffleNetV2's channel
    shuffles (and the halves their splits take) from blocked branches into the blocked layout;
    FusePoolEpilogue puts a blocked max pool's per-channel affine and relu into its kernel;
    FuseNormEpilogue puts the per-row affine and activation after a layer norm (a GroupNorm's
    channel affine and GELU) into its kernel."""
    return [SimplifyInference(), DynamicToStatic(), EliminateCommonSubexpr(), FoldConstant(),
            RecogniseActivations(), FoldScaleAxis(), SimplifyExpr(), CanonicalizeOps(),
            FoldExplicitPadding(), FuseLayerNorm(), FuseGemmEpilogue(), FuseQAddEpilogue(),
            FoldGemmViews(), FuseAttention(), FoldConstant(), HoistActivations(),
            AlterOpLayout(),
            FoldTokenLayouts(), FoldChannelShuffle(), FusePoolEpilogue(), FuseNormEpilogue()]


@contextmanager
def stage_listener(listener: StageListener) -> Iterator[None]:
    """Within the block, ``listener(stage, None)`` is called as each build stage starts
    ("optimize", "lower", "compile", ...) and ``listener(stage, seconds)`` as it ends; the
    ``ember`` command draws its progress line from these."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """One build stage: tells the listeners, and logs its time under ``EMBER_DEBUG=1``."""
    for listener in tuple(_LISTENERS):
        listener(name, None)
    start = time.perf_counter()
    yield
    seconds = time.perf_counter() - start
    for listener in tuple(_LISTENERS):
        listener(name, seconds)
    if debug_level() >= 1:
        print(f"[ember] relay.build: {name} {1e3 * seconds:.1f} ms", file=sys.stderr)


def as_module(ir_mod: Any, where: str) -> IRModule:
    """``ir_mod`` as an IRModule with a ``main`` (a Function becomes one)."""
    if isinstance(ir_mod, Function):
        return IRModule.from_expr(ir_mod)
    if not isinstance(ir_mod, IRModule):
        raise TVMError(f"{where}: expected an IRModule or a relay.Function, got "
                       f"{type(ir_mod).__name__}")
    if "main" not in {gv.name_hint for gv in ir_mod.functions}:
        raise TVMError(f"{where}: the module has no main function")
    return ir_mod


def canon_target(target: Any, target_host: Any, where: str) -> Target:
    """The one CPU Target to build for (the current one, or "llvm", when None)."""
    if target is None:
        target = Target.current() or "llvm"
    if isinstance(target, Mapping) and "kind" not in target:
        if len(target) != 1:
            raise TVMError(f"{where}: ember builds for one target (the CPU), got "
                           f"{len(target)}: {dict(target)}")
        target = next(iter(target.values()))
    canon = Target(target, target_host)
    canon.check_buildable(where)
    return canon


def _bind(mod: IRModule, params: Mapping[str, Any] | None) -> tuple[IRModule, dict[str, NDArray]]:
    arrays = {k: v if isinstance(v, NDArray) else nd_array(v) for k, v in (params or {}).items()}
    if not arrays:
        return mod, arrays
    out = mod.copy()
    out["main"] = bind_params_by_name(mod["main"], arrays)
    return InferType()(out), arrays


def optimize(mod: Any, target: Any = None, target_host: Any = None,
             params: Mapping[str, Any] | None = None) -> tuple[IRModule, dict[str, NDArray]]:
    """``(optimised fused module, params bound)``; see ``relay.optimize``."""
    mod = as_module(mod, "relay.optimize")
    with canon_target(target, target_host, "relay.optimize"), stage("optimize"):
        mod = InferType()(mod)
        check_tensor_sizes(mod)
        mod, arrays = _bind(mod, params)
        mod = Sequential(optimize_passes(), name="relay.optimize")(mod)
        mod = InferType()(FuseOps()(mod))
    return mod, arrays


def evaluated_module(mod: IRModule, expr: Any = None) -> IRModule:
    """``mod``, typed, with ``expr`` (a Function or a GlobalVar of ``mod``; None: ``main``
    itself) as its ``main``: what the compiling kinds of ``create_executor`` build."""
    if expr is not None and not (hasattr(expr, "name_hint") and expr.name_hint == "main"):
        mod = mod.copy()
        mod["main"] = expr if isinstance(expr, Function) else mod[expr.name_hint]
    return InferType()(mod)
