"""The default mixed-precision rule of each op, registered when this module is imported.

Categories, as in TVM: ``MIXED_PRECISION_ALWAYS`` ops run in the low precision type (they gain
speed and memory: convolutions, dense, batch_matmul), ``MIXED_PRECISION_FOLLOW`` ops run in it
when all their floating-point inputs are already there (arithmetic, layout and shape ops,
saturating activations), ``MIXED_PRECISION_NEVER`` ops always run in float32 (exp, softmax,
reductions: results too large or sums too long for float16).

A rule returns ``[category, accumulation_dtype, output_dtype]``. Ops with an ``out_dtype``
attribute (convolutions, dense, matmuls) accumulate in float32 and give the low precision
type; the others compute in it. Override a rule by registering one at a higher level::

    from ember.relay.op import register_mixed_precision_conversion
    from ember.relay.transform.mixed_precision import MIXED_PRECISION_NEVER

    @register_mixed_precision_conversion("nn.conv2d", level=11)
    def keep_conv_fp32(call, mixed_precision_type):
        return [MIXED_PRECISION_NEVER, "float32", "float32"]

Ops the lists do not name have no rule: ToMixedPrecision treats them as FOLLOW and reports
them (``missing_op_mode``). Names of ops ember does not have are skipped.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...ir.op import OP_REGISTRY
from ..op.mixed_precision import register_mixed_precision_conversion

__all__ = ["DEFAULT_ALWAYS_LIST", "DEFAULT_FOLLOW_LIST", "DEFAULT_NEVER_LIST",
           "MIXED_PRECISION_ALWAYS", "MIXED_PRECISION_FOLLOW", "MIXED_PRECISION_NEVER",
           "get_generic_out_dtypes", "register_func_to_op_list"]

MIXED_PRECISION_ALWAYS = 0
MIXED_PRECISION_FOLLOW = 1
MIXED_PRECISION_NEVER = 2

DEFAULT_ALWAYS_LIST = ["nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose",
                       "nn.conv2d_transpose", "nn.conv3d_transpose", "nn.dense", "nn.matmul",
                       "nn.batch_matmul"]
DEFAULT_FOLLOW_LIST = [
    # shape and data movement
    "nn.pad", "nn.batch_flatten", "concatenate", "zeros", "split", "squeeze", "transpose",
    "expand_dims", "reshape", "dyn.reshape", "broadcast_to", "broadcast_to_like",
    "dyn.broadcast_to", "strided_slice", "dyn.strided_slice", "take", "argwhere", "where",
    "tile", "dyn.tile", "scatter", "scatter_elements", "scatter_nd", "full", "dyn.full",
    "nn.depth_to_space", "nn.space_to_depth", "layout_transform", "stack", "reverse",
    "annotation.stop_fusion",
    # comparisons
    "less", "greater", "less_equal", "greater_equal", "equal", "not_equal",
    # copies and casts follow their input
    "copy", "cast", "cast_like",
    # simple arithmetic
    "add", "subtract", "multiply", "divide", "negative", "abs", "nn.bias_add", "nn.batch_norm",
    "sqrt", "rsqrt", "shape_of",
    # simple activations
    "max", "min", "maximum", "minimum", "argmax", "argmin", "nn.relu", "nn.leaky_relu",
    "nn.prelu", "nn.dropout",
    # activations that saturate in a narrow range
    "sigmoid", "tanh", "fast_tanh", "fast_exp", "fast_erf", "clip",
    # pooling
    "nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d", "nn.avg_pool1d", "nn.avg_pool2d",
    "nn.avg_pool3d", "nn.global_max_pool2d", "nn.adaptive_max_pool1d",
    "nn.adaptive_max_pool2d", "nn.adaptive_max_pool3d", "image.resize2d",
]
DEFAULT_NEVER_LIST = [
    # |f(x)| much larger than |x|
    "exp", "power", "nn.cross_entropy", "nn.cross_entropy_with_logits", "nn.softmax",
    "nn.log_softmax", "nn.l2_normalize", "erf", "log",
    # arange bounds may not fit float16
    "arange",
    # long sums
    "nn.global_avg_pool2d", "nn.adaptive_avg_pool1d", "nn.adaptive_avg_pool2d",
    "nn.adaptive_avg_pool3d", "sum", "mean", "variance", "prod", "cumsum", "cumprod",
    "nn.layer_norm",
]


def register_func_to_op_list(list_ops: Sequence[str], level: int = 10) -> Callable:
    """A decorator registering the function it decorates as the rule of every op of
    ``list_ops`` that ember defines."""
    def decorator(func: Callable) -> Callable:
        for name in list_ops:
            if name in OP_REGISTRY:
                register_mixed_precision_conversion(name, func=func, level=level)
        return func
    return decorator


def get_generic_out_dtypes(call: Any, mixed_precision_type: str) -> list[str]:
    """``[accumulation_dtype, output_dtype]``: float32 accumulation for ops with an
    ``out_dtype`` attribute, the low precision type throughout for the others."""
    if hasattr(call.attrs, "out_dtype"):
        return ["float32", mixed_precision_type]
    return [mixed_precision_type, mixed_precision_type]


@register_func_to_op_list(DEFAULT_ALWAYS_LIST)
def generic_always_op(call: Any, mixed_precision_type: str) -> list[Any]:
    return [MIXED_PRECISION_ALWAYS, *get_generic_out_dtypes(call, mixed_precision_type)]


@register_func_to_op_list(DEFAULT_FOLLOW_LIST)
def generic_follow_op(call: Any, mixed_precision_type: str) -> list[Any]:
    return [MIXED_PRECISION_FOLLOW, *get_generic_out_dtypes(call, mixed_precision_type)]


@register_func_to_op_list(DEFAULT_NEVER_LIST)
def generic_never_op(call: Any, mixed_precision_type: str) -> list[Any]:
    return [MIXED_PRECISION_NEVER, *get_generic_out_dtypes(call, mixed_precision_type)]
