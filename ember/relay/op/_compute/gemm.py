"""Compute rules of the fused GEMM ops (``relay/op/nn/gemm.py``): both go to
``topi.nn.gemm_kernel`` (the C kernel ``ember_sgemm`` and its panel packing)."""
from __future__ import annotations

from typing import Any

from ....ir.types import Type
from ....runtime.errors import OpError
from ....te import tensor as te
from ....topi.nn import gemm_kernel as gk
from ._common import out_dims, register_compute


@register_compute("nn.contrib_gemm_pack")
def gemm_pack(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    return [gk.pack_weight(inputs[0], attrs.nr, attrs.transpose)]


@register_compute("nn.contrib_gemm")
def gemm(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    """One ``ember_sgemm`` call with the epilogue of the attrs."""
    data, weight, bias, residual = inputs
    if attrs.view:
        ops = gk.GemmOperands(*attrs.view[:9], 0, *attrs.view[9:])
    elif attrs.packed_n:
        if attrs.kind == "batch_matmul":
            raise OpError("nn.contrib_gemm: a packed weight is 2-d; batch_matmul cannot use it")
        ops = gk.dense_operands(data, weight, attrs.packed_n)
    elif attrs.kind == "batch_matmul":
        ops = gk.batch_matmul_operands(data, weight, attrs.transpose_b)
    else:
        ops = gk.matmul_operands(data, weight, attrs.transpose_b)
    epilogue = gk.Epilogue(attrs.alpha, attrs.act1, attrs.p1, attrs.act2, attrs.p2)
    shape = out_dims(out_type, [None] * len(out_type.shape))  # type: ignore[attr-defined]
    return [gk.sgemm(data, weight, ops, shape, epilogue, bias if attrs.has_bias else None,
                     residual if attrs.has_residual else None, name="T_gemm")]
