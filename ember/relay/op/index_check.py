"""``check_indices``: run-time indices, passed through unchanged when every one is in range.

ONNX's Gather, GatherElements, GatherND, ScatterElements and ScatterND make an index outside
``[-n, n)`` an error (onnxruntime raises), while the kernels of ``take``, ``gather``,
``gather_nd`` and the scatters wrap or clamp it so that nothing is read or written outside
the tensor. The ONNX importer puts this op in front of them for indices known only at run
time (constant indices are checked at import), so a bad index stops the run with a message
naming the node, the element and the range instead of giving a plausible wrong answer.

``axes`` are the axes of ``data`` the index values address: one axis (every element is an
index into it), or one per position of the index tuples that run along the last axis of
``indices`` (GatherND/ScatterND, in ONNX's layout). The C side is
``ember/include/ember/kernels/index_check.h``: one pass over the indices, copied as checked.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...ir.expr import Call
from ...ir.types import TensorType, Type
from ...runtime.errors import ArgumentIndexError
from ...te import tensor as te
from ...tir import op as tir
from ...topi.nn.sizes import calls_succeed
from ._attrs_base import OpAttrs, attrs_class
from ._reg import OPAQUE, call, defop
from ._shape import fail, fmt_type, norm_axis

__all__ = ["check_indices"]

HEADER = "ember/kernels/index_check.h"
_DTYPES = ("int32", "int64")


@attrs_class("CheckIndicesAttrs")
class CheckIndicesAttrs(OpAttrs):
    """check_indices: the axes of data the indices address (one, or one per tuple position
    along the last axis of indices) and ``where`` they come from (named by the error)."""

    axes: tuple[int, ...] = (0,)
    where: str = ""
    _op: ClassVar[str] = "check_indices"

    def __post_init__(self) -> None:
        self._ints("axes")
        if not self.axes:
            raise self._invalid("axes", "at least one axis")
        self._set("where", str(self.where))


def _label(attrs: CheckIndicesAttrs) -> str:
    return attrs.where or "check_indices"


def _rel(args: list[TensorType], attrs: CheckIndicesAttrs) -> TensorType:
    data, indices = args
    op = "check_indices"
    if indices.dtype not in _DTYPES:
        raise fail(op, f"indices must be int32 or int64, got {fmt_type(indices)}")
    for a in attrs.axes:
        norm_axis(op, a, data.ndim)
    if len(attrs.axes) > 1 and (indices.ndim == 0 or indices.shape[-1] != len(attrs.axes)):
        raise fail(op, f"indices {fmt_type(indices)} must hold tuples of {len(attrs.axes)} "
                       "indices along their last axis")
    return indices


def _ref(data: np.ndarray, indices: np.ndarray, attrs: CheckIndicesAttrs) -> np.ndarray:
    period = len(attrs.axes)
    flat = indices.reshape(-1).astype(np.int64)
    for k, a in enumerate(attrs.axes):
        n = data.shape[a]
        part = flat[k::period]
        bad = np.flatnonzero((part < -n) | (part >= n))
        if bad.size:
            at = int(bad[0]) * period + k
            raise ArgumentIndexError(
                f"{_label(attrs)}: index {flat[at]} (element {at} of the indices, flat) is out "
                f"of range for axis {a % data.ndim} of data (size {n}): indices must be in "
                f"[{-n}, {n - 1}]")
    return indices.copy()


def _compute(attrs: Any, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
    data, indices = inputs
    period = len(attrs.axes)
    count: Any = tir.const(1, "int64")
    for d in indices.shape:
        count = count * tir.cast(d, "int64")
    entry = f"ember_check_indices_{'i64' if indices.dtype == 'int64' else 'i32'}"
    what = _label(attrs)

    def body(ins: list, outs: list) -> Any:
        calls = [tir.call_extern("int32", entry, ins[1].data, outs[0].data, count,
                                 tir.const(period, "int64"), tir.const(k, "int64"),
                                 tir.const(a % data.ndim, "int64"),
                                 tir.cast(data.shape[a % data.ndim], "int64"), tir.StringImm(what),
                                 header=HEADER)
                 for k, a in enumerate(attrs.axes)]
        return calls_succeed(calls)

    return [te.extern(indices.shape, [data, indices], body, name="T_check_indices",
                      dtype=indices.dtype, tag="check_indices")]


defop("check_indices", _rel, _ref, OPAQUE, args=("data", "indices"), attrs=CheckIndicesAttrs,
      doc="Indices passed through, failing the run when one is out of range for data.",
      compute=_compute)


def check_indices(data: Any, indices: Any, axes: Any = (0,), where: str = "") -> Call:
    """``indices``, unchanged, once each is in ``[-n, n)`` for the axis of ``data`` it
    addresses (``axes``: one, or one per tuple position along indices' last axis); a run
    with one out of range fails, naming ``where``, the element and the range."""
    return call("check_indices", data, indices,
                attrs=CheckIndicesAttrs(tuple(axes) if not isinstance(axes, int) else (axes,),
                                        where))
