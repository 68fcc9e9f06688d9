"""collapse_sum_like and collapse_sum_to: the adjoint of broadcasting.

``collapse_sum_like(data, like)`` sums ``data`` down to the shape of ``like``: over the leading
axes ``like`` does not have, and (keeping them) over the axes where ``like`` has 1 and ``data``
does not. It is how a gradient flows back through a broadcasting op (``add(x, b)`` with ``b``
of shape (C, 1, 1)); ``collapse_sum_to(data, shape)`` takes the shape as an attribute.
``like`` must broadcast to ``data``'s shape.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import topi
from ...ir.expr import Call
from ...ir.types import TensorType, Type
from ...te import tensor as te
from ._compute_common import cast_to
from ._reg import COMM_REDUCE, call, defop
from ._shape import fail, fmt_shape, known, tensor_of
from .attrs import InitOpAttrs

__all__ = ["collapse_sum_like", "collapse_sum_to"]


def collapse_axes(op: str, src: Sequence[Any], dst: Sequence[Any]) -> tuple[list[int], int]:
    """(axes of ``src`` to sum, how many of them are leading axes that go away)."""
    lead = len(src) - len(dst)
    if lead < 0:
        raise fail(op, f"cannot collapse {fmt_shape(src)} to {fmt_shape(dst)}: the target "
                       "has more dimensions")
    axes = list(range(lead))
    for i, (s, d) in enumerate(zip(src[lead:], dst)):
        if known(d) and d == 1 and not (known(s) and s == 1):
            axes.append(lead + i)
        elif known(s, d) and s != d:
            raise fail(op, f"cannot collapse {fmt_shape(src)} to {fmt_shape(dst)}: dimension "
                           f"{lead + i} is {s} vs {d}")
    return axes, lead


def _collapse_ref(x: np.ndarray, dst: Sequence[int], op: str) -> np.ndarray:
    axes, _ = collapse_axes(op, x.shape, dst)
    out = np.sum(x, axis=tuple(axes), keepdims=True, dtype=x.dtype) if axes else x
    return np.reshape(out, tuple(dst))


def _collapse_compute(op: str) -> Any:
    def rule(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x, dst = inputs[0], out_type.shape  # type: ignore[attr-defined]
        axes, _ = collapse_axes(op, x.shape, dst)
        out = topi.sum(x, axes, keepdims=True) if axes else x
        return [cast_to(topi.reshape(out, list(dst)), out_type.dtype)]  # type: ignore
    return rule


def _like_rel(args: list[TensorType], attrs: Any) -> TensorType:
    data, like = args
    collapse_axes("collapse_sum_like", data.shape, like.shape)
    return tensor_of(like.shape, data.dtype)


def _to_rel(args: list[TensorType], attrs: InitOpAttrs) -> TensorType:
    collapse_axes("collapse_sum_to", args[0].shape, attrs.shape)
    return tensor_of(attrs.shape, args[0].dtype)


defop("collapse_sum_like", _like_rel,
      lambda x, like, attrs: _collapse_ref(x, like.shape, "collapse_sum_like"), COMM_REDUCE,
      args=("data", "collapse_type"), doc="Sum data down to the shape of collapse_type.",
      compute=_collapse_compute("collapse_sum_like"))
defop("collapse_sum_to", _to_rel,
      lambda x, attrs: _collapse_ref(x, attrs.shape, "collapse_sum_to"), COMM_REDUCE,
      attrs=InitOpAttrs, doc="Sum data down to a shape.",
      compute=_collapse_compute("collapse_sum_to"))


def collapse_sum_like(data: Any, collapse_type: Any) -> Call:
    """``data`` summed down to the shape of ``collapse_type`` (the adjoint of broadcasting)."""
    return call("collapse_sum_like", data, collapse_type)


def collapse_sum_to(data: Any, shape: Sequence[int]) -> Call:
    """``data`` summed down to ``shape``."""
    return call("collapse_sum_to", data, attrs=InitOpAttrs(tuple(shape)))
