"""Recurrences over a time axis, shared by the RNN operators (LSTM, GRU, RNN) and Scan.

    states, outputs = recur(node, length, states, step)

runs ``step(t, states) -> (new_states, outputs)`` once per time step and returns the final
states and each output stacked along a new first axis (in step order, or from the end for
the outputs listed in ``reverse_outputs``). How the steps run depends on the length:

- a known length up to ``MAX_UNROLL`` unrolls into straight-line Relay, so the graph and AOT
  executors run it (no control flow) and FuseOps fuses each step's ops; a step reads its
  slice with ``take`` at a constant index, so the steps share their kernels;
- an unknown length (a symbolic axis), or a longer one, becomes a recursive local function
  that the VM runs, one call per step::

      let %loop = fn (%t, %state..., %acc...) {
        if (%t < %length) { %loop(%t + 1, <step>..., concatenate(%acc, [%out])...) }
        else { (%t, %state..., %acc...) }
      };
      %loop(0, initial states..., empty outputs...)

  where a step reads its slice with ``take`` at ``%t``. Outputs grow by concatenation (as Loop's scan
  outputs do), which copies what was gathered so far at each step.

``step`` reads the slice of a sequence for its time step with ``t.read(seq, axis, reverse)``
and gets its index as a tensor with ``t.index(dtype)``; it never sees which form it runs in.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ....ir.expr import Call, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var, const
from ....ir.types import Any as AnyDim
from ....ir.types import FuncType, ShapeVar, TensorType, TupleType
from ... import op as _op
from ._node import Node

# Longest sequence that unrolls (each step adds a few operators to the model; compile time
# grows linearly: see docs/onnx.md). Longer known lengths run as a loop on the VM.
MAX_UNROLL = 1024

Dim = int | ShapeVar
StepFn = Callable[["Step", list[RelayExpr]], tuple[list[RelayExpr], list[RelayExpr]]]


class Step:
    """One time step as a ``step`` function sees it: the slices of sequences it reads and its
    index, for an unrolled step (``k`` an int) or a loop's (``k`` a 0-d int64 variable)."""

    def __init__(self, k: int | Var, length: int | RelayExpr,
                 bind: Callable[[RelayExpr], RelayExpr] | None = None) -> None:
        self.k, self.length, self._bind = k, length, bind

    def _position(self, reverse: bool) -> int | RelayExpr:
        if not reverse:
            return self.k
        if isinstance(self.k, int):
            return self.length - 1 - self.k  # type: ignore[operator]
        last = _op.subtract(self.length, const(np.array(1, "int64")))
        return _op.subtract(last, self.k)

    def read(self, seq: RelayExpr, axis: int = 0, reverse: bool = False) -> RelayExpr:
        """The slice of ``seq`` at this step along ``axis`` (that axis removed); from the end
        when ``reverse``."""
        pos = self._position(reverse)
        if isinstance(pos, int):
            # A 1-element index stays an input of the fused kernel (a scalar would be inlined),
            # so every unrolled step shares one kernel.
            picked = _op.take(seq, const(np.array([pos], "int64")), axis=axis)
            return _op.squeeze(picked, [axis])
        assert self._bind is not None, "a loop step binds what it reads"
        return _op.take(self._bind(seq), pos, axis=axis, mode="clip")

    def index(self, dtype: str) -> RelayExpr:
        """This step's index (0 for the first step) as a (1,) tensor of ``dtype``."""
        if isinstance(self.k, int):
            return const(np.array([self.k], dtype))
        k = _op.reshape(self.k, [1])
        return k if dtype == "int64" else _op.cast(k, dtype)


def axis_length(x: RelayExpr, axis: int) -> RelayExpr:
    """The size of axis ``axis`` of ``x`` as a 0-d int64 tensor, computed at run time."""
    return _op.take(_op.shape_of(x, "int64"), const(np.array(axis, "int64")), axis=0)


def recur(node: Node, length: Dim, length_expr: Callable[[], RelayExpr],
          states: Sequence[RelayExpr], step: StepFn,
          reverse_outputs: Sequence[bool] = ()) -> tuple[list[RelayExpr], list[RelayExpr]]:
    """Run ``step`` ``length`` times from ``states``: (final states, stacked outputs).

    length: the number of steps, an int or the symbolic size it is (the type of the stacked
    outputs' first axis); length_expr: builds it as a 0-d int64 tensor, for a loop.
    """
    if isinstance(length, int) and length <= MAX_UNROLL:
        return _unrolled(length, list(states), step, reverse_outputs)
    return _looped(node, length, length_expr(), list(states), step, reverse_outputs)


def _unrolled(length: int, states: list[RelayExpr], step: StepFn,
              reverse_outputs: Sequence[bool]) -> tuple[list[RelayExpr], list[RelayExpr]]:
    per_step: list[list[RelayExpr]] = []
    for k in range(length):
        states, outs = step(Step(k, length), states)
        per_step.append(list(outs))
    if not per_step:
        return states, []
    stacked = []
    for j in range(len(per_step[0])):
        column = [outs[j] for outs in per_step]
        if j < len(reverse_outputs) and reverse_outputs[j]:
            column.reverse()
        stacked.append(_op.stack(column, 0))
    return states, stacked


def _ir_type(ty: TensorType) -> TensorType:
    """A type as the IR states it: symbolic sizes are ``?``."""
    return TensorType(tuple(AnyDim() if isinstance(d, ShapeVar) else d for d in ty.shape),
                      ty.dtype)


def _same_type(a: TensorType, b: TensorType) -> bool:
    """Whether a step keeps a state's type: same dtype and rank, equal static sizes (a
    symbolic size may stay or become another symbolic one: the VM checks nothing there)."""
    return a.dtype == b.dtype and a.ndim == b.ndim and all(
        x == y if isinstance(x, int) or isinstance(y, int) else True
        for x, y in zip(a.shape, b.shape))


def _empty(node: Node, elem: TensorType) -> RelayExpr:
    """A tensor of shape (0, *elem.shape): the stacked output before the first step."""
    if elem.is_static:
        return _op.zeros((0, *elem.shape), elem.dtype)
    template = node.scope.importer.sizes.template((0, *elem.shape))
    return _op.cast(template, elem.dtype)


class _Outside:
    """The sequences a loop reads, each bound once before the loop: left in the body, the
    VM would compute them (the whole input projection) again at every step."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.bound: dict[RelayExpr, Var] = {}

    def bind(self, seq: RelayExpr) -> Var:
        if seq not in self.bound:
            ty = self.node.type_of(seq)
            imp = self.node.scope.importer
            self.bound[seq] = imp.tensor_var(f"seq{len(self.bound)}", ty.dtype, ty.shape)
        return self.bound[seq]

    def wrap(self, body: RelayExpr, ty: TupleType) -> RelayExpr:
        self.node.declare(body, ty)
        for seq, var in reversed(list(self.bound.items())):
            body = Let(var, seq, body)
            self.node.declare(body, ty)
        return body


def _looped(node: Node, length: Dim, n: RelayExpr, init: list[RelayExpr], step: StepFn,
            reverse_outputs: Sequence[bool]) -> tuple[list[RelayExpr], list[RelayExpr]]:
    imp = node.scope.importer
    state_types = [node.type_of(s) for s in init]
    state_vars = [imp.tensor_var(f"state{k}", ty.dtype, ty.shape)
                  for k, ty in enumerate(state_types)]
    t = imp.tensor_var("t", "int64", ())
    outside = _Outside(node)
    known = set(imp.sizes.source)  # sizes defined before the loop
    new_states, outs = step(Step(t, n, outside.bind), list(state_vars))
    for k, (before, s) in enumerate(zip(state_types, new_states)):
        after = node.type_of(s)
        if not _same_type(before, after):
            raise node.unsupported(f"state {k} changes from {before} to {after} in a step "
                                   "(a loop's states must keep their type)")
    elems = [node.type_of(o) for o in outs]
    for k, e in enumerate(elems):
        if any(not isinstance(d, int) and d not in known for d in e.shape):
            raise node.unsupported(f"output {k} of a step has shape {e.shape}, which changes "
                                   "from step to step (a loop stacks outputs of one shape)")
    accs = [imp.tensor_var(f"acc{k}", e.dtype, (imp.sizes.named(None), *e.shape))
            for k, e in enumerate(elems)]
    grown = []
    for k, (acc, out) in enumerate(zip(accs, outs)):
        parts = [acc, _op.expand_dims(out, 0)]
        if k < len(reverse_outputs) and reverse_outputs[k]:
            parts.reverse()
        grown.append(_op.concatenate(parts, 0))
    params = [t, *state_vars, *accs]
    types = [imp.typer.types[p] for p in params]
    ir_types = [_ir_type(ty) for ty in types]  # type: ignore[arg-type]
    loop = Var("rnn_loop", FuncType(tuple(ir_types), TupleType(tuple(ir_types))))
    imp.typer.declare(loop, FuncType(tuple(types), TupleType(tuple(types))))
    one = const(np.array(1, "int64"))
    again = Call(loop, [_op.add(t, one), *new_states, *grown])
    func = Function(tuple(params), If(_op.less(t, n), again, Tuple(tuple(params))),
                    TupleType(tuple(ir_types)))
    start = [const(np.array(0, "int64")), *init, *[_empty(node, e) for e in elems]]
    result = outside.wrap(Let(loop, func, Call(loop, start)), TupleType(tuple(types)))
    finals = []
    for k, ty in enumerate([*state_types, *[TensorType((length, *e.shape), e.dtype)
                                           for e in elems]]):
        item = TupleGetItem(result, 1 + k)
        node.declare(item, ty)
        finals.append(item)
    return finals[:len(init)], finals[len(init):]
