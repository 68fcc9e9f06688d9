"""Layer helpers for the model zoo: ops that create their own named weight variables.

Each helper takes ``name=`` and makes the weights it is not given as unannotated
``relay.var(name + "_weight")`` (``_bias``, ``_gamma``, ...); InferType types them from the
data and the attributes, and ``init.create_workload`` picks an initial value from the suffix.
"""
from __future__ import annotations

from typing import Any

from ... import relay
from ...ir.expr import RelayExpr, Var

__all__ = [
    "batch_norm_infer",
    "conv2d",
    "conv2d_transpose",
    "conv_kernel_layout",
    "dense_add_bias",
]


def _weight(given: Var | None, name: str | None, suffix: str, helper: str) -> Var:
    if given is not None:
        return given
    if not name:
        raise ValueError(f"layers.{helper}: give name= (used for the {suffix} variable) "
                         f"or the {suffix} itself")
    return relay.var(f"{name}_{suffix}")


def batch_norm_infer(data: RelayExpr, gamma: Var | None = None, beta: Var | None = None,
                     moving_mean: Var | None = None, moving_var: Var | None = None,
                     name: str | None = None, **kwargs: Any) -> RelayExpr:
    """Batch norm for inference: field 0 of ``nn.batch_norm`` with weights ``name_gamma``,
    ``name_beta``, ``name_moving_mean``, ``name_moving_var``. kwargs: axis, epsilon, center,
    scale."""
    def weight(given: Var | None, suffix: str) -> Var:
        return _weight(given, name, suffix, "batch_norm_infer")

    return relay.nn.batch_norm(data, weight(gamma, "gamma"), weight(beta, "beta"),
                               weight(moving_mean, "moving_mean"),
                               weight(moving_var, "moving_var"), **kwargs)[0]


def conv2d(data: RelayExpr, weight: Var | None = None, name: str | None = None,
           **kwargs: Any) -> RelayExpr:
    """``nn.conv2d`` with weight ``name_weight``; kwargs as for ``relay.nn.conv2d``."""
    return relay.nn.conv2d(data, _weight(weight, name, "weight", "conv2d"), **kwargs)


def conv2d_transpose(data: RelayExpr, weight: Var | None = None, name: str | None = None,
                     **kwargs: Any) -> RelayExpr:
    """``nn.conv2d_transpose`` with weight ``name_weight``."""
    return relay.nn.conv2d_transpose(data, _weight(weight, name, "weight", "conv2d_transpose"),
                                     **kwargs)


def dense_add_bias(data: RelayExpr, weight: Var | None = None, bias: Var | None = None,
                   units: int | None = None, name: str | None = None,
                   **kwargs: Any) -> RelayExpr:
    """``bias_add(dense(data, name_weight), name_bias)`` along the last axis."""
    out = relay.nn.dense(data, _weight(weight, name, "weight", "dense_add_bias"), units, **kwargs)
    return relay.nn.bias_add(out, _weight(bias, name, "bias", "dense_add_bias"), axis=-1)


_KERNEL_LAYOUT = {"NCHW": "OIHW", "NHWC": "HWIO"}
_DEPTHWISE_KERNEL_LAYOUT = {"NCHW": "OIHW", "NHWC": "HWOI"}


def conv_kernel_layout(data_layout: str, is_depthwise: bool = False) -> str:
    """The kernel layout the zoo pairs with ``data_layout`` (OIHW for NCHW; HWIO, or HWOI
    for depthwise, for NHWC). Raises ValueError for any other layout."""
    table = _DEPTHWISE_KERNEL_LAYOUT if is_depthwise else _KERNEL_LAYOUT
    if data_layout not in table:
        raise ValueError(f"conv_kernel_layout: unknown data layout {data_layout!r}; "
                         f"expected one of {', '.join(table)}")
    return table[data_layout]
