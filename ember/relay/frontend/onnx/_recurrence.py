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

      let %loop = fn (%t, %state..., %out...) {
        if (%t < %length) { %loop(%t + 1, <step>..., where(%positions == %t, <out>, %out)...) }
        else { (%t, %state..., %out...) }
      };
      %loop(0, initial states..., zeros of the outputs' shapes...)

  where a step reads its slice with ``take`` at ``%t`` and writes its outputs at ``%t`` (so
  the loop's values keep their shapes; writing costs a pass over each output per step), and
  what does not change from step to step (the sequences read, the length) is computed
  before the loop and passed along as extra parameters.

``step`` reads the slice of a sequence for its time step with ``t.read(seq, axis, reverse)``
and gets its index as a tensor with ``t.index(dtype)``; it never sees which form it runs in.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ....ir.expr import Call, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var, const
from ....ir.types import FuncType, ShapeVar, TensorType, TupleType
from ....runtime.errors import TVMError
from ... import op as _op
from ._node import Node
from ._sequences import ir_type

# The longest sequence that unrolls: each step adds a dozen or two operators, and the build
# time grows with them (a bidirectional LSTM: ~12 CPU seconds at 128 steps, ~55 at 512; see
# docs/onnx.md). Longer known lengths run as a loop on the VM; the PassContext config
# "relay.frontend.max_unroll" moves the limit.
MAX_UNROLL = 128
MAX_UNROLL_CONFIG = "relay.frontend.max_unroll"

# Whether the RNN operators become one kernel for the whole sequence (nn.lstm, nn.gru,
# nn.rnn) where that op covers them; False keeps the step-by-step form below.
RNN_KERNEL_CONFIG = "relay.frontend.rnn_kernel"

Dim = int | ShapeVar
StepFn = Callable[["Step", list[RelayExpr]], tuple[list[RelayExpr], list[RelayExpr]]]


class Step:
    """One time step as a ``step`` function sees it: the slices of sequences it reads and its
    index, for an unrolled step (``k`` an int) or a loop's (``k`` a 0-d int64 variable)."""

    def __init__(self, k: int | Var, length: int | RelayExpr,
                 bind: Callable[[RelayExpr], RelayExpr] | None = None) -> None:
        self.k, self.length, self._bind = k, length, bind

    def position(self, reverse: bool) -> int | RelayExpr:
        if not reverse:
            return self.k
        if isinstance(self.k, int):
            return self.length - 1 - self.k  # type: ignore[operator]
        last = _op.subtract(self.length, const(np.array(1, "int64")))
        return _op.subtract(last, self.k)

    def read(self, seq: RelayExpr, axis: int = 0, reverse: bool = False,
             keep: bool = False) -> RelayExpr:
        """The slice of ``seq`` at this step along ``axis``, from the end when ``reverse``;
        that axis removed, or kept (of size 1) with ``keep``."""
        pos = self.position(reverse)
        if isinstance(pos, int):
            # A 1-element index stays an input of the fused kernel (a scalar would be inlined),
            # so every unrolled step shares one kernel.
            picked = _op.take(seq, const(np.array([pos], "int64")), axis=axis)
            return picked if keep else _op.squeeze(picked, [axis])
        assert self._bind is not None, "a loop step binds what it reads"
        index = _op.reshape(pos, [1]) if keep else pos
        return _op.take(self._bind(seq), index, axis=axis, mode="clip")

    def index(self, dtype: str) -> RelayExpr:
        """This step's index (0 for the first step) as a (1,) tensor of ``dtype``."""
        if isinstance(self.k, int):
            return const(np.array([self.k], dtype))
        k = _op.reshape(self.k, [1])
        return k if dtype == "int64" else _op.cast(k, dtype)


def axis_length(x: RelayExpr, axis: int) -> RelayExpr:
    """The size of axis ``axis`` of ``x`` as a 0-d int64 tensor, computed at run time."""
    return _op.take(_op.shape_of(x, "int64"), const(np.array(axis, "int64")), axis=0)


def recur(node: Node, seq: RelayExpr, axis: int, states: Sequence[RelayExpr], step: StepFn,
          reverse_outputs: Sequence[bool] = (), length: int | None = None
          ) -> tuple[list[RelayExpr], list[RelayExpr]]:
    """Run ``step`` once per element of ``seq`` along ``axis`` (``length`` times when given),
    from ``states``: (final states, stacked outputs)."""
    sizes = node.scope.importer.sizes
    if length is None:
        ty = node.type_of(seq)
        dim = ty.shape[axis]
        # A size computed by the ops before (a pooled width) gets a name, whose source is seq.
        length = dim if isinstance(dim, int) else sizes.elems_of(seq, ty)[axis]
    if isinstance(length, int) and 0 < length <= max_unroll():
        return _unrolled(length, list(states), step, reverse_outputs)
    return _looped(node, length, axis_length(seq, axis), list(states), step, reverse_outputs)


def max_unroll() -> int:
    """The longest sequence that unrolls: ``MAX_UNROLL``, or the PassContext's
    ``relay.frontend.max_unroll`` when the import runs in one that sets it."""
    from ....ir.transform import PassContext

    value = PassContext.current().config.get(MAX_UNROLL_CONFIG, MAX_UNROLL)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TVMError(f"PassContext config {MAX_UNROLL_CONFIG!r} must be an int >= 0, got "
                       f"{value!r}")
    return value


def use_kernel() -> bool:
    """Whether the PassContext lets the importer emit the one-kernel recurrent ops
    (``relay.frontend.rnn_kernel``, default True)."""
    from ....ir.transform import PassContext

    value = PassContext.current().config.get(RNN_KERNEL_CONFIG, True)
    if not isinstance(value, bool):
        raise TVMError(f"PassContext config {RNN_KERNEL_CONFIG!r} must be a bool, got {value!r}")
    return value


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


def _same_type(a: TensorType, b: TensorType) -> bool:
    """Whether a step keeps a state's type: same dtype and rank, equal static sizes (a
    symbolic size may stay or become another symbolic one: the VM checks nothing there)."""
    return a.dtype == b.dtype and a.ndim == b.ndim and all(
        x == y if isinstance(x, int) or isinstance(y, int) else True
        for x, y in zip(a.shape, b.shape))


def zeros(node: Node, dims: tuple[Dim, ...], dtype: str) -> RelayExpr:
    """Zeros of shape ``dims``, whose symbolic sizes are computed from the inputs' shapes (and
    kept in its type)."""
    if all(isinstance(d, int) for d in dims):
        return _op.zeros(dims, dtype)
    out = node.finish(_op.cast(node.scope.importer.sizes.template(dims), dtype))
    node.declare(out, TensorType(dims, dtype))
    return out


def arange(node: Node, length: Dim) -> RelayExpr:
    """0 .. length - 1 (int64, shape (length,))."""
    if isinstance(length, int):
        return const(np.arange(length, dtype="int64"))
    return _op.cumsum(_op.ones_like(zeros(node, (length,), "int64")), axis=0, exclusive=True)


def _positions(node: Node, length: Dim, ndim: int) -> RelayExpr:
    """0 .. length - 1 along the first of ``ndim`` axes (int64, shape (length, 1, ...))."""
    pos = arange(node, length)
    return _op.reshape(pos, [-1, *[1] * (ndim - 1)]) if ndim > 1 else pos


class _Invariants:
    """What a loop reads that does not change from step to step (the sequences, the length,
    the time positions): computed once before the loop and passed through each call as
    extra parameters. (Bound by a ``let`` around the loop instead, they would be moved into
    the loop's body by ToANormalForm, which binds a value in the innermost scope of its uses,
    and the VM would compute the whole input projection again at every step.)"""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.params: dict[RelayExpr, Var] = {}

    def bind(self, value: RelayExpr) -> Var:
        if value not in self.params:
            ty = self.node.type_of(value)
            imp = self.node.scope.importer
            self.params[value] = imp.tensor_var(f"inv{len(self.params)}", ty.dtype, ty.shape)
        return self.params[value]


def _looped(node: Node, length: Dim, n: RelayExpr, init: list[RelayExpr], step: StepFn,
            reverse_outputs: Sequence[bool]) -> tuple[list[RelayExpr], list[RelayExpr]]:
    imp = node.scope.importer
    # Sizes computed before the loop get names (sourced outside it), so the loop's types,
    # and the zeros its outputs start from, can refer to them.
    state_types = [TensorType(imp.sizes.elems_of(s, node.type_of(s)), node.type_of(s).dtype)
                   for s in init]
    state_vars = [imp.tensor_var(f"state{k}", ty.dtype, ty.shape)
                  for k, ty in enumerate(state_types)]
    t = imp.tensor_var("t", "int64", ())
    inv = _Invariants(node)
    n_var = inv.bind(n)
    known = set(imp.sizes.source)  # sizes defined before the loop
    new_states, outs = step(Step(t, n_var, inv.bind), list(state_vars))
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
    # Outputs are written into tensors of their final shape, so that every step of the loop
    # sees the same shapes (the VM plans memory once for them, not at every step).
    accs = [imp.tensor_var(f"acc{k}", e.dtype, (length, *e.shape)) for k, e in enumerate(elems)]
    grown = []
    for k, (acc, out) in enumerate(zip(accs, outs)):
        back = k < len(reverse_outputs) and reverse_outputs[k]
        pos = Step(t, n_var).position(back)
        at = _op.equal(inv.bind(_positions(node, length, 1 + elems[k].ndim)), pos)
        grown.append(_op.where(at, _op.expand_dims(out, 0), acc))
    carried = [t, *state_vars, *accs]
    params = [*carried, *inv.params.values()]
    types = [imp.typer.types[p] for p in params]
    ret = [imp.typer.types[p] for p in carried]
    ir_ret = TupleType(tuple(ir_type(imp, ty) for ty in ret))
    loop = Var("rnn_loop", FuncType(tuple(ir_type(imp, ty) for ty in types), ir_ret))
    imp.typer.declare(loop, FuncType(tuple(types), TupleType(tuple(ret))))
    again = Call(loop, [_op.add(t, const(np.array(1, "int64"))), *new_states, *grown,
                        *inv.params.values()])
    func = Function(tuple(params), If(_op.less(t, n_var), again, Tuple(tuple(carried))), ir_ret)
    start = [const(np.array(0, "int64")), *init,
             *[zeros(node, (length, *e.shape), e.dtype) for e in elems], *inv.params]
    result = Let(loop, func, Call(loop, start))
    node.declare(result, TupleType(tuple(ret)))
    finals = []
    for k, ty in enumerate(ret[1:]):
        item = TupleGetItem(result, 1 + k)
        node.declare(item, ty)
        finals.append(item)
    return finals[:len(init)], finals[len(init):]
