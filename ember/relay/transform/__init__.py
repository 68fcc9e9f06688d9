"""Relay passes and the pass infrastructure they run under.

The infrastructure (PassContext, Sequential, module/function passes and their decorators)
lives in ``ember.ir.transform`` (``ember.transform``) and is re-exported here, as in TVM's
``relay.transform``. Passes are loaded on first use: add a pass by adding its module to
``_LAZY`` (name -> submodule).
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

from ...ir.instrument import PassInstrument
from ...ir.transform import (FunctionPass, ModulePass, Pass, PassContext, PassInfo,  # noqa: F401
                             PrintIR, Sequential, function_pass, get_pass, list_passes,
                             module_pass, register_pass)
from .type_infer import InferType, InferTypeLocal, infer_type  # noqa: F401

# name -> submodule of ember.relay.transform defining it.
_LAZY: dict[str, str] = {
    # optimisation passes (and their expression-level helpers)
    "FoldConstant": "fold_constant", "FoldConstantExpr": "fold_constant",
    "SimplifyInference": "simplify_inference",
    "FuseOps": "fuse_ops",
    "DeadCodeElimination": "dead_code",
    "EliminateCommonSubexpr": "eliminate_common_subexpr",
    "ToANormalForm": "to_a_normal_form", "ToANormalFormExpr": "to_a_normal_form",
    "ToGraphNormalForm": "to_graph_normal_form",
    "FoldScaleAxis": "fold_scale_axis", "ForwardFoldScaleAxis": "fold_scale_axis",
    "BackwardFoldScaleAxis": "fold_scale_axis",
    "SimplifyExpr": "simplify_expr", "CanonicalizeOps": "canonicalize_ops",
    "FoldExplicitPadding": "fold_explicit_padding",
    "FuseGemmEpilogue": "fuse_gemm_epilogue", "FuseLayerNorm": "fuse_layer_norm",
    "RecogniseActivations": "recognise_activations",
    "FoldGemmViews": "fold_gemm_views", "FuseAttention": "fuse_attention",
    "BindParams": "bind_params",
    "DynamicToStatic": "dynamic_to_static",
    "AlterOpLayout": "alter_op_layout", "ConvertLayout": "alter_op_layout",
    "FoldTokenLayouts": "fold_token_layouts", "FoldChannelShuffle": "fold_channel_shuffle",
    "FusePoolEpilogue": "fuse_pool_epilogue", "FuseQAddEpilogue": "fuse_qadd_epilogue",
    "FuseNormEpilogue": "fuse_norm_epilogue", "HoistActivations": "hoist_activations",
    # the Relay-era pass list (issue 23)
    "Inline": "inline", "RemoveUnusedFunctions": "remove_unused_functions",
    "CombineParallelConv2D": "combine_parallel", "CombineParallelDense": "combine_parallel",
    "CombineParallelBatchMatmul": "combine_parallel", "BatchingOps": "combine_parallel",
    "FastMath": "fast_math", "ToMixedPrecision": "to_mixed_precision",
    "mixed_precision": "to_mixed_precision",  # the module of default rules, loaded with it
    "gradient": "autodiff", "FirstOrderGradient": "first_order_gradient",
    "LazyGradientInit": "lazy_gradient_init", "PartialEvaluate": "partial_evaluate",
    "ToCPS": "cps", "to_cps": "cps", "un_cps": "cps",
    "Defunctionalization": "defunctionalization",
    "AnnotateTarget": "annotate_target", "MergeCompilerRegions": "merge_compiler_regions",
    "PartitionGraph": "partition_graph", "MergeComposite": "merge_composite",
}
# The pass classes among them, registered by name up front (get_pass, the command line).
_LAZY_PASSES = ("FoldConstant", "SimplifyInference", "FuseOps", "DeadCodeElimination",
                "EliminateCommonSubexpr", "ToANormalForm", "ToGraphNormalForm", "FoldScaleAxis",
                "ForwardFoldScaleAxis", "BackwardFoldScaleAxis", "SimplifyExpr", "CanonicalizeOps",
                "FuseGemmEpilogue", "AlterOpLayout", "FuseLayerNorm", "FoldGemmViews",
                "DynamicToStatic", "Inline", "RemoveUnusedFunctions", "CombineParallelConv2D",
                "CombineParallelDense", "CombineParallelBatchMatmul", "BatchingOps", "FastMath",
                "ToMixedPrecision", "FirstOrderGradient", "LazyGradientInit",
                "PartialEvaluate", "RecogniseActivations", "FoldTokenLayouts",
                "FusePoolEpilogue", "FuseNormEpilogue", "FoldExplicitPadding",
                "HoistActivations", "FoldChannelShuffle", "FuseQAddEpilogue", "FuseAttention")


def build_config(opt_level: int = 2, required_pass: Iterable[str] | None = None,
                 disabled_pass: Iterable[str] | None = None, trace: Any = None,
                 config: dict[str, Any] | None = None,
                 instruments: Sequence[PassInstrument] | None = None) -> PassContext:
    """The Relay-era name of ``PassContext``: ``with relay.build_config(opt_level=3): ...``.

    ``trace`` is accepted for compatibility and ignored (use instruments instead).
    """
    return PassContext(opt_level, required_pass, disabled_pass, instruments, config)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'ember.relay.transform' has no attribute {name!r}")


def _lazy_pass(name: str) -> Any:
    return lambda: __getattr__(name)()


for _name in _LAZY_PASSES:
    register_pass(_name, _lazy_pass(_name))
