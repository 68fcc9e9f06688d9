"""Scan: the body graph run once per element of the scan inputs, carrying states.

Scan-9 and later: ``Scan(init_1..init_n, scan_1..scan_m)`` slices every scan input along its
``scan_input_axes`` entry (from the end for ``scan_input_directions`` 1), runs the body on
(states, slices), and stacks each scan output element along its ``scan_output_axes`` entry
(prepended for ``scan_output_directions`` 1). A known length unrolls (the body converted once
per step: straight-line Relay for every executor), a symbolic one becomes a loop on the VM
(``_recurrence.recur``).

Scan-8 has a batch axis 0 on every state and scan input (scanned along axis 1) and runs the
body per batch element: ember unrolls the batch (its size must be known) and takes
``sequence_lens`` only when it is known to be the full length for every batch element.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from ._node import Node
from ._recurrence import Dim, Step, recur
from ._util import norm_axis


def scan(node: Node) -> list[RelayExpr]:
    if node.version < 9:
        return _scan8(node)
    m = _num_scan_inputs(node, node.num_inputs)
    n = node.num_inputs - m
    states = [node.input(i, f"initial state {i}") for i in range(n)]
    inputs = [node.input(n + j, f"scan input {j}") for j in range(m)]
    return _scan(node, states, inputs, _ints(node, "scan_input_axes", m, "input"))


def _num_scan_inputs(node: Node, given: int) -> int:
    m = node.attr("num_scan_inputs")
    if not isinstance(m, int) or not 1 <= m <= given:
        raise node.invalid_attr("num_scan_inputs", m, f"between 1 and the {given} input(s) "
                                "given")
    return m


def _ints(node: Node, name: str, count: int, per: str) -> list[int]:
    """Attribute ``name``: ``count`` ints, one per scan ``per`` (default all 0)."""
    values = [int(v) for v in node.attr(name, [0] * count)]
    if len(values) != count:
        raise node.invalid_attr(name, values, f"{count} value(s), one per scan {per}")
    return values


def _directions(node: Node, name: str, count: int, per: str) -> list[bool]:
    values = _ints(node, name, count, per)
    for v in values:
        if v not in (0, 1):
            raise node.invalid_attr(name, values, "0 (forward) or 1 (reverse) per entry")
    return [v == 1 for v in values]


def _scan(node: Node, states: list[RelayExpr], inputs: list[RelayExpr], axes: list[int],
          input_dirs: list[bool] | None = None) -> list[RelayExpr]:
    """Scan-9 semantics over ``states`` and ``inputs`` (scanned along ``axes``)."""
    body = node.attr("body")
    n, m = len(states), len(inputs)
    if len(body.input) != n + m:
        raise node.fail(f"the body has {len(body.input)} inputs; expected {n + m} ({n} "
                        f"state(s), {m} scan input element(s))")
    k = len(body.output) - n
    if k < 0:
        raise node.fail(f"the body has {len(body.output)} outputs, fewer than its {n} "
                        "state(s)")
    types = [node.type_of(x) for x in inputs]
    axes = [norm_axis(node, a, ty.ndim, "scan_input_axes entry") for a, ty in zip(axes, types)]
    if input_dirs is None:
        input_dirs = _directions(node, "scan_input_directions", m, "input")
    length = _length(node, [ty.shape[a] for ty, a in zip(types, axes)])
    names = [vi.name for vi in body.input]

    def step(t: Step, carried: list[RelayExpr]) -> tuple[list[RelayExpr], list[RelayExpr]]:
        elems = [t.read(x, a, rev) for x, a, rev in zip(inputs, axes, input_dirs)]
        bindings = dict(zip(names, [*carried, *elems]))
        outs = [node.finish(e) for e in node.scope.convert_subgraph(body, bindings)]
        return outs[:n], outs[n:]

    out_dirs = _directions(node, "scan_output_directions", k, "output") if node.version >= 9 else \
        [False] * k
    finals, stacked = recur(node, inputs[0], axes[0], states, step, out_dirs,
                            length if isinstance(length, int) else None)
    out_axes = _ints(node, "scan_output_axes", k, "output") if node.version >= 9 else [0] * k
    moved = []
    for j, (y, a) in enumerate(zip(stacked, out_axes)):
        ndim = node.type_of(y).ndim
        a = norm_axis(node, a, ndim, f"scan_output_axes entry {j}")
        moved.append(y if a == 0 else _op.transpose(y, _move_first(ndim, a)))
    return [*finals, *moved]


def _move_first(ndim: int, axis: int) -> list[int]:
    """The permutation moving axis 0 to ``axis``."""
    rest = list(range(1, ndim))
    return rest[:axis] + [0] + rest[axis:]


def _length(node: Node, dims: list[Any]) -> Dim:
    """The sequence length all scan inputs share (an int when one of them knows it)."""
    static = sorted({d for d in dims if isinstance(d, int)})
    if len(static) > 1:
        raise node.fail(f"the scan inputs have different lengths {dims} along their scan axes")
    if static:
        return static[0]
    return dims[0]


# ---------------------------------------------------------------- Scan-8
def _scan8(node: Node) -> list[RelayExpr]:
    given = node.num_inputs - 1
    m = _num_scan_inputs(node, given)
    n = given - m
    states = [node.input(1 + i, f"initial state {i}") for i in range(n)]
    inputs = [node.input(1 + n + j, f"scan input {j}") for j in range(m)]
    batch = node.type_of((states + inputs)[0]).shape[0]
    if not isinstance(batch, int):
        raise node.unsupported("Scan-8 runs its body per batch element: the batch size (axis "
                               "0) must be known when importing")
    _check_full_lengths(node, inputs, batch)
    dirs = _directions(node, "directions", m, "input")
    per_batch = []
    for b in range(batch):
        index = const(np.array(b, "int64"))
        per_batch.append(_scan(node, [_op.take(s, index, axis=0) for s in states],
                               [_op.take(x, index, axis=0) for x in inputs], [0] * m, dirs))
    return [_op.stack([outs[j] for outs in per_batch], 0) for j in range(len(per_batch[0]))]


def _check_full_lengths(node: Node, inputs: list[RelayExpr], batch: int) -> None:
    if not node.has_input(0):
        return
    lens = node.value(0)
    seq = node.type_of(inputs[0]).shape[1]
    if lens is None or not isinstance(seq, int) or np.any(np.asarray(lens) != seq):
        raise node.unsupported(f"sequence_lens must be known and equal to the sequence length "
                               f"{seq} for each of the {batch} batch element(s) (shorter "
                               "sequences are not supported)")
