"""Slices and concatenations that make no call: views, and inputs written in place.

``place_views(df, callees)`` marks steps of a fresh ``Dataflow`` (``Dataflow.from_function``
calls it, unless the PassContext option ``relay.backend.concat_in_place`` is false), in
execution order:

- SLICE: a call of a Primitive function that is only ``strided_slice`` of its one param with
  unit strides, whose output is one contiguous byte range of the input (every axis before the
  sliced one has extent 1, every axis after it is whole: yolov8's Split of a conv's channel
  blocks). Its output is those bytes of its input; no copy. Not when the input lives in a
  param or constant of ``main`` (the caller's memory, which ``share_params`` may swap), nor
  when the output is an output of ``main`` (the caller's memory, of its own size).
- CONCAT: a call of a Primitive function that is only ``concatenate`` of fields that are its
  params, or contiguous slices of them, along an axis whose preceding axes have extent 1 (so
  each field is one contiguous byte range of the output: N=1 in NCHW, the block axis of
  NCHW[x]c). Through the views, each field is bytes of a root tensor. The concatenation is
  made in place when each such root can move into the output whole, where its fields are:
  its fields lie at one offset from it, cover all of it, and it fits; and the root is an
  intermediate made by a kernel call (or an earlier CONCAT step: nested concatenations), not
  already moved into another concatenation, and neither an output of ``main`` nor viewed by
  one. Its producer then writes it there, and the step makes no call; the step's inputs
  become those roots, laid end to end. Other readers of a root are fine: they read its bytes
  in the output, which lives as long as any of its parts (``Dataflow.groups``).

A concatenation fused with anything else (an elementwise op after it, an upsampling of one
field) stays a kernel. Producers write exactly their tensor's bytes: every kernel's output
buffer is its shape (the AOT arena packs tensors back to back and relies on the same).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...ir.expr import Call, Function, RelayExpr, Tuple, Var
from ...ir.op import Op
from ...ir.types import TensorType
from ._liveness import CONCAT, INTERMEDIATE, SLICE, Dataflow, Step

Field = tuple[int, int, int]  # (param index, byte offset in the param, bytes)


def _itemsize(ty: TensorType) -> int:
    from ...runtime.dtype import DataType

    dt = DataType(ty.dtype)
    return (dt.bits * dt.lanes + 7) // 8


def _static(ty: object) -> tuple[int, ...] | None:
    if not isinstance(ty, TensorType) or not ty.is_static:
        return None
    return tuple(int(d) for d in ty.shape)  # type: ignore[arg-type]


def slice_offset(body: Call) -> int | None:
    """The byte offset in its input of ``strided_slice`` call ``body`` (typed) when its
    output is one contiguous byte range of the input, else None."""
    attrs: Any = body.attrs
    in_ty, out_ty = body.args[0].checked_type_, body.checked_type_
    src, dst = _static(in_ty), _static(out_ty)
    if src is None or dst is None or len(src) != len(dst):
        return None
    if attrs.slice_mode == "end" and any(s != 1 for s in attrs.strides):
        return None
    begin = [0] * len(src)
    for ax, b in zip(attrs.axes if attrs.axes is not None else range(len(attrs.begin)),
                     attrs.begin):
        ax = ax + len(src) if ax < 0 else ax
        if not 0 <= ax < len(src):
            return None
        begin[ax] = min(max(b + src[ax] if b < 0 else b, 0), src[ax])
    cut = next((a for a in range(len(src)) if src[a] != dst[a]), None)
    if cut is None:  # the whole tensor
        return None if any(begin) else 0
    # one byte range: the axes before the cut of extent 1, the axes after it whole
    if (any(src[a] != 1 for a in range(cut)) or any(begin[a] for a in range(len(src)) if a != cut)
            or any(src[a] != dst[a] for a in range(cut + 1, len(src)))
            or begin[cut] + dst[cut] > src[cut]):
        return None
    return begin[cut] * math.prod(src[cut + 1:]) * _itemsize(in_ty)  # type: ignore[arg-type]


def _is_op(expr: RelayExpr, name: str) -> bool:
    return isinstance(expr, Call) and isinstance(expr.op, Op) and expr.op.name == name


def slice_view(func: RelayExpr) -> int | None:
    """For a Primitive function that is only a contiguous ``strided_slice`` of its one param:
    the byte offset of its output in the param; else None."""
    if not isinstance(func, Function) or len(func.params) != 1:
        return None
    body: Any = func.body
    if not _is_op(body, "strided_slice") or body.args[0] is not func.params[0]:
        return None
    return slice_offset(body)


def concat_fields(func: RelayExpr) -> tuple[list[Field], int] | None:
    """For a Primitive function that is only ``concatenate`` of its tensor params or
    contiguous slices of them: each field as (param index, byte offset in it, bytes), and the
    axis (maybe negative); else None."""
    if not isinstance(func, Function) or not _is_op(func.body, "concatenate"):
        return None
    body: Any = func.body
    if not isinstance(body.args[0], Tuple):
        return None
    index = {id(p): k for k, p in enumerate(func.params)}
    if not all(isinstance(p.checked_type_, TensorType) for p in func.params):
        return None
    fields: list[Field] = []
    for field in body.args[0].fields:
        f: Any = field
        nbytes, offset = _nbytes(f.checked_type_), 0
        if _is_op(f, "strided_slice") and isinstance(f.args[0], Var):
            offset, f = slice_offset(f), f.args[0]
        if nbytes is None or offset is None or id(f) not in index:
            return None
        fields.append((index[id(f)], offset, nbytes))
    return fields, int(body.attrs.axis)


def _nbytes(ty: object) -> int | None:
    shape = _static(ty)
    return None if shape is None else math.prod(shape) * _itemsize(ty)  # type: ignore[arg-type]


def place_views(df: Dataflow, callees: Sequence[RelayExpr]) -> None:
    """Mark the SLICE and CONCAT steps of ``df`` (see the module docstring); ``callees``:
    per step, its callee."""
    roots = df.alias_roots()  # the reshape views only, so far
    outputs = set(df.outputs)
    for step, callee in zip(df.steps, callees, strict=True):
        if step.nop is not None or len(step.inputs) != 1 or len(step.outputs) != 1:
            continue
        offset = slice_view(callee)
        src, out = step.inputs[0], step.outputs[0]
        if offset is not None and df.tensors[roots[src]].kind == INTERMEDIATE \
                and out not in outputs:
            step.nop, step.offset = SLICE, offset
            roots[out] = roots[src]
    _place_concats(df, callees, {roots[t] for t in df.outputs})


def _place_concats(df: Dataflow, callees: Sequence[RelayExpr], output_groups: set[int]) -> None:
    made_by: dict[int, Step] = {t: s for s in df.steps for t in s.outputs}
    placed: set[int] = set()

    def movable(r: int) -> bool:
        maker = made_by.get(r)
        return (df.tensors[r].kind == INTERMEDIATE and r not in placed
                and r not in output_groups and maker is not None
                and maker.nop in (None, CONCAT))

    for step, callee in zip(df.steps, callees, strict=True):
        spec = concat_fields(callee) if step.nop is None and len(step.outputs) == 1 else None
        if spec is None or len(callee.params) != len(step.inputs):  # type: ignore[attr-defined]
            continue
        fields, axis = spec
        shape = df.tensors[step.outputs[0]].shape
        axis = axis + len(shape) if axis < 0 else axis
        if any(d != 1 for d in shape[:axis]):
            continue
        moved = _roots_in_place(df, step, fields)
        if moved is None or not all(movable(r) for r in moved):
            continue
        step.inputs, step.nop = moved, CONCAT
        placed.update(moved)


def _roots_in_place(df: Dataflow, step: Step, fields: list[Field]) -> list[int] | None:
    """The roots the fields of concatenation ``step`` are bytes of, in output order, when
    each can move into the output whole (its fields at one offset from it, covering all of
    it, within the output); else None."""
    places = df.alias_places()
    groups = df.groups()
    by_root: dict[int, list[tuple[int, int, int]]] = {}  # root -> (offset in it, at, bytes)
    at = 0
    for k, offset, nbytes in fields:
        root, base = places[step.inputs[k]]
        by_root.setdefault(root, []).append((base + offset, at, nbytes))
        at += nbytes
    start: dict[int, int] = {}
    for root, parts in by_root.items():
        starts = {pos - off for off, pos, _ in parts}
        extent = groups[root].nbytes
        if len(starts) != 1 or extent != df.tensors[root].nbytes:
            return None
        start[root] = starts.pop()
        covered = 0
        for off, _, nbytes in sorted(parts):
            if off != covered:
                return None
            covered += nbytes
        if covered != extent or start[root] < 0 or start[root] + extent > at:
            return None
    return sorted(start, key=start.__getitem__)
