"""FLOPs of a Relay model: the multiply-accumulates of its contraction ops, times two.

Counted (each as 2 * MACs, from the typed, unoptimised module, one inference):

- ``nn.conv2d``: N * OH * OW * prod(weight shape): every output pixel of every image meets
  every weight once; ``groups`` is in the weight's shape (O, I/groups, KH, KW), so grouped and
  depthwise convolutions count right;
- ``nn.conv2d_transpose``: N * IH * IW * prod(weight shape) (every input pixel is scattered
  through every weight);
- ``nn.dense``, ``nn.matmul``, ``nn.batch_matmul``: output elements * the contracted length.

Not counted: elementwise and broadcast ops (bias, batch norm, activations, residual adds),
pooling, softmax, reductions, layout and shape ops. They are cheap next to the contractions in
these models but are not free, so GFLOP/s here slightly understates the work done.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from ember import ir
from ember.relay.transform import InferType

COUNTED = ("nn.conv2d", "nn.conv2d_transpose", "nn.dense", "nn.matmul", "nn.batch_matmul")
NOT_COUNTED_NOTE = ("FLOPs = 2*MACs of conv2d (groups included), conv2d_transpose, "
                    "dense/matmul, batch_matmul; elementwise ops, pooling, softmax and "
                    "reductions are not counted")


def _shape(expr: ir.RelayExpr, what: str) -> tuple[int, ...]:
    dims = getattr(expr.checked_type, "shape", None)
    if dims is None or not all(isinstance(d, int) for d in dims):
        raise ValueError(f"count_flops: {what} needs a static tensor shape, got "
                         f"{expr.checked_type}")
    return tuple(int(d) for d in dims)


def _axes(layout: str) -> list[str]:
    """'NCHW8c' -> ['N', 'C', 'H', 'W', '8c']: one token per axis."""
    tokens, digits = [], ""
    for ch in layout:
        if ch.isdigit():
            digits += ch
        else:
            tokens.append(digits + ch)
            digits = ""
    return tokens


def _batch_and_spatial(shape: Sequence[int], layout: str) -> int:
    """Product of the N, H and W extents of a tensor in ``layout``."""
    axes = _axes(layout)
    if len(axes) != len(shape):
        raise ValueError(f"count_flops: layout {layout!r} does not fit shape {tuple(shape)}")
    return math.prod(d for d, a in zip(shape, axes) if a in ("N", "H", "W"))


def call_macs(call: ir.Call) -> int:
    """Multiply-accumulates of one call of a COUNTED op (typed)."""
    name, attrs = call.op.name, call.attrs
    if name == "nn.conv2d":
        out = _shape(call, name)
        weight = _shape(call.args[1], f"{name} weight")
        return _batch_and_spatial(out, attrs.out_layout or attrs.data_layout) * math.prod(weight)
    if name == "nn.conv2d_transpose":
        data = _shape(call.args[0], f"{name} data")
        weight = _shape(call.args[1], f"{name} weight")
        return _batch_and_spatial(data, attrs.data_layout) * math.prod(weight)
    out = _shape(call, name)
    a = _shape(call.args[0], f"{name} input")
    transpose_a = getattr(attrs, "transpose_a", False)
    k = a[-2] if transpose_a else a[-1]
    return math.prod(out) * k


def count_flops(mod: ir.IRModule) -> tuple[int, dict[str, int]]:
    """(total FLOPs, FLOPs per counted op name) of ``mod``'s ``main`` (typed here)."""
    mod = InferType()(mod)
    per_op: Counter[str] = Counter()
    for node in ir.post_order(mod["main"]):
        if isinstance(node, ir.Call) and isinstance(node.op, ir.Op) and node.op.name in COUNTED:
            per_op[node.op.name] += 2 * call_macs(node)
    return sum(per_op.values()), dict(per_op)
