"""Sequence operators: SequenceConstruct, SequenceEmpty, SequenceAt, SequenceInsert,
SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, SequenceMap.

A sequence of known length is a Relay tuple and these operators act on it at import time; a
sequence whose length is only known at run time is a Prelude List that the VM works on
(``_sequences.py``). An operator turns a tuple into a List only when it must: a position known
only at run time, a ``Loop`` carrying the sequence, ``If`` branches of different lengths.

Positions follow ONNX: negative ones count from the end; ``SequenceInsert`` and
``SequenceErase`` without one insert at / erase from the end. A known position out of range is
refused at import; at run time a List position out of range stops the VM with a failed match.
"""
from __future__ import annotations

from typing import Any


from ....ir.expr import RelayExpr, Tuple
from ....ir.types import TensorType
from ... import op as _op
from ._node import Node
from ._sequences import (
    SeqType,
    ascribe,
    call_prelude,
    concat_list,
    element_fit,
    fresh_sizes,
    items_of,
    ir_type,
    make_tuple,
    seq_input,
    to_list,
)
from ._util import norm_axis


def sequence_construct(node: Node) -> RelayExpr:
    xs = node.inputs()
    if not xs:
        raise node.fail("needs at least one input tensor")
    return make_tuple(node, xs, node.dtype(0))


def sequence_empty(node: Node) -> RelayExpr:
    from ._proto import dtype_of

    out = Tuple(())
    node.declare(out, SeqType(dtype_of(node.attr("dtype", 1), f"{node.label}: dtype"), None,
                              ()))
    return out


def sequence_length(node: Node) -> RelayExpr:
    seq, ty = seq_input(node, 0)
    if ty.items is not None:
        return node.const(len(ty.items), "int64")
    return _op.cast(_length(node, seq), "int64")


def _length(node: Node, xs: RelayExpr) -> RelayExpr:
    return call_prelude(node, "length", [xs], TensorType((), "int32"))


# ---------------------------------------------------------------- positions
def _known_position(node: Node, i: int, length: int, end_ok: bool) -> int:
    """Input ``i`` (known) as a position in [0, length) ([0, length] with ``end_ok``)."""
    v = node.const_value(i, "position")
    if v.size != 1 or v.dtype.kind not in "iu":
        raise node.fail(f"position must be one integer, got {v.dtype}{list(v.shape)}")
    pos = int(v.reshape(-1)[0])
    hi = length if end_ok else length - 1
    if not -length <= pos <= hi:
        raise node.fail(f"position {pos} is out of range for a sequence of length {length} "
                        f"(allowed: {-length} to {hi})")
    return pos + length if pos < 0 else pos


def _run_time_position(node: Node, i: int, xs: RelayExpr) -> RelayExpr:
    """Input ``i`` as an int32 scalar in [0, length] (negative positions count from the
    end of List ``xs``)."""
    pos = node.input(i, "position")
    if node.type(i).dtype not in ("int32", "int64"):
        raise node.fail(f"position must be int32 or int64, got {node.type(i).dtype}")
    pos = _op.cast(_op.reshape(pos, []) if node.ndim(i) else pos, "int32")
    zero = node.const(0, "int32")
    return _op.where(_op.less(pos, zero), _op.add(pos, _length(node, xs)), pos)


def _static_position(node: Node, i: int, ty: SeqType) -> bool:
    """Whether the sequence has a known length and input ``i`` is absent or known."""
    return ty.items is not None and (not node.has_input(i) or node.value(i) is not None)


# ---------------------------------------------------------------- At, Insert, Erase
def sequence_at(node: Node) -> RelayExpr:
    seq, ty = seq_input(node, 0)
    if _static_position(node, 1, ty):
        assert ty.items is not None
        k = _known_position(node, 1, len(ty.items), end_ok=False)
        return items_of(node, seq, ty)[k]
    if ty.elem is None:
        raise node.fail("the sequence is empty (no element to take)")
    xs = to_list(node, seq)
    call = call_prelude(node, "nth", [xs, _run_time_position(node, 1, xs)], ty.elem)
    return fresh_sizes(node, call, ty.elem)


def sequence_insert(node: Node) -> RelayExpr:
    seq, ty = seq_input(node, 0)
    tensor, t = node.input(1, "tensor"), node.type(1)
    if t.dtype != ty.dtype:
        raise node.fail(f"cannot insert a {t.dtype} tensor into a sequence of {ty.dtype}")
    fit = element_fit(node, ty.elem, t)
    if _static_position(node, 2, ty):
        assert ty.items is not None
        items = items_of(node, seq, ty)
        k = _known_position(node, 2, len(items), end_ok=True) if node.has_input(2) else len(
            items)
        return make_tuple(node, [*items[:k], tensor, *items[k:]], ty.dtype)
    imp = node.scope.importer
    xs = to_list(node, seq, t)
    out_ty = SeqType(ty.dtype, fit)
    tensor = ascribe(tensor, ir_type(imp, fit))  # the element type, not its own sizes
    if not node.has_input(2):
        tail = imp.prelude.cons(tensor, imp.prelude.nil())
        return call_prelude(node, "concat", [xs, tail], out_ty)
    return call_prelude(node, "insert_at", [xs, _run_time_position(node, 2, xs), tensor], out_ty)


def sequence_erase(node: Node) -> RelayExpr:
    seq, ty = seq_input(node, 0)
    if _static_position(node, 1, ty):
        assert ty.items is not None
        items = items_of(node, seq, ty)
        if not items:
            raise node.fail("cannot erase from an empty sequence")
        k = _known_position(node, 1, len(items), end_ok=False) if node.has_input(1) else len(
            items) - 1
        return make_tuple(node, items[:k] + items[k + 1:], ty.dtype)
    xs = to_list(node, seq)
    if node.has_input(1):
        pos = _run_time_position(node, 1, xs)
    else:
        pos = _op.subtract(_length(node, xs), node.const(1, "int32"))
    return call_prelude(node, "remove_at", [xs, pos], SeqType(ty.dtype, ty.elem))


# ---------------------------------------------------------------- Split / Concat
def split_to_sequence(node: Node) -> RelayExpr:
    x, ty = node.input(0), node.type(0)
    axis = norm_axis(node, node.attr("axis", 0), ty.ndim)
    dim = ty.shape[axis]
    if node.has_input(1):
        sizes = _split_sizes(node, dim)
        keep = True
    else:  # pieces of one, squeezed unless keepdims
        if not isinstance(dim, int):
            raise node.unsupported(f"splitting axis {axis} of symbolic size into pieces of one "
                                   "needs its size at import (give it with from_onnx(shape=...))")
        sizes, keep = [1] * dim, bool(node.attr("keepdims", 1))
    if isinstance(dim, int) and sum(sizes) != dim:
        raise node.fail(f"split sizes {sizes} do not add up to the size {dim} of axis {axis}")
    pieces, start = [], 0
    for size in sizes:
        piece = _op.strided_slice(x, [start], [start + size], axes=[axis])
        pieces.append(piece if keep else _op.squeeze(piece, [axis]))
        start += size
    return make_tuple(node, pieces, ty.dtype)


def _split_sizes(node: Node, dim: Any) -> list[int]:
    v = node.const_value(1, "split")
    if v.dtype.kind not in "iu" or v.ndim > 1:
        raise node.fail(f"split must be an integer scalar or 1-D tensor, got "
                        f"{v.dtype}{list(v.shape)}")
    if v.ndim == 1:
        sizes = [int(s) for s in v]
    else:  # a chunk size: the last piece takes what is left
        chunk = int(v)
        if chunk <= 0:
            raise node.fail(f"split {chunk} must be positive")
        if not isinstance(dim, int):
            raise node.unsupported("splitting an axis of symbolic size into chunks needs its "
                                   "size at import (give it with from_onnx(shape=...))")
        sizes = [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])
    if any(s < 0 for s in sizes):
        raise node.fail(f"split sizes {sizes} must not be negative")
    return sizes


def concat_from_sequence(node: Node) -> RelayExpr:
    seq, ty = seq_input(node, 0)
    new_axis = bool(node.attr("new_axis", 0))
    if ty.elem is None:
        raise node.fail("cannot concatenate an empty sequence")
    rank = ty.elem.ndim + new_axis
    axis = norm_axis(node, node.attr("axis"), rank)
    if ty.items is None:
        return concat_list(node, seq, ty.elem, axis, new_axis)
    items = items_of(node, seq, ty)
    if new_axis:
        return _op.stack(items, axis)
    return items[0] if len(items) == 1 else _op.concatenate(items, axis)
