"""ONNX Unique: relay ``unique`` (buffers of the input's size plus the count) cut to the count
found at run time with dyn.strided_slice, as NonZero is (the VM runs it).

Without ``axis`` the input is flattened; with one, the slices along it are compared whole
(the axis moved to the front, then back). ``sorted=1`` orders the values ascending
(lexicographically for slices), ``sorted=0`` by first occurrence; ``indices`` are the first
occurrences, ``inverse_indices`` each element's (slice's) position in Y, ``counts`` how often
each occurs: ONNX's rules, which onnxruntime follows."""
from __future__ import annotations

from ....ir.expr import RelayExpr
from ... import op as _op
from . import _runtime_values as rt
from ._node import Node
from ._util import norm_axis

I64 = "int64"


def unique(node: Node) -> list[RelayExpr]:
    x, shape = node.input(0, "X"), node.static_shape(0, "X")
    if node.has_attr("axis"):
        if not shape:
            raise node.fail("axis is given but X is a scalar")
        axis = norm_axis(node, node.attr("axis"), len(shape))
    else:
        x, axis = _op.reshape(x, (-1,)), 0
    order = None
    if axis:  # the slices along axis become rows
        order = [axis, *(a for a in range(len(shape)) if a != axis)]
        x = _op.transpose(x, order)
    values, first, inverse, num, counts = _op.unique(x, bool(node.attr("sorted", 1)), True)
    num = _op.cast(num, I64)

    def cut(t: RelayExpr) -> RelayExpr:
        return _op.strided_slice(t, rt.vector([0]), num, axes=[0])

    y = cut(values)
    if order is not None:  # the inverse permutation puts the axis back
        y = _op.transpose(y, [order.index(a) for a in range(len(order))])
    return [y, _op.cast(cut(first), I64), _op.cast(inverse, I64), _op.cast(cut(counts), I64)]
